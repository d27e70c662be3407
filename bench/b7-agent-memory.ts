// B7: the agent's memory with 100,000 desired resources. ctrl runs in its own process
// (bench/ctrl-child.ts) on a database seeded like B1 (100,000 deployments in one region,
// straight into the tables); the agent runs in another (bench/agent-child.ts, --expose-gc, from
// the agent's production bundle: one JavaScript file, as the image runs it) as it really runs: the kubernetes target against the Kubernetes emulator, in a third process
// (bench/emulator-child.ts), that already holds the 200,000 objects the agent applies, as its
// first run leaves them (seeded in the emulator's process: the agent's manifest builder, the
// emulator's own apply with the agent's field manager, rollouts completed by the emulator's
// controller). So every run is a restart against a populated cluster, and the observer caches
// every object. `--b7-runs` (default 3; 0: the render target only) such runs; the median is the
// figure. Each run must leave the cluster unchanged (asserted: the emulator's resourceVersion
// does not move; the requests are counted). A second row runs the render target into a
// temporary directory (no cluster, no observer). Measured after the first full sync was
// dispatched and the queue drained, after forced GCs; reference: the same agent process on a
// region with no resources. `--b7-service-mix F`: that share of the fleet's deployments carries
// five secret values (sealed at rest under a key file ctrl runs with), probes and an autoscaler,
// so the agent also gets their values (sealed in its memory until each Secret holds them, then
// their digest) and applies a Secret and an HPA each.
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AGENT_DEFAULTS } from "@flotilla/agent";
import { readFileSync } from "node:fs";
import { AGENT_ENVIRONMENT, AGENT_NODE_FLAGS, oldSpaceFlagForLimit } from "@flotilla/agent/node-flags";
import type { AgentChildReport } from "./agent-child.ts";
import { agentTokens, runAgent } from "./lib/agent-run.ts";
import { buildBundle } from "./lib/bundle.ts";
import { CtrlProcess } from "./lib/ctrl-process.ts";
import { EmulatorProcess, type EmulatorState, type SeedResult } from "./lib/emulator-process.ts";
import { createBenchDatabase, MIX_SECRET_VALUES, migrate, mixEvery, seedRegion, type ServiceMix } from "./lib/db.ts";
import { benchSecretsKey, type BenchSecretsKey } from "./lib/secrets-key.ts";
import type { BenchContext, BenchResult, Row } from "./lib/report.ts";
import { fmtBytes, fmtInt, fmtRatio, log } from "./lib/util.ts";

const REGION = "fleet";
const EMPTY_REGION = "empty";
const CONCURRENCY = 8;
const TARGET_RSS = 120 * 1024 * 1024;
const TARGET_PEAK_RSS = 250 * 1024 * 1024;

/** The agent manifest's memory limit (bytes): B7 runs the agent as a pod with that limit runs it. */
function manifestMemoryLimit(): number {
  const manifest = readFileSync(new URL("../deploy/kubernetes/base/agent/deployment.yaml", import.meta.url), "utf8");
  const mebibytes = /limits:\s*\n\s*memory:\s*(\d+)Mi\b/.exec(manifest)?.[1];
  if (mebibytes === undefined) throw new Error("B7: the agent manifest has no memory limit in Mi");
  return Number(mebibytes) * 2 ** 20;
}

/**
 * The Node flags of the agent in a pod limited to `limitBytes`: AGENT_NODE_FLAGS with the old
 * generation's share of the limit as Node computes it there (no container limits this process);
 * without `limitBytes`, AGENT_NODE_FLAGS without that cap (the diagnostic run).
 */
function podNodeFlags(limitBytes: number | undefined): string[] {
  const flags = AGENT_NODE_FLAGS.filter((flag) => !flag.startsWith("--max-old-space-size-percentage="));
  return limitBytes === undefined ? flags : [...flags, oldSpaceFlagForLimit(limitBytes)];
}

/**
 * The pause between the drained queue and the measurement: longer than the memory release's idle
 * wait, so both targets are measured as a quiet agent holds them (at 2 s the render target's
 * figure depended on which came first), and the observer takes in the last watch events.
 */
const SETTLE_MS = AGENT_DEFAULTS.memoryReleaseIdleMs + 3000;

