// B1: full sync throughput. N desired resources in one region; one gRPC client runs
// SyncDesiredState to completion: a lean reader (the target row: it measures ctrl, see
// lean-sync.ts; it accepts what the agent accepts, zstd then gzip) and connect-node clients
// (reported: they bound the wall time here).
// Reference: the same keyset scan straight through mysql2. The lean reader also syncs over TLS
// from a second ctrl process serving TLS on the same database, against a third serving
// plaintext that does the same work (one sync a round: the main ctrl serves the rest, and a
// process's pace moves with what its heap has been through), so the pair compares TLS alone
// (target: TLS costs ≤ 20%).
// A second region of as many resources, 10% of them with five secret values, probes and an
// autoscaler, is synced by the same lean reader with that region's agent token, interleaved with
// the first (also with its region's agent token): the values must not slow a full sync
// (targets: ≥ 0.95× the plain region, and ≥ 0.95× the same mix with its values as plain env).
// A snapshot carries the secrets' names and checksum; an agent that holds values fetches those it
// lacks (GetSecretEnvSeals), and a new agent, holding none, asks for the pages with their seals
// (measured: what its first sync costs, against plain env), so the values are paid for once, not
// every full sync. Both regions are also synced accepting gzip only and without compression
// (diagnostics). More
// regions of the same mix carry the values otherwise (ALTERNATIVES): the control with plain
// env, and the probes and autoscalers without any secret, the floor of every design of the
// values. Each round starts at another variant, so what runs after what (ctrl's GC debt,
// caches) evens out over the rounds.
// The main ctrl verifies ID tokens of a local issuer (single sign-on), and one more region of
// as many plain resources has its deployments in 20 projects, synced in the same groups as the
// plain region (target: ≥ 0.95×). An agent syncs with its region's token whatever the
// operators sign in with (ClusterService takes no ID token): what projects could cost a sync is
// the rows it reads and the authorization step each call takes.
import { createSecretKey } from "node:crypto";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { createConnection } from "mysql2/promise";
import { openValue, sealedKeyId, secretEnvContext, unpackValues } from "@flotilla/runtime/sealed-values";
import { DEFAULT_STREAM_OPTIONS } from "@flotilla/ctrl";
import { clusterClient, createAgentToken, type ClusterClient } from "./lib/clients.ts";
import { LeanSyncClient, type LeanSyncResult } from "./lib/lean-sync.ts";
import { CtrlProcess } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate, MIX_SECRET_VALUES, mixEvery, rawKeysetScan, seedRegion, type ServiceMix } from "./lib/db.ts";
import { benchSecretsKey, type BenchSecretsKey } from "./lib/secrets-key.ts";
import { benchTls, type BenchTls } from "./lib/tls.ts";
import { localIssuer, type LocalIssuer } from "./lib/oidc-issuer.ts";
import { createProjects } from "./lib/projects.ts";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import type { BenchContext, BenchResult } from "./lib/report.ts";
import { fmtInt, fmtRatio, log, median, medianInterval, now } from "./lib/util.ts";

const REGION = "sync";
const MIXED_REGION = "sync-mixed";
/**
 * The same mix carrying its values otherwise, each in a region of its own, synced back to back
 * with the plain and the mixed regions: a control, and no secret at all.
 */
const ALTERNATIVES: { region: string; values: NonNullable<ServiceMix["values"]>; name: string }[] = [
  { region: "sync-mixed-plain-env", values: "plain-env", name: "the same mix, its values as plain env (a control)" },
  { region: "sync-mixed-no-secrets", values: "none", name: "the probes and autoscalers alone, no secret (what any design of the values adds to)" },
];
/** A region like the plain one whose deployments belong to PROJECTS projects. */
const PROJECTS_REGION = "sync-projects";
const PROJECTS = 20;
/** The mixed region's share of deployments with secret values, probes and an autoscaler. */
const MIX_FRACTION = 0.1;
const TARGET_MIXED_RATIO = 0.95;

