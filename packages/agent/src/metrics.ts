// The agent's Prometheus metrics, on a registry of its own (several agents may share a process
// in tests). The work queue's and the Kubernetes client's metrics have client-go's names, so the
// dashboards made for controllers chart them; the rest are the agent's own (flotilla_agent_*).
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { ReapplyReason } from "./desired-table.ts";
import { RESOURCE_TYPE_NAMES } from "./keys.ts";
import type { QueueMetrics } from "./queue/key-queue.ts";
import type { ReadinessCondition } from "./readiness.ts";

export const RECONNECT_REASONS = ["error", "closed", "inactive", "resync_required", "consumer_too_slow"] as const;
export type ReconnectReason = (typeof RECONNECT_REASONS)[number];
/** The reasons of drift corrections (desired-table.ts's ReapplyReason). */
const REAPPLY_REASONS = ["deleted", "modified", "refresh", "orphan"] as const satisfies readonly ReapplyReason[];

/** Values read at scrape time. */
export interface MetricSources {
  queueDepth(): number;
  desiredCounts(): Record<string, number>;
  readiness?(): readonly ReadinessCondition[];
  reportBacklog?(): number;
}

/** The `name` label of the agent's one work queue. */
export const QUEUE_NAME = "agent";

// client-go's workqueue buckets: prometheus.ExponentialBuckets(10e-9, 10, 10) (10 ns .. 10 s).
const QUEUE_BUCKETS = Array.from({ length: 10 }, (_, i) => 1e-8 * 10 ** i);

/** One of the work queue's two latency histograms, as client-go defines them. */
function queueHistogram(registry: Registry, name: string, help: string): Histogram<"name"> {
  return new Histogram({ name, help, labelNames: ["name"] as const, buckets: QUEUE_BUCKETS, registers: [registry] });
}

/** Times keys from add to get (queue duration) and from get to done (work duration), as client-go's defaultQueueMetrics. */
function queueMetrics(metrics: AgentMetrics): QueueMetrics {
  const labels = { name: QUEUE_NAME };
  const added = new Map<string, number>();
  const started = new Map<string, number>();
  return {
    add(key) {
      metrics.queueAdds.inc(labels);
      if (!added.has(key)) added.set(key, performance.now());
    },
    get(key) {
      const since = added.get(key);
      if (since !== undefined) metrics.queueDuration.observe(labels, (performance.now() - since) / 1000);
      added.delete(key);
      started.set(key, performance.now());
    },
    done(key) {
      const since = started.get(key);
      if (since !== undefined) metrics.workDuration.observe(labels, (performance.now() - since) / 1000);
      started.delete(key);
    },
  };
}

export class AgentMetrics {
  readonly registry = new Registry();
  /** Read at scrape time; until collectFrom() the gauges they feed stay unset. */
  #sources: MetricSources | undefined;

  /** Where the gauges read at scrape time come from (set once the parts they read exist). */
  collectFrom(sources: MetricSources): void {
    this.#sources = sources;
  }

  readonly reconciles = new Counter({
    name: "flotilla_agent_reconcile_total",
    help: "Reconciles of desired resources by resource type, operation (apply, delete, skip) and result (success, error).",
    labelNames: ["type", "op", "result"] as const,
    registers: [this.registry],
  });

