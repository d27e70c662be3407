// B13: the agent on a real Kubernetes (flotilla-kube: kube-apiserver, controller manager,
// scheduler, kwok) against the emulator, in one run. ctrl runs in its own process on a database
// seeded like B1 with 2,000 deployments in one region; the agent (bench/agent-child.ts from the
// agent's production bundle, --expose-gc) runs in another, on each target in turn:
//   1. cold: an empty cluster; the agent applies every object. Measured: the time from the
//      agent's start to every Deployment complete in kstatus' sense (observedGeneration,
//      updated = available = replicas, read from the cluster), its requests per object
//      (its own rest_client_requests_total), and its RSS once drained (after forced GCs);
//   2. restart: a new agent on the populated cluster (re-list and re-check): time to drained
//      and its peak RSS;
//   3. an agent of a region of half as many deployments on the same cluster, run cold like the
//      first: the memory per deployment is the slope between the two (what one more deployment
//      costs the agent), free of what any agent with work holds whatever its size (the code
//      the apply paths compile, buffers sized once).
// On flotilla-kube the agent runs under its ServiceAccount and deploy/kubernetes' RBAC, as in
// the tests. Requires `pnpm kube:build`.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AGENT_NODE_FLAGS } from "@flotilla/agent/node-flags";
import { KubeClient, kubeconfigConnectionFromString } from "@flotilla/agent/kubernetes";
import { kubeconfigYaml } from "@flotilla/k8s-emulator";
import { flotillaKubeMissing, kubeTargets } from "@flotilla/testkit/kube-target";
import type { AgentChildReport } from "./agent-child.ts";
import { regionTokens, runAgent } from "./lib/agent-run.ts";
import { buildBundle } from "./lib/bundle.ts";
import { CtrlProcess } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate, seedRegion } from "./lib/db.ts";
import { EmulatorProcess } from "./lib/emulator-process.ts";
import type { BenchContext, BenchResult, Row } from "./lib/report.ts";
import { fmtBytes, fmtInt, fmtRatio, log, sleep } from "./lib/util.ts";

const REGION = "fleet";
const HALF_REGION = "half";
const CONCURRENCY = 8;
/** B7's bound: 120 MB for 100,000 resources. */
const B7_BYTES_PER_OBJECT = (120 * 1024 * 1024) / 100_000;
const SETTLE_MS = 3000;
const RUN_TIMEOUT_MS = 15 * 60_000;

interface Cluster {
  name: "emulator" | "flotilla-kube";
  /** The agent's kubeconfig file. */
  kubeconfig: string;
  admin: KubeClient;
  stop(): Promise<void>;
}

interface TargetFigures {
  cold: AgentChildReport;
  /** Agent start → every Deployment complete, ms. */
  runningMs: number;
  restart: AgentChildReport;
  /** The cold run of the region of half as many deployments. */
  half: AgentChildReport;
}

async function emulatorCluster(dir: string): Promise<Cluster> {
  const emulator = await EmulatorProcess.start({ requestLogLimit: 1000 });
  const kubeconfig = join(dir, "emulator.kubeconfig");
  await emulator.writeKubeconfig(kubeconfig);
  return {
    name: "emulator",
    kubeconfig,
    admin: new KubeClient(await kubeconfigConnectionFromString(kubeconfigYaml(emulator.url))),
    stop: () => emulator.stop(),
  };
}

async function realCluster(dir: string): Promise<Cluster> {
  const cluster = await kubeTargets.find((t) => t.name === "real")!.start();
  const kubeconfig = join(dir, "flotilla-kube.kubeconfig");
  await writeFile(kubeconfig, cluster.agentKubeconfig, { mode: 0o600 });
  return { name: "flotilla-kube", kubeconfig, admin: cluster.admin, stop: () => cluster.stop() };
}

/** Resolves with the time (ms since `started`) once `count` Deployments of the region are complete. */
async function allComplete(admin: KubeClient, region: string, count: number, started: number, timeoutMs: number): Promise<number> {
  const deadline = started + timeoutMs;
  let logged = started;
  for (;;) {
    let complete = 0;
    let page: string | undefined;
    do {
      const meta = await admin.list("/apis/apps/v1/deployments", { labelSelector: `flotilla.dev/region=${region}`, limit: 500, continue: page }, (d) => {
        const object = d as { metadata: { generation?: number }; spec?: { replicas?: number }; status?: Record<string, number> };
        const want = object.spec?.replicas ?? 1;
        // A count of zero is left out of the status, as Go's omitempty does.
        const field = (name: string) => object.status?.[name] ?? 0;
        if (
          field("observedGeneration") >= (object.metadata.generation ?? 1) &&
          field("updatedReplicas") === want &&
          field("availableReplicas") === want &&
          field("replicas") === want
        ) {
          complete++;
        }
      });
      page = meta.continue || undefined;
    } while (page);
    if (complete >= count) return Date.now() - started;
    if (Date.now() - logged > 15_000) {
      logged = Date.now();
      log(`B13: ${complete} of ${count} Deployments of ${region} complete after ${((logged - started) / 1000).toFixed(0)} s`);
    }
    if (Date.now() > deadline) throw new Error(`B13: ${complete} of ${count} Deployments complete after ${timeoutMs} ms`);
    await sleep(500);
  }
}

