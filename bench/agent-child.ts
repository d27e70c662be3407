// An agent process for B7: startAgent with the kubernetes target (a kubeconfig) or the render
// target into a directory, started by bench/b7-agent-memory.ts (fork, --expose-gc) so the
// benchmark's own memory stays out of the measurement. Reports over IPC once the first complete
// snapshot was dispatched and the queue drained: timings and process.memoryUsage() after forced
// GCs (and, if asked, a heap snapshot); then waits for "shutdown".
import { getHeapSpaceStatistics, writeHeapSnapshot } from "node:v8";
import { join } from "node:path";
import { constants as perfConstants, PerformanceObserver } from "node:perf_hooks";
import { createLogger, RenderTarget, startAgent, type Target } from "@flotilla/agent";
import { memoryAfterGc, memoryNow, type ChildMemory } from "./lib/ipc.ts";
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

/** Memory as bench/lib/ipc.ts reads it (RSS with its anonymous and file-backed parts). */
export type AgentChildMemory = ChildMemory;

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
  /** Garbage collections from the start to the drained measurement (before its forced GCs): all, and the major (mark-compact) ones. */
  gc: { count: number; ms: number; majorCount: number; majorMs: number };
  /** What the highest of the RSS samples (every PEAK_SAMPLE_MS) was made of, and when it was taken. */
  atPeak: AgentPeak;
  entries: number;
  errors: number;
  /** Requests to the Kubernetes API from the start to the drained measurement (rest_client_requests_total). */
  kubeRequests: number;
  logLines: number;
  firstLog: string[];
  /** The heap snapshot written, if one was asked for. */
  heapSnapshot?: string;
}

/** An RSS sample without a forced GC: the memory as the running process holds it. */
export interface AgentPeak extends AgentChildMemory {
  /** Since the process started. */
  atMs: number;
  /** Whether the first complete snapshot had been dispatched. */
  ready: boolean;
  /** Entries in the desired table, and of them not yet reconciled. */
  entries: number;
  pending: number;
  /** V8's heap spaces larger than 1 MB: name → committed bytes. */
  spaces: Record<string, number>;
}

const PEAK_SAMPLE_MS = 100;

const config = JSON.parse(process.env.FLOTILLA_BENCH_AGENT ?? "{}") as AgentChildConfig;
if (!process.send) throw new Error("agent-child.ts must be started by bench/b7-agent-memory.ts (IPC channel)");
if (!(globalThis as { gc?: unknown }).gc) throw new Error("start agent-child.ts with --expose-gc");

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const since = () => performance.now();

/** The agent's target, loading the Kubernetes client only for the kubernetes target (as the CLI does). */
async function target(): Promise<Target> {
  if (config.kubeconfig === undefined) return new RenderTarget({ dir: config.renderDir, region: config.region });
  return kubernetesTarget(config.kubeconfig, config.region);
}

const logLines: string[] = [];
const gcs = { count: 0, ms: 0, majorCount: 0, majorMs: 0 };
const gcObserver = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    gcs.count++;
    gcs.ms += entry.duration;
    if ((entry as { detail?: { kind?: number } }).detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR) {
      gcs.majorCount++;
      gcs.majorMs += entry.duration;
    }
  }
});
gcObserver.observe({ entryTypes: ["gc"] });
let ready = false;
let atPeak: AgentPeak | undefined;
let table: { size: number; counts(): { pending: number } } | undefined;
const sampler = setInterval(() => {
  if (atPeak && process.memoryUsage.rss() <= atPeak.rss) return;
  const spaces: Record<string, number> = {};
  for (const space of getHeapSpaceStatistics()) if (space.space_size > 1024 * 1024) spaces[space.space_name] = space.space_size;
  atPeak = { ...memoryNow(), atMs: since(), ready, entries: table?.size ?? 0, pending: table?.counts().pending ?? 0, spaces };
}, PEAK_SAMPLE_MS);

const agent = await startAgent({
  ctrlUrl: config.ctrlUrl,
  region: config.region,
  token: config.token,
  target: await target(),
  concurrency: config.concurrency,
  log: createLogger({ write: (line) => logLines.push(line) }),
});
table = agent.table;
await agent.ready;
ready = true;
const readyMs = since();
const atReady = await memoryAfterGc();
// Drained: every entry reconciled and every observation reported (after a restart that applies
// nothing, the reporter's batches go on after the queue is empty).
const reportBacklog = async () => (await agent.metrics.reportBacklog.get()).values[0]?.value ?? 0;
for (;;) {
  const counts = agent.table.counts();
  if (counts.pending === 0 && (await reportBacklog()) === 0) break;
  await sleep(100);
}
const drainedMs = since();
const kubeRequests = (await agent.metrics.restClientRequests.get()).values.reduce((sum, v) => sum + v.value, 0);
gcObserver.disconnect();
const gcDuringRun = { ...gcs };
await sleep(config.settleMs);
const drained = await memoryAfterGc();
// Before the heap snapshot, which costs memory of its own.
const maxRss = process.resourceUsage().maxRSS * 1024;
clearInterval(sampler);
const heapSnapshot =
  config.heapSnapshotDir === undefined ? undefined : writeHeapSnapshot(join(config.heapSnapshotDir, `b7-${config.region}-${process.pid}.heapsnapshot`));
const report: AgentChildReport = {
  readyMs,
  drainedMs,
  atReady,
  drained,
  maxRss,
  atPeak: atPeak!,
  gc: gcDuringRun,
  entries: agent.table.size,
  errors: agent.table.counts().error,
  kubeRequests,
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
