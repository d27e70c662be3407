// The region's side of rollout analysis (docs/rollout-analysis.md): the agent runs the analyses'
// queries against the region's Prometheus (or a web endpoint) on their schedule and reports the
// measurements to ctrl, which judges them. One call, ReportMeasurements, both hands in what was
// measured and returns what to measure now (the analyses of the bakes under way in the region):
// made every --analysis-poll-interval, and at once when a measurement is waiting.
//
// Schedule: measurement i of a task is due at its bake's start + initialDelay + i × interval.
// A due index is measured once (the newest due, when the agent was away: what was missed is not
// made up for); a task stops when ctrl no longer lists it (its verdict is final, or its bake
// ended). A measurement carries the revision the region's pods run (the agent's applied desired
// state); while they do not run the task's revision, nothing is measured.
//
// Bounds: a query's deadline (--analysis-query-timeout); measurements waiting to be sent
// (--analysis-max-pending, the oldest dropped first), sent MAX_PER_REPORT at a time; one query in
// flight per task, and while ctrl answers, none for a task whose measurement waits to be sent:
// ctrl's list of tasks does not know of it yet, so while a backlog goes out 500 at a time the
// next index would fall due and be queried too, more than the schedule asks for (while ctrl is
// away, the newest measurements are kept instead). Measuring changes nothing in the cluster, so
// it runs on the leader only to spare the Prometheus, not for safety: ctrl keeps one
// measurement per index whoever sends it.
import { create } from "@bufbuild/protobuf";
import { EmptySchema, timestampMs, durationMs, timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import { MeasurementSchema, type AnalysisTask, type ClusterService, type Measurement } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import type { Logger } from "@flotilla/runtime";
import { sleep } from "./backoff.ts";
import type { AgentMetrics } from "./metrics.ts";

/** Measurements per report (ctrl takes at most 1000). */
export const MAX_PER_REPORT = 500;
/** How often due measurements are looked for between calls. */
const TICK_MS = 250;

export interface AnalysisRunnerOptions {
  client: Client<typeof ClusterService>;
  region: string;
  /** The revision the region's pods of a deployment run (its applied desired state's); undefined while none is applied. */
  appliedRevision: (deploymentId: string) => number | undefined;
  /**
   * The value of a deployment's secret env variable, for a web analysis' secret header: read
   * from the deployment's Secret in the cluster when the measurement is taken (the agent keeps
   * no value once applied). Undefined: this target has no cluster to read it from.
   */
  secretEnvValue?: (deploymentId: string, variable: string) => Promise<string>;
  /** A call to ctrl at least this often. */
  pollIntervalMs: number;
  /** Deadline of one query. */
  queryTimeoutMs: number;
  /** Deadline of a call to ctrl. */
  callTimeoutMs: number;
  /** Measurements kept waiting to be sent at most (the oldest dropped). */
  maxPending: number;
  metrics: AgentMetrics;
  log: Logger;
}

export class AnalysisRunner {
  readonly #options: AnalysisRunnerOptions;
  #tasks: AnalysisTask[] = [];
  #address = "";
  /** ctrl takes Measurement.no_data (ReportMeasurementsResponse.accepts_no_data). */
  #acceptsNoData = false;
  /** The newest index measured per task id. */
  readonly #measured = new Map<string, number>();
  readonly #inFlight = new Set<string>();
  #pending: Measurement[] = [];
  /** The last call to ctrl failed: ctrl is away. */
  #away = false;

  constructor(options: AnalysisRunnerOptions) {
    this.#options = options;
  }

  /** Measurements waiting to be sent. */
  get pending(): number {
    return this.#pending.length;
  }

  async run(signal: AbortSignal): Promise<void> {
    const { pollIntervalMs, log } = this.#options;
    let lastCall = Number.NEGATIVE_INFINITY;
    while (!signal.aborted) {
      if (this.#pending.length > 0 || Date.now() - lastCall >= pollIntervalMs) {
        lastCall = Date.now();
        try {
          await this.#exchange(signal);
          this.#away = false;
        } catch (error) {
          if (signal.aborted) break;
          this.#away = true;
          log.warn(`analysis: report to ctrl failed: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
      this.#measureDue(Date.now(), signal);
      await sleep(TICK_MS, signal);
    }
  }

  /** Sends what waits (a batch) and takes the tasks ctrl lists now. */
  async #exchange(signal: AbortSignal): Promise<void> {
    const batch = this.#pending.slice(0, MAX_PER_REPORT);
    const response = await this.#options.client.reportMeasurements(
      { region: this.#options.region, measurements: batch },
      { signal, timeoutMs: this.#options.callTimeoutMs },
    );
    this.#pending = this.#pending.slice(batch.length);
    this.#tasks = response.tasks;
    this.#address = response.prometheusAddress;
    this.#acceptsNoData = response.acceptsNoData;
    const listed = new Set(response.tasks.map((t) => t.id));
    for (const id of this.#measured.keys()) if (!listed.has(id)) this.#measured.delete(id);
  }

  /** Starts a measurement of every task whose newest due index has not been measured. */
  #measureDue(now: number, signal: AbortSignal): void {
    const waiting = new Set(this.#away ? [] : this.#pending.map((m) => m.task));
    for (const task of this.#tasks) {
      const analysis = task.analysis;
      if (!analysis || !task.startTime || this.#inFlight.has(task.id) || waiting.has(task.id)) continue;
      const since = now - timestampMs(task.startTime) - (analysis.initialDelay ? durationMs(analysis.initialDelay) : 0);
      if (since < 0) continue;
      const interval = Math.max(1000, analysis.interval ? durationMs(analysis.interval) : 30_000);
      const index = Math.floor(since / interval);
      if (index <= (this.#measured.get(task.id) ?? -1)) continue;
      const revision = this.#options.appliedRevision(task.deployment);
      if (revision !== Number(task.revision)) continue;
      this.#measured.set(task.id, index);
      this.#inFlight.add(task.id);
      void this.#measure(task, index, revision, signal).finally(() => this.#inFlight.delete(task.id));
    }
  }

  async #measure(task: AnalysisTask, index: number, revision: number, signal: AbortSignal): Promise<void> {
    const takenAt = Date.now();
    let result: Measurement["result"];
    try {
      const value = await this.#query(task, signal);
      if (value !== undefined) result = { case: "value", value };
      else if (this.#acceptsNoData) result = { case: "noData", value: create(EmptySchema) };
      else result = { case: "error", value: "Prometheus: no data (an empty vector)" };
    } catch (error) {
      if (signal.aborted) return;
      result = { case: "error", value: (error instanceof Error ? error.message : String(error)).slice(0, 1024) };
    }
    this.#options.metrics.analysisMeasurements.inc({ result: result.case });
    this.#pending.push(create(MeasurementSchema, { task: task.id, index, revision: BigInt(revision), takenAt: timestampFromMs(takenAt), result }));
    const excess = this.#pending.length - this.#options.maxPending;
    if (excess > 0) {
      this.#pending.splice(0, excess);
      this.#options.metrics.analysisMeasurements.inc({ result: "dropped" }, excess);
      this.#options.log.warn(`analysis: ${excess} measurement(s) dropped: more than --analysis-max-pending ${this.#options.maxPending} waiting for ctrl`);
    }
  }

  /** The task's result now: its query's one number, or undefined when it selected nothing. */
  async #query(task: AnalysisTask, signal: AbortSignal): Promise<number | undefined> {
    const provider = task.analysis!.provider;
    const timeoutMs = this.#options.queryTimeoutMs;
    if (provider.case === "prometheus") {
      if (!this.#address) throw new Error(`region ${this.#options.region} has no Prometheus (its Region's metrics.prometheus.address is empty)`);
      const url = `${this.#address}/api/v1/query?query=${encodeURIComponent(provider.value.query)}`;
      return prometheusResult(await getJson(url, {}, signal, timeoutMs));
    }
    if (provider.case === "web") {
      const headers = { ...provider.value.headers };
      for (const [header, variable] of Object.entries(provider.value.secretHeaders)) {
        const read = this.#options.secretEnvValue;
        if (!read) throw new Error(`header ${header}: this agent's target has no cluster to read secret env ${variable} from`);
        headers[header] = await read(task.deployment, variable);
      }
      return numberAt(await getJson(provider.value.url, headers, signal, timeoutMs), provider.value.jsonPath);
    }
    throw new Error("the analysis has no provider this agent knows");
  }
}

/** GETs `url` and parses its JSON body, all within `timeoutMs`. */
async function getJson(url: string, headers: Record<string, string>, signal: AbortSignal, timeoutMs: number): Promise<unknown> {
  const timeout = AbortSignal.timeout(timeoutMs);
  let response: Response;
  let text: string;
  try {
    response = await fetch(url, { headers: { accept: "application/json", ...headers }, signal: AbortSignal.any([signal, timeout]) });
    text = await response.text();
  } catch (error) {
    if (timeout.aborted) throw new Error(`no answer within ${timeoutMs} ms`);
    throw new Error(`request failed: ${error instanceof Error ? ((error.cause as Error | undefined)?.message ?? error.message) : String(error)}`);
  }
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${text.slice(0, 200)}`);
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`not JSON: ${text.slice(0, 200)}`);
  }
}

/**
 * The one number of an instant query's answer: a scalar, or a vector of exactly one sample.
 * No sample is undefined: no data, which ctrl judges INCONCLUSIVE (the new pods may have had no
 * traffic yet: nothing shows them bad or good, so the wave pauses for a person rather than
 * counting an error toward a failure, as Argo Rollouts does). More than one is an error (the
 * query should aggregate them, e.g. with sum()).
 */
export function prometheusResult(body: unknown): number | undefined {
  const answer = body as { status?: string; error?: string; data?: { resultType?: string; result?: unknown } };
  if (answer?.status !== "success") throw new Error(`Prometheus: ${answer?.error ?? "query failed"}`);
  const { resultType, result } = answer.data ?? {};
  if (resultType === "scalar") return Number((result as [number, string])[1]);
  if (resultType !== "vector" || !Array.isArray(result)) throw new Error(`Prometheus: a ${resultType} result; want a scalar or a vector of one sample`);
  if (result.length === 0) return undefined;
  if (result.length > 1) throw new Error(`Prometheus: ${result.length} samples; aggregate them to one (e.g. sum(...))`);
  return Number((result[0] as { value: [number, string] }).value[1]);
}

/** The number at `path` ($.a.b[0]['c'] steps) in `body`. */
export function numberAt(body: unknown, path: string): number {
  let at: unknown = body;
  for (const step of path.slice(1).matchAll(/\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\['([^']*)'\]/g)) {
    const key = step[1] ?? step[3] ?? Number(step[2]);
    at = at !== null && typeof at === "object" ? (at as Record<string | number, unknown>)[key] : undefined;
  }
  // A numeric string counts (many APIs quote their numbers); another string does not.
  const value = typeof at === "string" && /^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/.test(at) ? Number(at) : at;
  if (typeof value !== "number") throw new Error(`${path}: not a number (${JSON.stringify(at)?.slice(0, 100)})`);
  return value;
}