export async function runB13(ctx: BenchContext): Promise<BenchResult> {
  const missing = flotillaKubeMissing();
  if (missing) throw new Error(`B13 needs flotilla-kube: ${missing}`);
  const count = ctx.quick ? 200 : 2000;
  const db = await createBenchDatabase(ctx.serverUrl, "b13");
  const dir = await mkdtemp(join(tmpdir(), "flotilla-b13-"));
  let ctrl: CtrlProcess | undefined;
  try {
    await migrate(db.url);
    const half = count / 2;
    await seedRegion(db.url, REGION, count);
    await seedRegion(db.url, HALF_REGION, half, { firstIndex: count });
    const [token, halfToken] = await regionTokens(db.url, [REGION, HALF_REGION]);
    const bundle = buildBundle("agent", join(dir, "agent"), ["agent-child.ts"]);
    ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs });
    const run = (cluster: Cluster, region: string, agentToken: string) =>
      runAgent(
        bundle,
        { ctrlUrl: ctrl!.url, region, token: agentToken, renderDir: dir, kubeconfig: cluster.kubeconfig, concurrency: CONCURRENCY, settleMs: SETTLE_MS },
        AGENT_NODE_FLAGS,
        RUN_TIMEOUT_MS,
      );

    const figures = new Map<Cluster["name"], TargetFigures>();
    for (const start of [emulatorCluster, realCluster]) {
      const cluster = await start(dir);
      try {
        const started = Date.now();
        const running = allComplete(cluster.admin, REGION, count, started, RUN_TIMEOUT_MS);
        const cold = await run(cluster, REGION, token);
        const runningMs = await running;
        const restart = await run(cluster, REGION, token);
        const halfRun = await run(cluster, HALF_REGION, halfToken!);
        figures.set(cluster.name, { cold, runningMs, restart, half: halfRun });
        log(
          `B13 ${cluster.name}: all RUNNING at ${(runningMs / 1000).toFixed(1)} s, cold drained at ${(cold.drainedMs / 1000).toFixed(1)} s with ` +
            `${fmtInt(cold.kubeRequests)} requests (${(cold.kubeRequests / count).toFixed(2)} per deployment), RSS ${fmtBytes(cold.drained.rss)}; ` +
            `restart drained at ${(restart.drainedMs / 1000).toFixed(1)} s with ${fmtInt(restart.kubeRequests)} requests, peak RSS ${fmtBytes(restart.maxRss)}; ` +
            `${fmtInt(half)} deployments: RSS ${fmtBytes(halfRun.drained.rss)}, heap ${fmtBytes(halfRun.drained.heapUsed)}`,
        );
      } finally {
        await cluster.stop();
      }
    }
    const real = figures.get("flotilla-kube")!;
    const emu = figures.get("emulator")!;
    // The slope from the half region's cold run to the full one's, after forced GCs. The heap is
    // what grows with the objects the agent caches (a real server's carry managedFields and
    // status the emulator's may not): the figure held to B7's bound. RSS moves in the
    // allocator's steps as well: shown, not judged.
    const perObject = (f: TargetFigures, of: "rss" | "heapUsed") => Math.max(0, f.cold.drained[of] - f.half.drained[of]) / (count - half);
    const row = (measured: string, real: number, emulator: number, format: (n: number) => string): Row => ({
      benchmark: `B13 ${measured}, ${fmtInt(count)} deployments`,
      measured: `${format(real)} on flotilla-kube`,
      reference: `${format(emulator)} on the emulator`,
      ratio: fmtRatio(real / emulator),
      target: "—",
      met: undefined,
    });
    const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    const rows: Row[] = [
      row("cold start to all RUNNING", real.runningMs, emu.runningMs, seconds),
      row("the agent's requests per deployment, cold", real.cold.kubeRequests / count, emu.cold.kubeRequests / count, (n) => n.toFixed(2)),
      row("the agent's RSS drained, cold", real.cold.drained.rss, emu.cold.drained.rss, fmtBytes),
      row("restart (re-list, re-check) to drained", real.restart.drainedMs, emu.restart.drainedMs, seconds),
      row("restart peak RSS", real.restart.maxRss, emu.restart.maxRss, fmtBytes),
      row("the agent's requests per deployment, restart", real.restart.kubeRequests / count, emu.restart.kubeRequests / count, (n) => n.toFixed(2)),
      row(`the agent's RSS per deployment (from ${fmtInt(half)} to ${fmtInt(count)})`, perObject(real, "rss"), perObject(emu, "rss"), (n) => `${fmtInt(n)} B`),
      {
        benchmark: `B13 the agent's heap per deployment on flotilla-kube (from ${fmtInt(half)} to ${fmtInt(count)}, after forced GCs)`,
        measured: `${fmtInt(perObject(real, "heapUsed"))} B`,
        reference: `${fmtInt(perObject(emu, "heapUsed"))} B on the emulator`,
        ratio: fmtRatio(perObject(real, "heapUsed") / Math.max(1, perObject(emu, "heapUsed"))),
        target: `≤ ${fmtInt(B7_BYTES_PER_OBJECT)} B (B7's bound per resource)`,
        met: perObject(real, "heapUsed") <= B7_BYTES_PER_OBJECT,
      },
    ];
    return {
      rows,
      notes: [
        `B13: ${fmtInt(count)} deployments seeded as in B1, the agent from its production bundle (${AGENT_NODE_FLAGS.join(" ")}), concurrency ${CONCURRENCY}; flotilla-kube with its defaults and etcd fsync on; on flotilla-kube the agent runs as its ServiceAccount.`,
      ],
    };
  } finally {
    await ctrl?.stop();
    await db.drop();
    await rm(dir, { recursive: true, force: true });
  }
}