interface Variant {
  name: string;
  ctrl: CtrlProcess;
  sync: () => Promise<LeanSyncResult>;
  ms: number[];
  cpuMs: number[];
  clientCpuMs: number[];
  /** Bytes received in the last sync, as they came (the lean reader's only). */
  wireBytes?: number;
}

/**
 * Every seal GetSecretEnvSeals gives for `wanted`, asked `perCall` at a time (the agent asks for
 * a snapshot batch's at once; ctrl may answer part).
 */
async function fetchSeals(client: ClusterClient, wanted: { id: string; version: bigint }[], perCall: number): Promise<Map<string, Uint8Array>> {
  const seals = new Map<string, Uint8Array>();
  for (let from = 0; from < wanted.length; from += perCall) {
    for (let rest = wanted.slice(from, from + perCall); rest.length > 0; ) {
      const answer = await client.getSecretEnvSeals({ region: MIXED_REGION, deployments: rest });
      if (answer.answered === 0) throw new Error("B1: GetSecretEnvSeals answered nothing");
      for (const { id, sealed } of answer.seals) seals.set(id, sealed);
      rest = rest.slice(answer.answered);
    }
  }
  return seals;
}

/**
 * Two full syncs of the mixed region as its agent receives them, decoded: as an agent that holds
 * the values (the snapshot carries the secrets' names and checksums but no value; every value
 * then fetched with GetSecretEnvSeals) and as a new one (the pages carry the seals). Each time,
 * every workload's values of the mixed share open under the keys GetSecretKeys gives the agent.
 */
async function checkSecretsDelivered(baseUrl: string, token: string, mix: ServiceMix, count: number): Promise<number> {
  const client = clusterClient(baseUrl, { token });
  const keys = new Map((await client.getSecretKeys({ region: MIXED_REGION })).keys.map((k) => [k.id, createSecretKey(k.key)]));
  const want = Math.ceil(count / mixEvery(mix)) * MIX_SECRET_VALUES;
  for (const withSecretEnvSeals of [false, true]) {
    const awaiting: { id: string; version: bigint; names: string[]; sealed: Uint8Array }[] = [];
    for await (const res of client.syncDesiredState({ region: MIXED_REGION, withSecretEnvSeals })) {
      if (res.message.case !== "batch") continue;
      for (const r of res.message.value.resources) {
        const workload = r.spec.case === "deployment" ? r.spec.value.workload : undefined;
        if (!workload || workload.secretEnv.length === 0) continue;
        if (workload.secretEnv.some((s) => s.value !== undefined || s.sealed.length > 0) || workload.secretEnvSealed.length > 0 !== withSecretEnvSeals) {
          throw new Error(`B1: ${r.id}'s snapshot ${withSecretEnvSeals ? "lacks its seal" : "carries a value, in plain text or sealed"}`);
        }
        awaiting.push({ id: r.id, version: r.version, names: workload.secretEnv.map((s) => s.name), sealed: workload.secretEnvSealed });
      }
    }
    const fetched = withSecretEnvSeals ? undefined : await fetchSeals(client, awaiting, DEFAULT_STREAM_OPTIONS.snapshotBatchSize);
    let values = 0;
    for (const { id, names, sealed: inPage } of awaiting) {
      const sealed = fetched ? fetched.get(id) : inPage;
      const key = sealed && keys.get(sealedKeyId(sealed));
      if (!sealed || !key) throw new Error(`B1: ${id}'s values did not come, or under a key the agent lacks`);
      for (const value of unpackValues(openValue(key, secretEnvContext(id, names), sealed), names.length)) {
        if (value.length === 0) throw new Error(`B1: a secret of ${id} opened empty`);
        values++;
      }
    }
    if (values !== want) throw new Error(`B1: the mixed region's agent received ${values} secret values, want ${want}`);
  }
  return want;
}