interface SeededCluster {
  emulator: EmulatorProcess;
  kubeconfig: string;
  seeded: SeedResult;
  /** The emulator's resourceVersion once seeded and settled. */
  resourceVersion: string;
}

/**
 * The emulator in its own process, holding what the agent's first run applies to the region's
 * `count` resources (secret values opened with `secretsKeyFile`, as the agent receives them).
 */
async function seededCluster(databaseUrl: string, count: number, dirs: string[], secretsKeyFile: string | undefined): Promise<SeededCluster> {
  // Every request of a run is counted (a run makes one or two per object).
  const emulator = await EmulatorProcess.start({ requestLogLimit: 4 * 2 * count });
  try {
    const started = Date.now();
    const seeded = await emulator.seed({ databaseUrl, region: REGION, ...(secretsKeyFile !== undefined && { secretsKeyFile }) });
    const { resourceVersion } = await emulator.state();
    log(
      `B7: emulator seeded with ${Object.entries(seeded.applied)
        .map(([kind, n]) => `${fmtInt(n)} ${kind}s`)
        .join(", ")} and ${seeded.namespaces} namespaces for ${fmtInt(seeded.resources)} resources in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    const kubeDir = await mkdtemp(join(tmpdir(), "flotilla-b7-kube-"));
    dirs.push(kubeDir);
    const kubeconfig = join(kubeDir, "kubeconfig");
    await emulator.writeKubeconfig(kubeconfig);
    return { emulator, kubeconfig, seeded, resourceVersion };
  } catch (error) {
    await emulator.stop();
    throw error;
  }
}

/**
 * The emulator's request counts of an agent run that must have found the cluster as seeded: it
 * throws if the run wrote anything (every write moves the resourceVersion, a no-op apply does
 * not) or created or deleted an object.
 */
async function unchanged(emulator: EmulatorProcess, before: EmulatorState, label: string): Promise<Record<string, number>> {
  const after = await emulator.state();
  const requests = await emulator.requestCounts();
  const writes = Object.entries(requests).filter(([what]) => /^(create|update|patch|delete|deletecollection) /.test(what) || /^apply .* 201$/.test(what));
  if (after.resourceVersion !== before.resourceVersion || writes.length > 0 || JSON.stringify(after.objects) !== JSON.stringify(before.objects)) {
    throw new Error(
      `B7: ${label} changed the seeded cluster (resourceVersion ${before.resourceVersion} → ${after.resourceVersion}, objects ${JSON.stringify(before.objects)} → ${JSON.stringify(after.objects)}); requests: ${describeRequests(requests)}`,
    );
  }
  return requests;
}

/** "apply deployments 200: 60,000, get services 200: 40,000, …", most frequent first. */
function describeRequests(requests: Record<string, number>): string {
  return Object.entries(requests)
    .sort((a, b) => b[1] - a[1])
    .map(([what, n]) => `${what}: ${fmtInt(n)}`)
    .join(", ");
}

async function countFiles(dir: string): Promise<number> {
  try {
    return (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).length;
  } catch {
    return 0;
  }
}

export async function runB7(ctx: BenchContext): Promise<BenchResult> {
  const count = ctx.quick ? 10_000 : 100_000;
  const runs = ctx.b7Runs;
  if (!Number.isInteger(runs) || runs < 0) throw new Error("--b7-runs must be a non-negative integer (0: the render target only)");
  const fraction = ctx.b7ServiceMix;
  if (!(fraction >= 0 && fraction <= 1)) throw new Error("--b7-service-mix must be from 0 (none) to 1 (every deployment)");
  const db = await createBenchDatabase(ctx.serverUrl, "b7");
  let ctrl: CtrlProcess | undefined;
  let cluster: SeededCluster | undefined;
  let secretsKey: BenchSecretsKey | undefined;
  const dirs: string[] = [];
  try {
    await migrate(db.url);
    secretsKey = fraction > 0 ? benchSecretsKey() : undefined;
    const mix: ServiceMix | undefined = secretsKey && { fraction, ring: secretsKey.ring };
    const mixed = mix ? Math.ceil(count / mixEvery(mix)) : 0;
    /** What the region's resources are, in the rows' names. */
    const resources = `${fmtInt(count)} desired resources${mix ? `, ${fmtInt(mixed)} of them with ${MIX_SECRET_VALUES} secret values, probes and autoscaling` : ""}`;
    const t0 = Date.now();
    const seeded = await seedRegion(db.url, REGION, count, { mix });
    log(`B7: seeded ${fmtInt(count)} resources in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const { token, emptyToken } = await agentTokens(db.url, REGION, EMPTY_REGION, { secrets: secretsKey?.ring });
    const bundleDir = await mkdtemp(join(tmpdir(), "flotilla-b7-bundle-"));
    dirs.push(bundleDir);
    const bundle = buildBundle("agent", join(bundleDir, "agent"), ["agent-child.ts"]);
    ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs, ...(secretsKey && { secretsKeyFile: secretsKey.file }) });
    cluster = runs > 0 ? await seededCluster(db.url, count, dirs, secretsKey?.file) : undefined;

    const limit = manifestMemoryLimit();
    const podFlags = podNodeFlags(limit);
    /**
     * One agent run: against the seeded cluster if given (kubernetes target), else rendering; with
     * the Node flags of a pod with the manifest's limit unless others are given.
     */
    const run = async (label: string, region: string, agentToken: string, timeoutMs: number, kube?: SeededCluster, nodeFlags = podFlags) => {
      const dir = await mkdtemp(join(tmpdir(), `flotilla-b7-${region}-`));
      dirs.push(dir);
      const before = await kube?.emulator.state();
      await kube?.emulator.clearRequests();
      const report = await runAgent(
        bundle,
        {
          ctrlUrl: ctrl!.url,
          region,
          token: agentToken,
          renderDir: dir,
          ...(kube && { kubeconfig: kube.kubeconfig }),
          ...(ctx.heapSnapshotDir !== undefined && { heapSnapshotDir: ctx.heapSnapshotDir }),
          concurrency: CONCURRENCY,
          settleMs: SETTLE_MS,
        },
        nodeFlags,
        timeoutMs,
      );
      const files = await countFiles(dir);
      await rm(dir, { recursive: true, force: true });
      const requests = kube && before && (await unchanged(kube.emulator, before, label));
      log(
        `B7: ${label}: ${fmtInt(report.entries)} entries, ready ${(report.readyMs / 1000).toFixed(1)} s, drained ${(report.drainedMs / 1000).toFixed(1)} s, ` +
          `RSS ${fmtBytes(report.drained.rss)} (peak ${fmtBytes(report.maxRss)}), heap ${fmtBytes(report.drained.heapUsed)}` +
          `${kube ? "" : `, ${fmtInt(files)} files`}${report.heapSnapshot ? `, heap snapshot ${report.heapSnapshot}` : ""}; ${describeGc(report)}`,
      );
      log(`B7: ${label}: at the peak sample: ${describePeak(report.atPeak)}`);
      if (requests) log(`B7: ${label}: requests at the emulator (cluster unchanged): ${describeRequests(requests)}`);
      if (region === REGION && report.entries !== count) throw new Error(`B7: the agent's table holds ${report.entries} entries, want ${count}`);
      return { report, files, requests };
    };
    const perResource = (full: AgentChildReport, empty: AgentChildReport, key: "rss" | "heapUsed") => (full.drained[key] - empty.drained[key]) / count;
    const describe = (m: AgentChildReport["drained"]) =>
      `RSS ${fmtBytes(m.rss)} (anonymous ${fmtBytes(m.rssAnon)}, mapped files ${fmtBytes(m.rssFile)}), heap used ${fmtBytes(m.heapUsed)} of ${fmtBytes(m.heapTotal)}, external ${fmtBytes(m.external)} (array buffers ${fmtBytes(m.arrayBuffers)})`;
    const describePeak = (p: AgentChildReport["atPeak"]) =>
      `${describe(p)}, at ${(p.atMs / 1000).toFixed(1)} s (${p.ready ? "after" : "before"} ready; ${fmtInt(p.entries)} entries, ${fmtInt(p.pending)} pending); V8 spaces ${Object.entries(
        p.spaces,
      )
        .map(([name, size]) => `${name} ${fmtBytes(size)}`)
        .join(", ")}`;
    const describeGc = ({ gc, drainedMs }: AgentChildReport) =>
      `GC ${fmtInt(gc.count)} collections, ${(gc.ms / 1000).toFixed(1)} s (${((100 * gc.ms) / drainedMs).toFixed(1)}% of the run), of them ${fmtInt(gc.majorCount)} full, ${(gc.majorMs / 1000).toFixed(1)} s`;
    const timing = (r: AgentChildReport) =>
      `ready at ${(r.readyMs / 1000).toFixed(1)} s, drained at ${(r.drainedMs / 1000).toFixed(1)} s (${r.errors} entries in error; ${r.logLines} log lines${r.firstLog.length ? `, first: ${r.firstLog.join(" | ")}` : ""})`;
    const rows: Row[] = [];
    const notes = [
      `B7: agent in its own process (--expose-gc, ${podFlags.join(" ")}: the image's flags, ${AGENT_NODE_FLAGS.join(" ")}, as they amount to in a pod with the manifest's limit of ${fmtBytes(limit)}; ${Object.entries(
        AGENT_ENVIRONMENT,
      )
        .map(([k, v]) => `${k}=${v}`)
        .join(
          " ",
        )}), concurrency ${CONCURRENCY}, default timings; ${fmtInt(count)} deployments seeded straight into the tables as in B1 (mean body ${fmtInt(seeded.bodyBytes / count)} B; each a Deployment and a Service${
        mix
          ? `; every ${mixEvery(mix)}th, ${fmtInt(mixed)} in all, also ${MIX_SECRET_VALUES} secret values of 32 random bytes (sealed at rest under a key file ctrl runs with, sent sealed for the region's agent, opened by it into a Secret), readiness and liveness HTTP probes and an autoscaler (min 2, max 10, CPU 70%; an HPA applied, spec.replicas left to it)`
          : ""
      }). Measured after every desired entry was reconciled, every observation reported and a settling pause of ${SETTLE_MS / 1000} s, after 4 forced GCs.`,
    ];
    let peakRows: Row[] = [];
    if (cluster) {
      const { seeded: clusterSeed, resourceVersion } = cluster;
      const emptyKube = (await run("kubernetes, 0 resources", EMPTY_REGION, emptyToken, 60_000, cluster)).report;
      const kube: AgentChildReport[] = [];
      const requestsOfRuns: Record<string, number>[] = [];
      for (let i = 1; i <= runs; i++) {
        const { report, requests } = await run(`kubernetes, run ${i}`, REGION, token, 60 * 60_000, cluster);
        kube.push(report);
        requestsOfRuns.push(requests!);
      }
      // The same restart without the old generation's cap: what the cap saves, and what it costs in GC time.
      const uncapped = (await run("kubernetes, without the old-space cap", REGION, token, 60 * 60_000, cluster, podNodeFlags(undefined))).report;
      const emulatorMemory = await cluster.emulator.memory();
      const median = kube.toSorted((a, b) => a.drained.rss - b.drained.rss)[Math.floor(runs / 2)]!;
      const e = emptyKube.drained;
      const f = median.drained;
      rows.push(
        {
          benchmark: `B7 agent RSS, ${resources} (kubernetes target, emulator holding the objects), queue drained, ${runs === 1 ? "one run" : `median of ${runs}`}`,
          measured: fmtBytes(f.rss),
          reference: `0 resources: ${fmtBytes(e.rss)}`,
          ratio: fmtRatio(f.rss / e.rss),
          target: `≤ ${fmtBytes(TARGET_RSS)}`,
          met: f.rss <= TARGET_RSS,
        },
        {
          benchmark: `B7 agent heap used, ${resources} (kubernetes target), queue drained`,
          measured: fmtBytes(f.heapUsed),
          reference: `0 resources: ${fmtBytes(e.heapUsed)}`,
          ratio: fmtRatio(f.heapUsed / e.heapUsed),
          target: "(no target)",
          met: undefined,
        },
      );
      const peak = kube.map((r) => r.maxRss).toSorted((a, b) => a - b)[Math.floor(runs / 2)]!;
      peakRows = [
        {
          benchmark: `B7 agent peak RSS during a restart (relist, first full sync and drain), ${resources} (kubernetes target), ${runs === 1 ? "one run" : `median of ${runs}`}`,
          measured: fmtBytes(peak),
          reference: `drained: ${fmtBytes(f.rss)}`,
          ratio: fmtRatio(peak / f.rss),
          target: `≤ ${fmtBytes(TARGET_PEAK_RSS)}`,
          met: peak <= TARGET_PEAK_RSS,
        },
        {
          benchmark: `B7 diagnostic: the same restart without the old generation's cap (V8's own heap growth)`,
          measured: fmtBytes(uncapped.maxRss),
          reference: `with the cap: ${fmtBytes(peak)}`,
          ratio: fmtRatio(uncapped.maxRss / peak),
          target: "(diagnostic)",
          met: undefined,
        },
      ];
      notes.push(
        `B7 kubernetes target: the emulator (its own process, rollouts as shipped) was seeded with what the agent's first run applies: ${fmtInt(clusterSeed.resources)} resources built by the agent's manifest builder into ${Object.entries(
          clusterSeed.applied,
        )
          .map(([kind, n]) => `${fmtInt(n)} ${kind}s`)
          .join(
            " and ",
          )}, server-side applied with its field manager, ${clusterSeed.namespaces} namespaces created, every rollout completed by the emulator's controller, in ${(clusterSeed.ms / 1000).toFixed(1)} s (emulator after the runs: RSS ${fmtBytes(emulatorMemory.rss)}, heap used ${fmtBytes(emulatorMemory.heapUsed)}). Every run is a restart against it and left it unchanged (resourceVersion ${resourceVersion} throughout). Requests per run: ${requestsOfRuns.map((r, i) => `run ${i + 1}: ${describeRequests(r)}`).join("; ")}.`,
        `B7 kubernetes target, ${runs} run(s): RSS ${kube.map((r) => fmtBytes(r.drained.rss)).join(", ")}; heap used ${kube.map((r) => fmtBytes(r.drained.heapUsed)).join(", ")}; peak RSS ${kube.map((r) => fmtBytes(r.maxRss)).join(", ")}; ready at ${kube.map((r) => `${(r.readyMs / 1000).toFixed(1)} s`).join(", ")}; drained at ${kube.map((r) => `${(r.drainedMs / 1000).toFixed(1)} s`).join(", ")}; ${kube.map(describeGc).join("; ")}.`,
        `B7 kubernetes target without the old generation's cap (${podNodeFlags(undefined).join(" ")}): peak RSS ${fmtBytes(uncapped.maxRss)}, ${timing(uncapped)}; ${describeGc(uncapped)}; at the highest RSS sample: ${describePeak(uncapped.atPeak)}; drained RSS ${fmtBytes(uncapped.drained.rss)}.`,
        `B7 kubernetes target, median run: ${timing(median)}. At ready: ${describe(median.atReady)}. At the highest RSS sample (no forced GC): ${describePeak(median.atPeak)}. Drained: ${describe(f)}. 0 resources: ${describe(e)}. Per resource (drained − empty) / ${fmtInt(count)}: RSS ${fmtBytes(perResource(median, emptyKube, "rss"))}, heap ${fmtBytes(perResource(median, emptyKube, "heapUsed"))}.`,
      );
    }
    const emptyRender = await run("render, 0 resources", EMPTY_REGION, emptyToken, 60_000);
    const render = await run("render", REGION, token, 30 * 60_000);
    rows.push({
      benchmark: `B7 agent RSS, ${resources} (render target), queue drained`,
      measured: fmtBytes(render.report.drained.rss),
      reference: `0 resources: ${fmtBytes(emptyRender.report.drained.rss)}`,
      ratio: fmtRatio(render.report.drained.rss / emptyRender.report.drained.rss),
      target: `≤ ${fmtBytes(TARGET_RSS)}`,
      met: render.report.drained.rss <= TARGET_RSS,
    });
    rows.push(...peakRows);
    notes.push(
      `B7 render target: ${timing(render.report)}, ${fmtInt(render.files)} files rendered; peak RSS ${fmtBytes(render.report.maxRss)}; ${describeGc(render.report)}; at the highest RSS sample: ${describePeak(render.report.atPeak)}. Drained: ${describe(render.report.drained)}. 0 resources: ${describe(emptyRender.report.drained)}. Per resource: RSS ${fmtBytes(perResource(render.report, emptyRender.report, "rss"))}, heap ${fmtBytes(perResource(render.report, emptyRender.report, "heapUsed"))}.`,
    );
    return { rows, notes };
  } finally {
    await ctrl?.stop();
    await cluster?.emulator.stop();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
    secretsKey?.cleanup();
    await db.drop();
  }
}
