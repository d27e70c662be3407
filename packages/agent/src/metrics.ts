// The agent's Prometheus metrics, on a registry of its own (several agents may share a process
// in tests). Names follow controller-runtime's (reconcile_total, workqueue_depth, …).
import { Counter, Gauge, Histogram, Registry } from "prom-client";

export type ReconnectReason = "error" | "closed" | "inactive" | "resync_required" | "consumer_too_slow";

/** Values read at scrape time. */
export interface MetricSources {
  queueDepth(): number;
  desiredCounts(): Record<string, number>;
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

  readonly queueDepth: Gauge = new Gauge({
    name: "flotilla_agent_workqueue_depth",
    help: "Keys ready to be processed by the work queue.",
    registers: [this.registry],
    collect: () => {
      if (this.#sources) this.queueDepth.set(this.#sources.queueDepth());
    },
  });

  readonly retries = new Counter({
    name: "flotilla_agent_workqueue_retries_total",
    help: "Keys requeued with backoff after a failed reconcile.",
    registers: [this.registry],
  });

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
    help: "Re-applies of already applied resources that changed the live objects, by type and reason (deleted, modified, refresh).",
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
