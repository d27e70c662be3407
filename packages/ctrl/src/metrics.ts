// Prometheus metrics of a ctrl process: process metrics, RPCs by procedure and code, durations.
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { Logger } from "@flotilla/runtime";

export class CtrlMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: "flotilla_ctrl_requests_total",
    help: "RPCs handled, by procedure and final code.",
    labelNames: ["procedure", "code"] as const,
    registers: [this.registry],
  });
  readonly requestDuration = new Histogram({
    name: "flotilla_ctrl_request_duration_seconds",
    help: "RPC duration until the last response message (streams: until they end).",
    labelNames: ["procedure"] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600],
    registers: [this.registry],
  });

  // Streaming (SyncDesiredState, WatchDeploymentChanges and the shared poller).
  readonly snapshotDuration = new Histogram({
    name: "flotilla_ctrl_snapshot_duration_seconds",
    help: "SyncDesiredState duration, from request to complete marker.",
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });
  readonly snapshotResources = new Counter({
    name: "flotilla_ctrl_snapshot_resources_sent_total",
    help: "Resources sent by SyncDesiredState, by type.",
    labelNames: ["type"] as const,
    registers: [this.registry],
  });
  readonly watchStreams = new Gauge({
    name: "flotilla_ctrl_watch_streams",
    help: "Open WatchDeploymentChanges streams, by region.",
    labelNames: ["region"] as const,
    registers: [this.registry],
  });
  readonly watchEvents = new Counter({
    name: "flotilla_ctrl_watch_events_sent_total",
    help: "Change events sent on watch streams.",
    registers: [this.registry],
  });
  readonly watchBookmarks = new Counter({
    name: "flotilla_ctrl_watch_bookmarks_sent_total",
    help: "Bookmarks (no events, current version) sent on idle watch streams.",
    registers: [this.registry],
  });
  readonly watchEndedForLag = new Counter({
    name: "flotilla_ctrl_watch_streams_ended_for_lag_total",
    help: "Watch streams ended with CONSUMER_TOO_SLOW because their buffer overflowed.",
    registers: [this.registry],
  });
  readonly memoryReleases = new Counter({
    name: "flotilla_ctrl_memory_releases_total",
    help: "Memory-reducing GCs with malloc_trim run after RSS grew by --memory-release-growth-bytes.",
    registers: [this.registry],
  });
  readonly connectionBounds = new Counter({
    name: "flotilla_ctrl_bounds_enforced_total",
    help: "Streams and connections ended by a bound, by reason (send_timeout, idle, resets, pings, ...).",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly pollerQueries = new Counter({
    name: "flotilla_ctrl_poller_queries_total",
    help: "Database queries issued by the shared change poller.",
    registers: [this.registry],
  });
  readonly pollerQueryDuration = new Histogram({
    name: "flotilla_ctrl_poller_query_duration_seconds",
    help: "Duration of the shared change poller's database queries.",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly headVersion = new Gauge({
    name: "flotilla_ctrl_region_head_version",
    help: "Head version per region, as last seen by the poller.",
    labelNames: ["region"] as const,
    registers: [this.registry],
  });

  // Observed status (ReportObservedState).
  readonly statusUpdates = new Counter({
    name: "flotilla_ctrl_status_updates_total",
    help: "Reported observations: changed (written) or noop (identical, nothing written).",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });
  readonly agentLastReport = new Gauge({
    name: "flotilla_ctrl_agent_last_report_timestamp_seconds",
    help: "When each region's agent last reported to this ctrl process.",
    labelNames: ["region"] as const,
    registers: [this.registry],
  });
  readonly agentAppliedVersion = new Gauge({
    name: "flotilla_ctrl_agent_applied_version",
    help: "The applied version each region's agent last reported.",
    labelNames: ["region"] as const,
    registers: [this.registry],
  });
  readonly agentLag = new Gauge({
    name: "flotilla_ctrl_agent_lag_versions",
    help: "Region head version minus the agent's applied version, at its last report.",
    labelNames: ["region"] as const,
    registers: [this.registry],
  });

  readonly reportsFenced = new Counter({
    name: "flotilla_ctrl_reports_fenced_total",
    help: "Reports refused because their agent's leader epoch is older than the region's newest (a deposed leader).",
    labelNames: ["region"] as const,
    registers: [this.registry],
  });

  // Notifications (notifications/dispatcher.ts).
  readonly notificationDeliveries = new Counter({
    name: "flotilla_ctrl_notification_attempts_total",
    help: "Delivery attempts of notifications by this replica, by outcome: delivered, retry (failed, to be retried), dead (failed, dead-lettered).",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly notificationsInFlight = new Gauge({
    name: "flotilla_ctrl_notification_attempts_in_flight",
    help: "Delivery attempts of notifications in flight in this replica (at most --notifier-concurrency).",
    registers: [this.registry],
  });

  // Staged rollouts (rollouts/driver.ts).
  readonly measurements = new Counter({
    name: "flotilla_ctrl_analysis_measurements_total",
    help: "Reported analysis measurements: recorded, duplicate (kept already) or ignored (no open bake's task, or another revision than the task's).",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });

  readonly rolloutsEnded = new Counter({
    name: "flotilla_ctrl_rollouts_ended_total",
    help: "Rollouts ended, by result (SUCCEEDED, ROLLED_BACK, SUPERSEDED, ABORTED), as this replica moved them.",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });
  readonly waveSeconds = new Histogram({
    name: "flotilla_ctrl_rollout_wave_duration_seconds",
    help: "From a wave's start to its end (its bake included).",
    buckets: [1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200],
    registers: [this.registry],
  });
  readonly rolloutDriverLeading = new Gauge({
    name: "flotilla_ctrl_rollout_driver_leading",
    help: "1 while this replica holds the rollout-driver lease and drives rollouts, else 0.",
    registers: [this.registry],
  });
  #countActiveRollouts: (() => Promise<Map<string, number>>) | undefined;
  readonly activeRollouts = new Gauge({
    name: "flotilla_ctrl_rollouts_active",
    help: "Rollouts not ended, by state (read from the database when scraped).",
    labelNames: ["state"] as const,
    registers: [this.registry],
    collect: async () => {
      if (!this.#countActiveRollouts) return;
      this.activeRollouts.reset();
      for (const [state, n] of await this.#countActiveRollouts()) this.activeRollouts.set({ state }, n);
    },
  });

  #sendBudgetUsed: (() => number) | undefined;
  readonly sendBudgetUsed = new Gauge({
    name: "flotilla_ctrl_send_budget_used_bytes",
    help: "Bytes of stream messages waiting for their clients, of --send-budget-bytes.",
    registers: [this.registry],
    collect: () => {
      if (this.#sendBudgetUsed) this.sendBudgetUsed.set(this.#sendBudgetUsed());
    },
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** Where flotilla_ctrl_send_budget_used_bytes reads its value from. */
  countSendBudgetWith(used: () => number): void {
    this.#sendBudgetUsed = used;
  }

  /** Where flotilla_ctrl_rollouts_active reads its counts from. */
  countRolloutsWith(count: () => Promise<Map<string, number>>): void {
    this.#countActiveRollouts = count;
  }

  /** Counts a call refused before it reached the interceptors (authentication). */
  rejected(service: string, method: string, error: ConnectError): void {
    this.requests.inc({ procedure: `${service}/${method}`, code: codeName(error.code) });
  }

  /**
   * Counts and logs every RPC once it has finished, including streams and failures. `mapError`
   * turns what handlers throw into what the client gets; doing it all in one wrapper keeps
   * the per-message cost of streams to a single iterator layer. Log levels: failures that want
   * an operator's attention (ours, or a client we refused to serve) warn; writes and the
   * mistakes of a client (bad input, unknown ids, bad credentials) info; reads and streams
   * that end as expected (ok, canceled, unavailable) debug.
   */
  interceptor(mapError: (error: unknown) => unknown, log: Logger): Interceptor {
    return (next) => async (req) => {
      const procedure = `${req.service.typeName}/${req.method.name}`;
      const started = performance.now();
      // The region and resource a request names, for the log line.
      const region = req.stream ? undefined : (req.message as { region?: unknown }).region;
      const resource = req.stream ? undefined : resourceOf(req.message);
      const done = (error?: unknown, response?: unknown) => {
        const code = error === undefined ? "ok" : codeName(ConnectError.from(error).code);
        const seconds = (performance.now() - started) / 1000;
        this.requests.inc({ procedure, code });
        this.requestDuration.observe({ procedure }, seconds);
        const level = OPERATOR_ATTENTION.has(code) ? "warn" : !EXPECTED_ENDS.has(code) || WRITE.test(req.method.name) ? "info" : "debug";
        const message = code === "ok" ? procedure : `${procedure}: ${ConnectError.from(error).rawMessage}`;
        const revision = resourceOf(response)?.revision;
        log[level](message, {
          code,
          ms: Math.round(seconds * 1000),
          region: typeof region === "string" && region ? region : undefined,
          resource: resource?.id,
          version: typeof revision === "bigint" ? Number(revision) : undefined,
        });
      };
      let res;
      try {
        res = await next(req);
      } catch (thrown) {
        const error = mapError(thrown);
        done(error);
        throw error;
      }
      if (!res.stream) {
        done(undefined, res.message);
        return res;
      }
      return { ...res, message: endObserved(res.message, mapError, done) };
    };
  }
}

/**
 * `messages`, telling `done` once how the stream ended: with nothing when it completed, with
 * what it threw (mapped by `mapError`, and rethrown so), or with CANCELED when its consumer
 * stopped early. An iterator rather than an async generator: a generator layer costs a
 * fan-out several promises and turns per stream and message.
 */
function endObserved<T>(messages: AsyncIterable<T>, mapError: (error: unknown) => unknown, done: (outcome?: unknown) => void): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]() {
      const source = messages[Symbol.asyncIterator]();
      let ended = false;
      const end = (outcome?: unknown) => {
        if (ended) return;
        ended = true;
        done(outcome);
      };
      return {
        next: () =>
          source.next().then(
            (result) => {
              if (result.done) end();
              return result;
            },
            (thrown: unknown) => {
              const error = mapError(thrown);
              end(error);
              throw error;
            },
          ),
        return: async () => {
          try {
            return (await source.return?.()) ?? { done: true, value: undefined };
          } finally {
            end(new ConnectError("client went away", Code.Canceled));
          }
        },
      };
    },
  };
}

const EXPECTED_ENDS = new Set(["ok", "canceled", "unavailable"]);
/** Server faults, exhausted bounds, and preconditions an operator acts on (a fenced agent, a resync). */
const OPERATOR_ATTENTION = new Set(["internal", "unknown", "data_loss", "deadline_exceeded", "resource_exhausted", "failed_precondition"]);

/** The resource a message names: its own `id` (and `revision`), else that of a field holding one (`deployment`, …). */
function resourceOf(message: unknown): { id: string; revision?: unknown } | undefined {
  if (message === null || typeof message !== "object") return undefined;
  const fields = message as Record<string, unknown>;
  if (typeof fields.id === "string" && fields.id) return { id: fields.id, revision: fields.revision };
  for (const value of Object.values(fields)) {
    if (value !== null && typeof value === "object" && typeof (value as { id?: unknown }).id === "string") return resourceOf(value);
  }
  return undefined;
}
const WRITE = /^(Create|Update|Delete|Archive|Revoke|Set|Put)/;

function codeName(code: Code): string {
  return Code[code]!.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}
