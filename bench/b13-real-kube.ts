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
//   3. an agent of an empty region on the same cluster: the baseline of the memory per object.
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
import { agentTokens, runAgent } from "./lib/agent-run.ts";
import { buildBundle } from "./lib/bundle.ts";
import { CtrlProcess } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate, seedRegion } from "./lib/db.ts";
import { EmulatorProcess } from "./lib/emulator-process.ts";
import type { BenchContext, BenchResult, Row } from "./lib/report.ts";
import { fmtBytes, fmtInt, fmtRatio, log, sleep } from "./lib/util.ts";

const REGION = "fleet";
const EMPTY_REGION = "empty";
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
  empty: AgentChildReport;
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
async function allComplete(admin: KubeClient, count: number, started: number, timeoutMs: number): Promise<number> {
  const deadline = started + timeoutMs;
  let logged = started;
  for (;;) {
    let complete = 0;
    let page: string | undefined;
    do {
      const meta = await admin.list("/apis/apps/v1/deployments", { labelSelector: `flotilla.dev/region=${REGION}`, limit: 500, continue: page }, (d) => {
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
      log(`B13: ${complete} of ${count} Deployments complete after ${((logged - started) / 1000).toFixed(0)} s`);
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
    await seedRegion(db.url, REGION, count);
    const { token, emptyToken } = await agentTokens(db.url, REGION, EMPTY_REGION);
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
        const running = allComplete(cluster.admin, count, started, RUN_TIMEOUT_MS);
        const cold = await run(cluster, REGION, token);
        const runningMs = await running;
        const restart = await run(cluster, REGION, token);
        const empty = await run(cluster, EMPTY_REGION, emptyToken);
        figures.set(cluster.name, { cold, runningMs, restart, empty });
        log(
          `B13 ${cluster.name}: all RUNNING at ${(runningMs / 1000).toFixed(1)} s, cold drained at ${(cold.drainedMs / 1000).toFixed(1)} s with ` +
            `${fmtInt(cold.kubeRequests)} requests (${(cold.kubeRequests / count).toFixed(2)} per deployment), RSS ${fmtBytes(cold.drained.rss)}; ` +
            `restart drained at ${(restart.drainedMs / 1000).toFixed(1)} s with ${fmtInt(restart.kubeRequests)} requests, peak RSS ${fmtBytes(restart.maxRss)}; ` +
            `empty region RSS ${fmtBytes(empty.drained.rss)}`,
        );
      } finally {
        await cluster.stop();
      }
    }
    const real = figures.get("flotilla-kube")!;
    const emu = figures.get("emulator")!;
    const perObject = (f: TargetFigures) => Math.max(0, f.cold.drained.rss - f.empty.drained.rss) / count;
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
      {
        benchmark: `B13 the agent's memory per deployment on flotilla-kube (RSS over an empty region's)`,
        measured: `${fmtInt(perObject(real))} B`,
        reference: `${fmtInt(perObject(emu))} B on the emulator`,
        ratio: fmtRatio(perObject(real) / Math.max(1, perObject(emu))),
        target: `≤ ${fmtInt(B7_BYTES_PER_OBJECT)} B (B7's bound)`,
        met: perObject(real) <= B7_BYTES_PER_OBJECT,
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
