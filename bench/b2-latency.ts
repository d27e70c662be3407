// B2: commit → client receive latency with many open watch streams on one ctrl.
// (a) writes through the ctrl process's own Store (they wake its poller at once);
// (b) writes through a second Store in the benchmark process, like another ctrl replica
//     (only the poll interval picks them up).
// Reference: the same measurement with a single open stream, in the same run.
// Then (a) again with ctrl serving TLS, beside the plaintext numbers of the same run.
// Last, (a) on a ctrl with single sign-on and 20 projects, each write an UpdateDeployment call
// by a project deployer: an operator's static token and an ID token (its groups granting the
// same role) take turns on the same streams, so the two credentials share the machine's noise.
// ClusterService takes agent tokens only: the watch streams' own credential is the region's.
import { Store } from "@flotilla/store";
import { create } from "@bufbuild/protobuf";
import { DeploymentSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { FrameWatchFleet } from "./lib/frame-watch-fleet.ts";
import { CtrlProcess, type WriteSpec } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate } from "./lib/db.ts";
import { benchTls, type BenchTls } from "./lib/tls.ts";
import type { BenchContext, BenchResult, Row } from "./lib/report.ts";
import { fmtInt, fmtMs, fmtRatio, log, now, percentile, sleep, waitFor } from "./lib/util.ts";
import { storeDecisions } from "@flotilla/ctrl/rollouts";
import { OidcVerifier } from "@flotilla/ctrl/oidc-verifier";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { serviceClient } from "./lib/clients.ts";
import { BENCH_CLIENT_ID, localIssuer, type LocalIssuer } from "./lib/oidc-issuer.ts";
import { createProjects, projectGroup, projectName, projectNamespace } from "./lib/projects.ts";

const REGION = "latency";
const DEPLOYMENTS = 10;
const CONNECTIONS = 4;
const PROJECTS = 20;
/** Single sign-on's latency against a static token's, within this (p50 and p99). */
const TARGET_SSO_RATIO = 1.05;
/** Writes per credential with 20 projects, per write of (a). */
const SSO_WRITES_PER_WRITE = 10;

type Mode = "same-process" | "other-process";

/** One write: its commit time, and when its API call started (writes through the API), on this process's clock. */
interface Written {
  committedAt: number;
  calledAt?: number;
  /** Which writer made it (the samples are kept per writer). */
  writer?: string;
}

interface LatencyRun {
  streams: number;
  writes: number;
  samples: number[];
  /** Per writer: commit → receive, and call → receive (writes through the API only). */
  byWriter: Map<string, { samples: number[]; fromCall: number[] }>;
  /** Streams that had not received every write when the run ended. */
  incomplete: number;
  errors: number;
  /** CPU time of the ctrl process over the measured writes. */
  ctrlCpuMs: number;
  /** Change events ctrl sent on watch streams over the measured writes. */
  eventsSent: number;
  /** CPU time of this (the clients') process over the measured writes. */
  clientCpuMs: number;
}