/** SyncDesiredState through connect-node: every resource decoded. */
async function connectSync(client: ClusterClient): Promise<LeanSyncResult> {
  const result: LeanSyncResult = { resources: 0, messages: 0, complete: undefined };
  for await (const res of client.syncDesiredState({ region: REGION })) {
    result.messages++;
    if (res.message.case === "batch") result.resources += res.message.value.resources.length;
    else if (res.message.case === "complete") result.complete = res.message.value;
  }
  return result;
}

/** A full collection of this process's heap (it is not started with --expose-gc). */
const collectGarbage: () => void = (() => {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
})();

/** `list` starting at its element `by` (modulo its length), the ones before it at the end. */
function rotated<T>(list: readonly T[], by: number): T[] {
  const start = by % list.length;
  return [...list.slice(start), ...list.slice(0, start)];
}

/** One full sync of `v`, its wall time, ctrl's CPU and the client's recorded in `v`. */
async function measuredSync(v: Variant, expected: number, head: number): Promise<{ messages: number }> {
  const cpu0 = await v.ctrl.cpu();
  const client0 = process.cpuUsage();
  const synced = await fullSync(v, expected, head);
  const client1 = process.cpuUsage(client0);
  const cpu1 = await v.ctrl.cpu();
  v.clientCpuMs.push((client1.user + client1.system) / 1000);
  v.ms.push(synced.ms);
  v.wireBytes = synced.wireBytes;
  v.cpuMs.push((cpu1.user - cpu0.user + cpu1.system - cpu0.system) / 1000);
  return synced;
}

async function fullSync(v: Variant, expected: number, head: number): Promise<{ ms: number; messages: number; wireBytes?: number }> {
  const started = now();
  const { resources, messages, wireBytes, complete } = await v.sync();
  const ms = now() - started;
  if (!complete) throw new Error(`B1 (${v.name}): SyncDesiredState ended without a complete marker`);
  if (resources !== expected || Number(complete.resourceCount) !== expected || Number(complete.version) !== head) {
    throw new Error(`B1 (${v.name}): got ${resources} resources, complete=${complete.resourceCount}@${complete.version}; want ${expected}@${head}`);
  }
  return { ms, messages, wireBytes };
}

