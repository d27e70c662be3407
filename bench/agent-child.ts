// An agent process for B7: startAgent with the kubernetes target (a kubeconfig) or the render
// target into a directory, started by bench/b7-agent-memory.ts (fork, --expose-gc) so the
// benchmark's own memory stays out of the measurement. Reports over IPC once the first complete
// snapshot was dispatched and the queue drained: timings and process.memoryUsage() after forced
// GCs (and, if asked, a heap snapshot); then waits for "shutdown".
import { readFileSync } from "node:fs";
import { writeHeapSnapshot } from "node:v8";
import { join } from "node:path";
import { createLogger, RenderTarget, startAgent, type Target } from "@flotilla/agent";
import { kubernetesTarget } from "./lib/kubernetes-target.ts";

export interface AgentChildConfig {
  ctrlUrl: string;
  region: string;
  token: string;
  /** The kubernetes target with this kubeconfig; else the render target into `renderDir`. */
  kubeconfig?: string;
  renderDir: string;
  /** Writes a heap snapshot into this directory when drained (before the report). */
  heapSnapshotDir?: string;
  concurrency: number;
  /** Time after the queue drained before measuring (lets the status reporter catch up). */
  settleMs: number;
}

export interface AgentChildMemory {
  heapUsed: number;
  heapTotal: number;
  rss: number;
  /** The parts of the RSS (Linux's /proc/self/status): anonymous memory, and pages of mapped files (Node's binary, libraries). */
  rssAnon: number;
  rssFile: number;
  external: number;
  arrayBuffers: number;
}

export interface AgentChildReport {
  /** Process start → first complete snapshot dispatched (agent.ready). */
  readyMs: number;
  /** Process start → every desired entry reconciled and every observation reported to ctrl. */
  drainedMs: number;
  /** Right after ready, after forced GCs (the table is full, the queue too). */
  atReady: AgentChildMemory;
  /** After the queue drained and `settleMs`, after forced GCs: the figure B7 reports. */
  drained: AgentChildMemory;
  /** Peak RSS of the process so far (bytes). */
  maxRss: number;
  entries: number;
  errors: number;
  logLines: number;
  firstLog: string[];
  /** The heap snapshot written, if one was asked for. */
  heapSnapshot?: string;
}

const config = JSON.parse(process.env.FLOTILLA_BENCH_AGENT ?? "{}") as AgentChildConfig;
if (!process.send) throw new Error("agent-child.ts must be started by bench/b7-agent-memory.ts (IPC channel)");
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("start agent-child.ts with --expose-gc");

async function memory(): Promise<AgentChildMemory> {
  // Several passes: weak references and finalizers free more on later ones.
  for (let i = 0; i < 4; i++) {
    gc!();
    await new Promise((r) => setImmediate(r));
  }
  const m = process.memoryUsage();
  const status = readFileSync("/proc/self/status", "utf8");
  const kB = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN) * 1024;
  return {
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    rss: m.rss,
    rssAnon: kB("RssAnon"),
    rssFile: kB("RssFile"),
    external: m.external,
    arrayBuffers: m.arrayBuffers,
  };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const since = () => performance.now();

/** The agent's target, loading the Kubernetes client only for the kubernetes target (as the CLI does). */
async function target(): Promise<Target> {
  if (config.kubeconfig === undefined) return new RenderTarget({ dir: config.renderDir, region: config.region });
  return kubernetesTarget(config.kubeconfig, config.region);
}

const logLines: string[] = [];

const agent = await startAgent({
  ctrlUrl: config.ctrlUrl,
  region: config.region,
  token: config.token,
  target: await target(),
  concurrency: config.concurrency,
  log: createLogger({ write: (line) => logLines.push(line) }),
});
await agent.ready;
const readyMs = since();
const atReady = await memory();
// Drained: every entry reconciled and every observation reported (after a restart that applies
// nothing, the reporter's batches go on after the queue is empty).
const reportBacklog = async () => (await agent.metrics.reportBacklog.get()).values[0]?.value ?? 0;
for (;;) {
  const counts = agent.table.counts();
  if (counts.pending === 0 && (await reportBacklog()) === 0) break;
  await sleep(100);
}
const drainedMs = since();
await sleep(config.settleMs);
const drained = await memory();
// Before the heap snapshot, which costs memory of its own.
const maxRss = process.resourceUsage().maxRSS * 1024;
const heapSnapshot =
  config.heapSnapshotDir === undefined ? undefined : writeHeapSnapshot(join(config.heapSnapshotDir, `b7-${config.region}-${process.pid}.heapsnapshot`));
const report: AgentChildReport = {
  readyMs,
  drainedMs,
  atReady,
  drained,
  maxRss,
  entries: agent.table.size,
  errors: agent.table.counts().error,
  logLines: logLines.length,
  firstLog: logLines.slice(0, 3),
  heapSnapshot,
};
process.send({ report });
process.on("message", (message: { op?: string }) => {
  if (message.op !== "shutdown") return;
  void agent.stop().finally(() => process.exit(0));
});
process.on("disconnect", () => process.exit(0));