export async function runB2(ctx: BenchContext): Promise<BenchResult> {
  const streams = ctx.quick ? 200 : 1000;
  const writes = ctx.quick ? 40 : 200;
  const referenceWrites = ctx.quick ? 20 : 100;
  const db = await createBenchDatabase(ctx.serverUrl, "b2");
  let ctrl: CtrlProcess | undefined;
  let other: Store | undefined;
  let tls: BenchTls | undefined;
  let idp: LocalIssuer | undefined;
  try {
    await migrate(db.url);
    other = await Store.open(db.url, { rollouts: storeDecisions });
    await other.regions.create(REGION);
    const spec = (i: number, image: string): WriteSpec => ({ id: `lat-${i}`, namespace: "bench", image, region: REGION, replicas: 2 });
    const toDeployment = (w: WriteSpec) =>
      create(DeploymentSchema, { id: w.id, namespace: w.namespace, image: w.image, port: 8080, regions: [{ region: w.region, replicas: w.replicas }] });
    for (let i = 0; i < DEPLOYMENTS; i++) await other.deployments.create(toDeployment(spec(i, "app:w0")));
    ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs }, { cpuProfileDir: ctx.cpuProfileDir });
    log(`B2: ctrl child clock offset ${ctrl.clockOffset.toFixed(3)} ms`);
    // Replaced by a TLS-serving ctrl for the last measurement.
    let c = ctrl;
    let ca: Buffer | undefined;
    const store = other;

    // Commit times come from the Stores' commit listeners: they run synchronously right after
    // the transaction committed, before anything else can run in that process.
    let lastCommitAt = 0;
    store.onCommit(() => {
      lastCommitAt = now();
    });
    let seq = 0;
    /** Writes one change in `mode`. */
    const write = async (mode: Mode): Promise<Written> => {
      const n = ++seq;
      const w = spec(n % DEPLOYMENTS, `app:w${n}`);
      if (mode === "same-process") return { committedAt: await c.write("update", w) };
      lastCommitAt = 0;
      await store.deployments.update(toDeployment(w));
      if (lastCommitAt === 0) throw new Error(`B2: write ${n} changed nothing`);
      return { committedAt: lastCommitAt };
    };

    /** `writeCount` writes by `writeOne`, each waited for on `streamCount` streams; `mode` says how long to pause between them. */
    const measure = async (mode: Mode, streamCount: number, writeCount: number, writeOne = () => write(mode)): Promise<LatencyRun> => {
      const head = (await store.regions.resolve(REGION)).headVersion;
      // version → every stream's receive time, by stream (commit times may be known only later).
      const received = new Map<number, Float64Array>();
      const fleet = new FrameWatchFleet(c.url, REGION, streamCount, {
        connections: CONNECTIONS,
        ca,
        versionLastSeen: head,
        onMessage(stream, res, receivedAt) {
          if (res.events === 0) return;
          let times = received.get(res.version);
          if (!times) received.set(res.version, (times = new Float64Array(streamCount).fill(Number.NaN)));
          times[stream.index] = receivedAt;
        },
      });
      try {
        await waitFor(`${streamCount} open watch streams`, async () => (await c.metrics()).watchStreams === streamCount, 120_000, 100);
        // Warm-up: every stream must receive these before measuring.
        let version = head;
        for (let i = 0; i < 3; i++) {
          await writeOne();
          version++;
        }
        await waitFor("warm-up writes on every stream", () => fleet.behind(version) === 0, 30_000);
        const committed = new Map<number, Written>();
        const cpu0 = await c.cpu();
        const clientCpu0 = process.cpuUsage();
        const events0 = (await c.metrics()).watchEvents;
        for (let i = 0; i < writeCount; i++) {
          const written = await writeOne();
          version++;
          committed.set(version, written);
          // Each write is measured on its own: the next one starts only after every stream
          // received this one, after a random pause (for other-process writes up to one
          // poll interval, so writes land at every phase of the poller's timer).
          const v = version;
          await waitFor(`version ${v} on every stream`, () => fleet.behind(v) === 0, 30_000, 2).catch(() => undefined);
          await sleep(mode === "same-process" ? 20 + Math.random() * 30 : Math.random() * ctx.pollIntervalMs);
        }
        const finalVersion = version;
        await waitFor("the last write on every stream", () => fleet.behind(finalVersion) === 0, 15_000).catch(() => undefined);
        const cpu1 = await c.cpu();
        const clientCpu = process.cpuUsage(clientCpu0);
        const events1 = (await c.metrics()).watchEvents;
        const samples: number[] = [];
        const byWriter = new Map<string, { samples: number[]; fromCall: number[] }>();
        for (const [v, { committedAt, calledAt, writer }] of committed) {
          let mine = writer === undefined ? undefined : byWriter.get(writer);
          if (writer !== undefined && !mine) byWriter.set(writer, (mine = { samples: [], fromCall: [] }));
          for (const r of received.get(v) ?? []) {
            if (Number.isNaN(r)) continue;
            samples.push(r - committedAt);
            mine?.samples.push(r - committedAt);
            if (calledAt !== undefined) mine?.fromCall.push(r - calledAt);
          }
        }
        return {
          streams: streamCount,
          writes: writeCount,
          samples,
          byWriter,
          incomplete: fleet.behind(finalVersion),
          errors: fleet.errors.length,
          ctrlCpuMs: (cpu1.user - cpu0.user + cpu1.system - cpu0.system) / 1000,
          eventsSent: events1 - events0,
          clientCpuMs: (clientCpu.user + clientCpu.system) / 1000,
        };
      } finally {
        await fleet.close();
        await waitFor("watch streams to close", async () => (await c.metrics()).watchStreams === 0, 30_000, 100).catch(() => undefined);
      }
    };

    const rows: Row[] = [];
    const notes: string[] = [];
    let plaintextSameProcess: LatencyRun | undefined;
    for (const mode of ["same-process", "other-process"] as const) {
      const main = await measure(mode, streams, writes);
      if (mode === "same-process") plaintextSameProcess = main;
      const ref = await measure(mode, 1, referenceWrites);
      const p = (r: LatencyRun, q: number) => percentile(r.samples, q);
      const target = mode === "same-process" ? 25 : ctx.pollIntervalMs + 50;
      const label = mode === "same-process" ? "(a) same-process writes" : `(b) other-process writes, poll ${ctx.pollIntervalMs} ms`;
      log(
        `B2 ${mode}: ${main.streams} streams p50 ${fmtMs(p(main, 50))} p99 ${fmtMs(p(main, 99))}; 1 stream p50 ${fmtMs(p(ref, 50))} p99 ${fmtMs(p(ref, 99))}`,
      );
      rows.push(
        {
          benchmark: `B2${mode === "same-process" ? "a" : "b"} latency p50, ${fmtInt(streams)} streams, ${label}`,
          measured: fmtMs(p(main, 50)),
          reference: `1 stream: ${fmtMs(p(ref, 50))}`,
          ratio: fmtRatio(p(main, 50) / p(ref, 50)),
          target: "—",
          met: undefined,
        },
        {
          benchmark: `B2${mode === "same-process" ? "a" : "b"} latency p99, ${fmtInt(streams)} streams, ${label}`,
          measured: fmtMs(p(main, 99)),
          reference: `1 stream: ${fmtMs(p(ref, 99))}`,
          ratio: fmtRatio(p(main, 99) / p(ref, 99)),
          target: `≤ ${target} ms`,
          met: p(main, 99) <= target && main.incomplete === 0 && main.errors === 0,
        },
      );
      notes.push(
        `B2 ${mode}: ${main.writes} writes × ${fmtInt(main.streams)} streams = ${fmtInt(main.samples.length)} samples (max ${fmtMs(main.samples.reduce((a, b) => Math.max(a, b), -Infinity))}, min ${fmtMs(main.samples.reduce((a, b) => Math.min(a, b), Infinity))}, negative ${main.samples.filter((x) => x < 0).length}); ` +
          `streams missing the last write at the end: ${main.incomplete}, failed streams: ${main.errors}. ` +
          `ctrl CPU over the measured writes: ${main.ctrlCpuMs.toFixed(0)} ms for ${fmtInt(main.eventsSent)} events sent = ${((main.ctrlCpuMs * 1000) / main.eventsSent).toFixed(0)} µs per delivered event ` +
          `(so one write fanned out to ${fmtInt(streams)} streams costs ≈ ${((main.ctrlCpuMs / main.eventsSent) * streams).toFixed(0)} ms of ctrl CPU); ` +
          `the clients' process (all ${fmtInt(streams)} streams, sharing the machine's cores with ctrl) used ${main.clientCpuMs.toFixed(0)} ms = ${((main.clientCpuMs * 1000) / main.eventsSent).toFixed(0)} µs per received event. ` +
          `Reference: ${ref.writes} writes on 1 stream (max ${fmtMs(Math.max(...ref.samples))}).`,
      );
    }
    // (a) over TLS: the same database and writes, ctrl restarted serving TLS.
    await ctrl.stop();
    tls = benchTls();
    ctrl = c = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs, tls: tls.server }, { cpuProfileDir: ctx.cpuProfileDir });
    ca = tls.ca;
    const overTls = await measure("same-process", streams, writes);
    const plain = plaintextSameProcess!;
    log(`B2 same-process over TLS: ${overTls.streams} streams p50 ${fmtMs(percentile(overTls.samples, 50))} p99 ${fmtMs(percentile(overTls.samples, 99))}`);
    for (const q of [50, 99]) {
      rows.push({
        benchmark: `B2a latency p${q} over TLS, ${fmtInt(streams)} streams, (a) same-process writes`,
        measured: fmtMs(percentile(overTls.samples, q)),
        reference: `plaintext: ${fmtMs(percentile(plain.samples, q))}`,
        ratio: fmtRatio(percentile(overTls.samples, q) / percentile(plain.samples, q)),
        target: q === 99 ? "≤ 25 ms" : "—",
        met: q === 99 ? percentile(overTls.samples, 99) <= 25 && overTls.incomplete === 0 && overTls.errors === 0 : undefined,
      });
    }
    notes.push(
      `B2 same-process over TLS: ${overTls.samples.length} samples; streams missing the last write: ${overTls.incomplete}, failed: ${overTls.errors}; ` +
        `ctrl CPU ${((overTls.ctrlCpuMs * 1000) / overTls.eventsSent).toFixed(0)} µs per delivered event (plaintext ${((plain.ctrlCpuMs * 1000) / plain.eventsSent).toFixed(0)} µs); ` +
        `clients ${((overTls.clientCpuMs * 1000) / overTls.eventsSent).toFixed(0)} µs per received event (plaintext ${((plain.clientCpuMs * 1000) / plain.eventsSent).toFixed(0)} µs).`,
    );

    // (a) with 20 projects, through the API: a static operator token and an ID token take turns.
    await ctrl.stop();
    idp = await localIssuer();
    ctrl = c = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs, sso: idp.sso }, { cpuProfileDir: ctx.cpuProfileDir });
    ca = undefined;
    const staticToken = await createProjects(c.url, PROJECTS, Role.DEPLOYER, "b2-writer");
    const idToken = idp.token(
      "b2-writer",
      Array.from({ length: PROJECTS }, (_, i) => projectGroup(i)),
    );
    const writers = { static: serviceClient(DeploymentService, c.url, staticToken), oidc: serviceClient(DeploymentService, c.url, idToken) };
    const inProject = (i: number, image: string) => ({
      id: `proj-${i}`,
      project: projectName(i),
      namespace: projectNamespace(i),
      image,
      port: 8080,
      regions: [{ region: REGION, replicas: 2 }],
    });
    for (let i = 0; i < PROJECTS; i++) await serviceClient(DeploymentService, c.url).createDeployment({ deployment: inProject(i, "app:p0") });
    const regionId = (await store.regions.resolve(REGION)).id;
    let turn = 0;
    const apiWrite = async (): Promise<Written> => {
      const n = turn++;
      const writer = n % 2 === 0 ? "static" : "oidc";
      const calledAt = now();
      // Each credential writes to every project in turn.
      await writers[writer].updateDeployment({ deployment: inProject(Math.floor(n / 2) % PROJECTS, `app:p${n + 1}`) });
      const committedAt = await c.lastCommit(regionId);
      if (committedAt === undefined || committedAt < calledAt) throw new Error(`B2: write ${n} by the ${writer} token committed nothing`);
      return { committedAt, calledAt, writer };
    };
    // 10 times (a)'s writes for each credential: a p99 of 1,000 streams is set by the few slowest
    // writes, and with fewer of them which credential drew those decides the ratio (5 times
    // read 1.07× once at p99s near 13 ms, where 1 ms of noise is 7%).
    const withProjects = await measure("same-process", streams, 2 * SSO_WRITES_PER_WRITE * writes, apiWrite);
    const bySso = withProjects.byWriter.get("oidc")!;
    const byStatic = withProjects.byWriter.get("static")!;
    log(
      `B2 with ${PROJECTS} projects: static token p50 ${fmtMs(percentile(byStatic.samples, 50))} p99 ${fmtMs(percentile(byStatic.samples, 99))}; ` +
        `ID token p50 ${fmtMs(percentile(bySso.samples, 50))} p99 ${fmtMs(percentile(bySso.samples, 99))}`,
    );
    for (const [what, of] of [
      ["commit → receive", (w: typeof bySso) => w.samples],
      ["call → receive", (w: typeof bySso) => w.fromCall],
    ] as const) {
      for (const q of [50, 99]) {
        const sso = percentile(of(bySso), q);
        const plain = percentile(of(byStatic), q);
        // A call's tail is the database's: its commits wait on the log's flush, whose outliers
        // fall on either credential's writes (shown, not judged).
        const judged = what === "commit → receive" || q === 50;
        rows.push({
          benchmark: `B2a latency p${q}, ${what}, ${PROJECTS} projects, writes by UpdateDeployment with an ID token (single sign-on)`,
          measured: fmtMs(sso),
          reference: `a static operator token, turn about: ${fmtMs(plain)}`,
          ratio: fmtRatio(sso / plain),
          target: judged ? `≤ ${TARGET_SSO_RATIO}× static` : "(diagnostic)",
          met: judged ? sso / plain <= TARGET_SSO_RATIO && withProjects.incomplete === 0 && withProjects.errors === 0 : undefined,
        });
      }
    }
    // What ctrl's cache spares each call: verifying an ID token it has not seen, in this process.
    const verifier = new OidcVerifier({ issuer: idp.issuer, audiences: [BENCH_CLIENT_ID] });
    await verifier.verify(idp.token("warm-up", [projectGroup(0)]));
    const verifyUs: number[] = [];
    for (let i = 0; i < 1000; i++) {
      const token = idp.token(`user-${i}`, [projectGroup(i % PROJECTS)]);
      const t0 = now();
      await verifier.verify(token);
      verifyUs.push((now() - t0) * 1000);
    }
    notes.push(
      `B2 with ${PROJECTS} projects: ctrl with single sign-on (a local ES256 issuer); each project grants deployer to one operator account and to one group; ` +
        `${withProjects.writes} UpdateDeployment calls (${withProjects.writes / 2} per credential, each credential writing to every project in turn), ` +
        `each waited for on all ${fmtInt(streams)} streams, commit times taken in ctrl's commit listener; streams missing the last write: ${withProjects.incomplete}, failed: ${withProjects.errors}. ` +
        `ctrl verifies an ID token once and caches the identity until the token expires or its key set is due (auth.ts): verifying one it has not seen ` +
        `(OidcVerifier.verify, ES256, 1,000 new tokens in this process) costs p50 ${percentile(verifyUs, 50).toFixed(0)} µs, p99 ${percentile(verifyUs, 99).toFixed(0)} µs; every later call is a cache hit.`,
    );
    notes.push(
      "B2: a negative sample means a stream received the change before the writer's COMMIT returned: the database makes a commit visible " +
        "to other readers (here ctrl's poll) before it has flushed its log and answered the writer.",
      `B2: ${fmtInt(streams)} streams over ${CONNECTIONS} HTTP/2 connections from the benchmark process, read off their HTTP/2 frames (FrameWatchFleet); ctrl in its own process; ` +
        `same-process commit times are taken in ctrl's process right after the commit returned and mapped to the benchmark's clock (offset ${ctrl.clockOffset.toFixed(2)} ms, by ping).`,
    );
    return { rows, notes };
  } finally {
    await ctrl?.stop();
    await other?.close();
    tls?.cleanup();
    idp?.close();
    await db.drop();
  }
}