export async function runB1(ctx: BenchContext): Promise<BenchResult> {
  const count = ctx.quick ? 10_000 : 100_000;
  const reps = ctx.quick ? 2 : 5;
  const pairs = ctx.quick ? 4 : 60;
  const targetPairs = ctx.quick ? 4 : 200;
  const pageSize = DEFAULT_STREAM_OPTIONS.snapshotBatchSize;
  const db = await createBenchDatabase(ctx.serverUrl, "b1");
  let ctrl: CtrlProcess | undefined;
  let lean: LeanSyncClient | undefined;
  let tls: BenchTls | undefined;
  let tlsCtrl: CtrlProcess | undefined;
  let leanTls: LeanSyncClient | undefined;
  let twinCtrl: CtrlProcess | undefined;
  let leanTwin: LeanSyncClient | undefined;
  let secretsKey: BenchSecretsKey | undefined;
  let idp: LocalIssuer | undefined;
  const raw = await createConnection({ uri: db.url });
  try {
    await migrate(db.url);
    secretsKey = benchSecretsKey();
    const mix: ServiceMix = { fraction: MIX_FRACTION, ring: secretsKey.ring };
    const seedStart = now();
    const seeded = await seedRegion(db.url, REGION, count);
    const seedMs = now() - seedStart;
    log(`B1: seeded ${fmtInt(count)} resources in ${(seedMs / 1000).toFixed(1)} s (${fmtInt(count / (seedMs / 1000))}/s)`);
    const mixedStart = now();
    const mixed = await seedRegion(db.url, MIXED_REGION, count, { firstIndex: count, mix });
    const mixedSeedMs = now() - mixedStart;
    log(`B1: seeded ${fmtInt(count)} resources (${MIX_FRACTION * 100}% with secret values) in ${(mixedSeedMs / 1000).toFixed(1)} s`);
    const alternativeBodies: number[] = [];
    for (const [i, { region, values }] of ALTERNATIVES.entries()) {
      alternativeBodies.push((await seedRegion(db.url, region, count, { firstIndex: (2 + i) * count, mix: { ...mix, values } })).bodyBytes);
    }
    const inProjects = await seedRegion(db.url, PROJECTS_REGION, count, { firstIndex: (2 + ALTERNATIVES.length) * count, projects: PROJECTS });
    await raw.query("ANALYZE TABLE desired_resources");

    const secretsKeyFile = secretsKey.file;
    idp = await localIssuer();
    ctrl = await CtrlProcess.start(
      { databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs, secretsKeyFile, sso: idp.sso },
      { cpuProfileDir: ctx.cpuProfileDir },
    );
    await createProjects(ctrl.url, PROJECTS, Role.VIEWER, "b1-viewer");
    const projectsToken = await createAgentToken(ctrl.url, PROJECTS_REGION);
    // Each region's agent credential, as its agent syncs (the values' seals go to that caller only).
    const plainToken = await createAgentToken(ctrl.url, REGION);
    const mixedToken = await createAgentToken(ctrl.url, MIXED_REGION);
    const alternativeTokens: string[] = [];
    for (const { region } of ALTERNATIVES) alternativeTokens.push(await createAgentToken(ctrl.url, region));
    // Before the lean readers connect: ctrl closes a connection whose first request takes longer (10 s).
    const deliveredValues = await checkSecretsDelivered(ctrl.url, mixedToken, mix, count);
    tls = benchTls();
    tlsCtrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs, tls: tls.server, secretsKeyFile });
    twinCtrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs, secretsKeyFile });
    // Once every ctrl has started: a ctrl closes a connection whose first request waits longer (10 s).
    lean = new LeanSyncClient(ctrl.url);
    leanTls = new LeanSyncClient(tlsCtrl.url, tls.ca);
    leanTwin = new LeanSyncClient(twinCtrl.url);
    const connectDefault = clusterClient(ctrl.url);
    const connectPlain = clusterClient(ctrl.url, { acceptCompression: [] });
    const variant = (name: string, sync: () => Promise<LeanSyncResult>, served = ctrl!): Variant => ({
      name,
      ctrl: served,
      sync,
      ms: [],
      cpuMs: [],
      clientCpuMs: [],
    });
    const leanClient = lean;
    const leanTlsClient = leanTls;
    const leanTwinClient = leanTwin;
    // The lean reader accepts what the agent accepts (zstd first) unless a variant says otherwise.
    const variants: Variant[] = [
      variant("lean reader", () => leanClient.sync(REGION, plainToken)),
      variant("lean reader over TLS", () => leanTlsClient.sync(REGION, plainToken), tlsCtrl),
      variant("lean reader, plaintext, from the TLS ctrl's twin", () => leanTwinClient.sync(REGION, plainToken), twinCtrl),
      variant(`lean reader, ${MIX_FRACTION * 100}% with secret values`, () => leanClient.sync(MIXED_REGION, mixedToken)),
      // Ciphertext does not compress: gzip only (connect-node's default) and no compression tell
      // the compressor's share and the bytes' share apart.
      variant("lean reader accepting gzip only", () => leanClient.sync(REGION, plainToken, { accept: "gzip" })),
      variant(`lean reader accepting gzip only, ${MIX_FRACTION * 100}% with secret values`, () =>
        leanClient.sync(MIXED_REGION, mixedToken, { accept: "gzip" }),
      ),
      variant("lean reader accepting no compression", () => leanClient.sync(REGION, plainToken, { accept: "identity" })),
      variant(`lean reader accepting no compression, ${MIX_FRACTION * 100}% with secret values`, () =>
        leanClient.sync(MIXED_REGION, mixedToken, { accept: "identity" }),
      ),
      variant("connect-node client (decodes every resource)", () => connectSync(connectDefault)),
      variant("connect-node client accepting no compression", () => connectSync(connectPlain)),
    ];

    const mixedVariant = variants[3]!;
    const [plainGzip, mixedGzip, plainIdentity, mixedIdentity] = variants.slice(4, 8);
    const alternatives = ALTERNATIVES.map(({ region, name }, i) =>
      variant(`lean reader, ${MIX_FRACTION * 100}% with ${name}`, () => leanClient.sync(region, alternativeTokens[i]!)),
    );
    // An agent that holds no value asks for the pages with the seals (its first sync since it started).
    const newAgent = variant(`a new agent: the mixed region's snapshot with the values' seals in its pages`, () =>
      leanClient.sync(MIXED_REGION, mixedToken, { withSecretEnvSeals: true }),
    );
    const projectsVariant = variant(`lean reader, the region's deployments in ${PROJECTS} projects`, () => leanClient.sync(PROJECTS_REGION, projectsToken));
    // Warm-up (buffer pool, JIT, HTTP/2 connections); not measured.
    await rawKeysetScan(raw, seeded.regionId, pageSize);
    await rawKeysetScan(raw, mixed.regionId, pageSize);
    for (const v of [...variants, ...alternatives, newAgent, projectsVariant]) await fullSync(v, count, seeded.head);

    const rawMs: number[] = [];
    const rawMixedMs: number[] = [];
    let messages = 0;
    let mixedMessages = 0;
    // Interleaved, so drifting machine noise hits every variant alike.
    for (let rep = 0; rep < reps; rep++) {
      const t = now();
      const scanned = await rawKeysetScan(raw, seeded.regionId, pageSize);
      rawMs.push(now() - t);
      if (scanned.rows !== count) throw new Error(`B1: raw scan read ${scanned.rows} rows, want ${count}`);
      const tm = now();
      const scannedMixed = await rawKeysetScan(raw, mixed.regionId, pageSize);
      rawMixedMs.push(now() - tm);
      if (scannedMixed.rows !== count) throw new Error(`B1: raw scan of the mixed region read ${scannedMixed.rows} rows, want ${count}`);
      // Each round starts at another variant: what runs after what (ctrl's GC debt, caches) evens out.
      for (const v of rotated(variants, rep * 5)) {
        const synced = await measuredSync(v, count, seeded.head);
        if (v === mixedVariant) mixedMessages = synced.messages;
        else messages = synced.messages;
      }
      log(`B1 rep ${rep + 1}/${reps}: raw ${rawMs.at(-1)!.toFixed(0)} ms; ${variants.map((v) => `${v.name} ${v.ms.at(-1)!.toFixed(0)} ms`).join(", ")}`);
    }
    // The mixed region's targets compare it back to back (which goes first rotates) with the
    // plain region and with its control: syncs a moment apart share the machine's noise, which
    // across a round of every variant moves either rate by a third. The floor without secrets
    // and a new agent's first sync run in the same groups, against the same plain syncs. Each
    // starts from collected heaps in ctrl and here: otherwise a sync pays for the garbage of the
    // one before it, and the order decides who pays.
    const unmeasured = (v: Variant): Variant => ({ ...v, ms: [], cpuMs: [], clientCpuMs: [] });
    const pairPlain = unmeasured(variants[0]!);
    const pairMixed = unmeasured(mixedVariant);
    const [plainEnvMix, noSecrets] = alternatives;
    const group = [pairPlain, pairMixed, ...alternatives, newAgent, projectsVariant];
    for (let pair = 0; pair < pairs; pair++) {
      for (const v of rotated(group, pair)) {
        await v.ctrl.memory();
        collectGarbage();
        await measuredSync(v, count, seeded.head);
      }
    }
    // The target pair alone, many times: a pair's ratio moves by a tenth or more with the
    // machine's noise, so 60 medians of runs differed by 0.1; 200 pairs give the median an
    // interval of about ±0.02. Which goes first alternates; each starts from collected heaps.
    const targetPlain = unmeasured(variants[0]!);
    const targetMixed = unmeasured(mixedVariant);
    for (let pair = 0; pair < targetPairs; pair++) {
      for (const v of pair % 2 ? [targetMixed, targetPlain] : [targetPlain, targetMixed]) {
        await v.ctrl.memory();
        collectGarbage();
        await measuredSync(v, count, seeded.head);
      }
    }
    /** Per group, the rate of `v` against `reference`'s (so the CPU of `reference` against `v`'s). */
    const ratios = (v: Variant, of: (v: Variant) => number[], reference = pairPlain) => of(reference).map((x, i) => x / of(v)[i]!);
    const pairRatios = ratios(targetMixed, (v) => v.ms, targetPlain);
    const pairCpuRatios = ratios(targetMixed, (v) => v.cpuMs, targetPlain);
    const [mixedRatioLow, mixedRatioHigh] = medianInterval(pairRatios);
    const secrecyRatios = ratios(pairMixed, (v) => v.ms, plainEnvMix);
    const secrecyRatio = median(secrecyRatios);
    const mib = (v: Variant) => `${((v.wireBytes ?? 0) / 2 ** 20).toFixed(1)} MiB received`;
    const rawRate = count / (median(rawMs) / 1000);
    const rate = (v: Variant) => count / (median(v.ms) / 1000);
    const [main, overTls, twin, , ...diagnostics] = variants;
    const mainRate = rate(main!);
    const tlsRate = rate(overTls!);
    const twinRate = rate(twin!);
    const mixedRate = rate(targetMixed);
    const pairPlainRate = rate(targetPlain);
    const mixedRatio = median(pairRatios);
    const rawMixedRate = count / (median(rawMixedMs) / 1000);
    const reference = `raw keyset scan ${fmtInt(rawRate)}/s`;
    return {
      rows: [
        {
          benchmark: `B1 full sync, ${fmtInt(count)} resources, resources/s (gRPC, lean reader)`,
          measured: `${fmtInt(mainRate)}/s`,
          reference,
          ratio: fmtRatio(mainRate / rawRate),
          target: "≥ 50,000/s and ≥ 0.5×",
          met: mainRate >= 50_000 && mainRate / rawRate >= 0.5,
        },
        {
          benchmark: `B1 full sync over TLS, ${fmtInt(count)} resources, resources/s (gRPC, lean reader)`,
          measured: `${fmtInt(tlsRate)}/s`,
          reference: `plaintext from its twin ctrl ${fmtInt(twinRate)}/s (from the main ctrl ${fmtInt(mainRate)}/s)`,
          ratio: fmtRatio(tlsRate / twinRate),
          target: "≥ 0.8× plaintext",
          met: tlsRate / twinRate >= 0.8,
        },
        {
          benchmark: `B1 full sync, ${fmtInt(count)} resources, ${MIX_FRACTION * 100}% with five secret values, probes and autoscaling (agent credential)`,
          measured: `${fmtInt(mixedRate)}/s`,
          reference: `plain region ${fmtInt(pairPlainRate)}/s (back to back, ${targetPairs} times; the ratio is the median pair's, 95% interval ${fmtRatio(mixedRatioLow)} to ${fmtRatio(mixedRatioHigh)})`,
          ratio: fmtRatio(mixedRatio),
          target: `≥ ${TARGET_MIXED_RATIO}× plain`,
          met: mixedRatio >= TARGET_MIXED_RATIO,
        },
        {
          benchmark: `B1 full sync, the same mix: its secret values against the same values as plain env (what secrecy costs)`,
          measured: `${fmtInt(rate(pairMixed))}/s`,
          reference: `plain env ${fmtInt(rate(plainEnvMix!))}/s (back to back, ${pairs} times; the ratio is the median group's)`,
          ratio: fmtRatio(secrecyRatio),
          target: `≥ ${TARGET_MIXED_RATIO}× plain env`,
          met: secrecyRatio >= TARGET_MIXED_RATIO,
        },
        {
          benchmark: `B1 full sync, ${fmtInt(count)} resources, the region's deployments in ${PROJECTS} projects (agent credential; ctrl with single sign-on)`,
          measured: `${fmtInt(rate(projectsVariant))}/s`,
          reference: `plain region ${fmtInt(rate(pairPlain))}/s (back to back, ${pairs} times; the ratio is the median group's)`,
          ratio: fmtRatio(median(ratios(projectsVariant, (x) => x.ms))),
          target: `≥ ${TARGET_MIXED_RATIO}× plain`,
          met: median(ratios(projectsVariant, (x) => x.ms)) >= TARGET_MIXED_RATIO,
        },
        ...[
          { v: noSecrets!, against: pairPlain },
          { v: newAgent, against: plainEnvMix! },
          { v: newAgent, against: pairPlain },
        ].map(({ v, against }) => ({
          benchmark: `B1 diagnostic: ${v.name}`,
          measured: `${fmtInt(rate(v))}/s`,
          reference: `${against === pairPlain ? "plain region" : "plain env"} ${fmtInt(rate(against))}/s (back to back; ctrl's CPU ${fmtRatio(median(ratios(v, (x) => x.cpuMs, against)))}; ${mib(v)})`,
          ratio: fmtRatio(median(ratios(v, (x) => x.ms, against))),
          target: "(diagnostic)",
          met: undefined,
        })),
        ...diagnostics.map((v) => {
          // Against what it is a control of: the mixed region without compression is against the plain one without.
          const against = v === mixedIdentity ? plainIdentity : v === mixedGzip ? plainGzip : undefined;
          return {
            benchmark: `B1 diagnostic: ${v.name}`,
            measured: `${fmtInt(rate(v))}/s`,
            reference: against ? `${against.name} ${fmtInt(rate(against))}/s` : reference,
            ratio: fmtRatio(rate(v) / (against ? rate(against) : rawRate)),
            target: "(diagnostic)",
            met: undefined,
          };
        }),
      ],
      notes: [
        `B1: median of ${reps} interleaved runs each; batch (page) size ${pageSize}; ${messages} response messages per sync; ` +
          `mean desired-resource body ${Math.round(seeded.bodyBytes / count)} B (${(seeded.bodyBytes / 2 ** 20).toFixed(1)} MiB in all); seeding ${fmtInt(count)} rows took ${(seedMs / 1000).toFixed(1)} s. ` +
          `The lean reader syncs with the region's agent token (as an agent does: a snapshot carries the secrets' names and checksums, never their values) and accepts zstd, then gzip, as the agent does; the connect-node clients sync with the admin token and accept gzip (their default).`,
        `B1 mixed region: ${fmtInt(count)} resources, every ${mixEvery(mix)}th with ${MIX_SECRET_VALUES} secret values (32 random bytes each, sealed as one for the region's agent beside the body, as ctrl stores them), ` +
          `readiness and liveness HTTP probes and an autoscaler (min 2, max 10, CPU 70%); mean body ${Math.round(mixed.bodyBytes / count)} B (${(mixed.bodyBytes / 2 ** 20).toFixed(1)} MiB in all; ` +
          `${ALTERNATIVES.map(({ values }, i) => `${values} ${Math.round(alternativeBodies[i]! / count)} B`).join(", ")}); ` +
          `${mixedMessages} response messages per sync; seeded in ${(mixedSeedMs / 1000).toFixed(1)} s; decoded syncs with its agent token received all ${fmtInt(deliveredValues)} values, once from GetSecretEnvSeals (none in the snapshot), once in the pages (asked with the seals, as a new agent asks), each opening under the keys GetSecretKeys gave it. ` +
          `Raw keyset scan of it ${fmtInt(rawMixedRate)}/s (${fmtRatio(rawMixedRate / rawRate)} the plain region's; wall times ${rawMixedMs.map((m) => m.toFixed(0)).join("/")} ms).`,
        `B1 mixed against plain, back to back ${targetPairs} times: the mixed region's rate against the plain one's ${pairRatios.map(fmtRatio).join(", ")} (median ${fmtRatio(mixedRatio)}, 95% interval of the median ${fmtRatio(mixedRatioLow)} to ${fmtRatio(mixedRatioHigh)}); ` +
          `ctrl's CPU per sync, plain against mixed, ${pairCpuRatios.map(fmtRatio).join(", ")} (median ${fmtRatio(median(pairCpuRatios))}); ` +
          `wall times (ms) plain ${targetPlain.ms.map((m) => m.toFixed(0)).join("/")}, mixed ${targetMixed.ms.map((m) => m.toFixed(0)).join("/")} (${mib(targetPlain)} and ${mib(targetMixed)}). ` +
          `In the ${pairs} groups, median CPU per sync (ms) of ctrl and of the lean reader (inflating and walking what it receives, on the same cores): ${[
            pairPlain,
            pairMixed,
            noSecrets!,
          ]
            .map(
              (v) =>
                `${v === pairPlain ? "plain" : v === pairMixed ? "mixed" : "no secret"} ${median(v.cpuMs).toFixed(0)} and ${median(v.clientCpuMs).toFixed(0)}`,
            )
            .join(", ")}. ` +
          `The mix with secret values against its values as plain env, in the same groups: ${secrecyRatios.map(fmtRatio).join(", ")} (median ${fmtRatio(secrecyRatio)}; plain env ${mib(plainEnvMix!)}). ` +
          `Against the plain region, in the same groups: ${[noSecrets!, newAgent]
            .map(
              (v) =>
                `${v.name} ${ratios(v, (x) => x.ms)
                  .map(fmtRatio)
                  .join(", ")}`,
            )
            .join("; ")}.`,
        `B1 with ${PROJECTS} projects: a region of ${fmtInt(count)} plain resources whose deployments belong to ${PROJECTS} projects (each granting a viewer operator and a group; mean body ${Math.round(inProjects.bodyBytes / count)} B, the plain region's ${Math.round(seeded.bodyBytes / count)} B), ` +
          `synced with its agent token from the main ctrl, which verifies ID tokens of a local issuer; against the plain region in the same groups: ${ratios(
            projectsVariant,
            (x) => x.ms,
          )
            .map(fmtRatio)
            .join(", ")} (ctrl's CPU per sync, plain against it: median ${fmtRatio(median(ratios(projectsVariant, (x) => x.cpuMs)))}).`,
        `B1: wall times (ms) — raw scan ${rawMs.map((m) => m.toFixed(0)).join("/")}; ` +
          variants
            .map(
              (v) =>
                `${v.name} ${v.ms.map((m) => m.toFixed(0)).join("/")} (CPU: ctrl ${median(v.cpuMs).toFixed(0)}, client ${median(v.clientCpuMs).toFixed(0)}` +
                (v.wireBytes === undefined ? ")" : `; ${(v.wireBytes / 2 ** 20).toFixed(1)} MiB received)`),
            )
            .join("; ") +
          ".",
      ],
    };
  } finally {
    await raw.end().catch(() => undefined);
    lean?.close();
    leanTls?.close();
    leanTwin?.close();
    await ctrl?.stop();
    await tlsCtrl?.stop();
    await twinCtrl?.stop();
    tls?.cleanup();
    secretsKey?.cleanup();
    idp?.close();
    await db.drop();
  }
}