  readonly reconcileDuration = new Histogram({
    name: "flotilla_agent_reconcile_duration_seconds",
    help: "Time of one reconcile against the target.",
    labelNames: ["type", "op"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  // The work queue's metrics under client-go's names (k8s.io/client-go/util/workqueue metrics.go,
  // as controller-runtime registers them), labelled with the queue's name.
  readonly queueDepth: Gauge<"name"> = new Gauge({
    name: "workqueue_depth",
    help: "Current depth of workqueue (keys ready to be processed).",
    labelNames: ["name"] as const,
    registers: [this.registry],
    collect: () => {
      if (this.#sources) this.queueDepth.set({ name: QUEUE_NAME }, this.#sources.queueDepth());
    },
  });

  readonly analysisMeasurements = new Counter({
    name: "flotilla_agent_analysis_measurements_total",
    help: "Rollout analysis measurements taken, by result (value, error), or dropped (pending past --analysis-max-pending).",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });

  readonly queueAdds = new Counter({
    name: "workqueue_adds_total",
    help: "Total number of adds handled by workqueue.",
    labelNames: ["name"] as const,
    registers: [this.registry],
  });

  readonly queueDuration = queueHistogram(
    this.registry,
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested.",
  );

  readonly workDuration = queueHistogram(this.registry, "workqueue_work_duration_seconds", "How long in seconds processing an item from workqueue takes.");

  readonly retries = new Counter({
    name: "workqueue_retries_total",
    help: "Total number of retries handled by workqueue (keys requeued after a failed reconcile).",
    labelNames: ["name"] as const,
    registers: [this.registry],
  });

  /** What the queue reports through (queue.ts's QueueMetrics), timing each key as client-go does. */
  readonly queue: QueueMetrics = queueMetrics(this);

  // client-go's rest_client_requests_total (k8s.io/client-go/tools/metrics): every request to the
  // Kubernetes API, by status code ("<error>" when none arrived), method and host.
  readonly restClientRequests = new Counter({
    name: "rest_client_requests_total",
    help: "Number of HTTP requests to the Kubernetes API, partitioned by status code, method, and host.",
    labelNames: ["code", "method", "host"] as const,
    registers: [this.registry],
  });

  // Each condition of /readyz (connected, synced, cluster) as 0/1, and the whole as condition "all".
  readonly ready: Gauge<"condition"> = new Gauge({
    name: "flotilla_agent_ready",
    help: 'Readiness of the agent (condition="all") and of each of its conditions: 1 met, 0 not.',
    labelNames: ["condition"] as const,
    registers: [this.registry],
    collect: () => {
      const conditions = this.#sources?.readiness?.() ?? [];
      for (const { name, met } of conditions) this.ready.set({ condition: name }, met ? 1 : 0);
      if (conditions.length > 0) this.ready.set({ condition: "all" }, conditions.every((c) => c.met) ? 1 : 0);
    },
  });

  constructor() {
    // process_* and nodejs_* (heap, event loop lag, GC), as ctrl has them.
    collectDefaultMetrics({ register: this.registry });
    // (Fields are initialized before a constructor's body, wherever they are declared.)
    this.#exportZeros();
  }

  /**
   * Every series of the known label values, at zero, from the start (as client-go exports its
   * workqueue metrics): a dashboard or an alert on rate() or increase() sees an idle agent,
   * and the first event as an increase.
   */
  #exportZeros(): void {
    const queue = { name: QUEUE_NAME };
    this.queueDepth.set(queue, 0);
    this.queueAdds.inc(queue, 0);
    this.retries.inc(queue, 0);
    this.queueDuration.zero(queue);
    this.workDuration.zero(queue);
    for (const type of RESOURCE_TYPE_NAMES) {
      for (const op of ["apply", "delete", "skip"]) for (const result of ["success", "error"]) this.reconciles.inc({ type, op, result }, 0);
      for (const op of ["apply", "delete"]) this.reconcileDuration.zero({ type, op });
      for (const reason of REAPPLY_REASONS) this.driftCorrections.inc({ type, reason }, 0);
    }
    for (const status of ["pending", "done", "error"]) this.desiredEntries.set({ status }, 0);
    for (const reason of RECONNECT_REASONS) this.reconnects.inc({ reason }, 0);
  }

  readonly coalesced = new Counter({
    name: "flotilla_agent_workqueue_coalesced_total",
    help: "Changes absorbed by a run of their key that was already pending.",
    registers: [this.registry],
  });

  readonly desiredEntries: Gauge<"status"> = new Gauge({
    name: "flotilla_agent_desired_resources",
    help: "Entries of the desired table by status (pending, done, error).",
    labelNames: ["status"] as const,
    registers: [this.registry],
    collect: () => {
      for (const [status, count] of Object.entries(this.#sources?.desiredCounts() ?? {})) this.desiredEntries.set({ status }, count);
    },
  });

  readonly fullSyncDuration = new Histogram({
    name: "flotilla_agent_full_sync_duration_seconds",
    help: "Time of a full sync, from SyncDesiredState until its changes and prune decisions were dispatched.",
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });

  readonly versionLastSeen = new Gauge({
    name: "flotilla_agent_version_last_seen",
    help: "Region version the agent's desired table is complete up to (its watch cursor).",
    registers: [this.registry],
  });

  readonly reconnects = new Counter({
    name: "flotilla_agent_stream_reconnects_total",
    help: "Reconnects to ctrl by reason (error, closed, inactive, resync_required, consumer_too_slow).",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });

  readonly pruned = new Counter({
    name: "flotilla_agent_pruned_objects_total",
    help: "Managed objects selected for deletion by prune because they are no longer desired.",
    registers: [this.registry],
  });

  readonly pruneRefused = new Counter({
    name: "flotilla_agent_prune_refused_total",
    help: "Prunes refused by the safety valve (too large a fraction of the managed objects).",
    registers: [this.registry],
  });

  readonly observationsSent = new Counter({
    name: "flotilla_agent_observations_sent_total",
    help: "Resource observations ctrl accepted (changed ones and full sets).",
    registers: [this.registry],
  });

  readonly reportBacklog: Gauge = new Gauge({
    name: "flotilla_agent_report_backlog",
    help: "Resources whose observation is still to be reported to ctrl (changed ones and the rest of a full set).",
    registers: [this.registry],
    collect: () => {
      const backlog = this.#sources?.reportBacklog?.();
      if (backlog !== undefined) this.reportBacklog.set(backlog);
    },
  });

  readonly reportErrors = new Counter({
    name: "flotilla_agent_report_errors_total",
    help: "Failed ReportObservedState calls (their observations are retried).",
    registers: [this.registry],
  });

  readonly observerRestarts = new Counter({
    name: "flotilla_agent_observer_restarts_total",
    help: "Restarts of the observer's Kubernetes watches by reason (closed, gone, inactive, error).",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });

  readonly driftCorrections = new Counter({
    name: "flotilla_agent_drift_corrections_total",
    help: "Re-applies of already applied resources that changed the live objects, by type and reason (deleted, modified, refresh, orphan: a managed object the resource no longer includes).",
    labelNames: ["type", "reason"] as const,
    registers: [this.registry],
  });

  readonly leaderStatus = new Gauge({
    // controller-runtime's (client-go's) name and meaning, so existing dashboards chart it.
    name: "leader_election_master_status",
    help: "1 while this agent leads the Lease `name`, 0 while it stands by (only with leader election on).",
    labelNames: ["name"] as const,
    registers: [this.registry],
  });

  readonly leaderTransitions = new Counter({
    name: "flotilla_agent_leader_transitions_total",
    help: "Changes of this agent's role for the Lease `name`: to leader (acquired) or to standby (lost, released or fenced).",
    labelNames: ["name", "to"] as const,
    registers: [this.registry],
  });

  readonly refreshRemaining = new Gauge({
    name: "flotilla_agent_refresh_remaining",
    help: "Resources of the current periodic refresh round not yet re-applied (0 between rounds).",
    registers: [this.registry],
  });
}
