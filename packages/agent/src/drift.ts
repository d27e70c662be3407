// Drift correction: the cluster is kept equal to the desired state even when someone else
// changes it, not only when the desired state changes.
//
// * Event-driven: an observer change of a managed object whose resource is desired and settled
//   re-applies the resource when the object was deleted, or when a field the agent applies no
//   longer has the applied value. Only the agent's own fields are compared (its manifest must be
//   contained in the live object, in the API server's canonical form: see compare.ts), so fields
//   of other field managers (an added label) are left alone — and server-side apply leaves them
//   alone too.
// * Orphans: a managed object of a desired, settled resource that the resource's manifests no
//   longer include (its Service once the port went to 0, written back by a stale writer) makes
//   the resource apply again, which deletes what it must not have (Manifests.absent) with the
//   same owner and precondition checks as prune — when it is observed, not at the next prune.
// * Periodic refresh: a resource whose last successful apply is older than `refreshIntervalMs` is
//   re-applied, at most `refreshPerSecond` resources per second (a safety net for missed events).
import { sleep } from "./backoff.ts";
import type { CachedObject } from "./cached-object.ts";
import { desiredResource, type DesiredEntry, type DesiredTable } from "./desired-table.ts";
import { heldDigest } from "./held.ts";
import { buildManifests, describeObject, type KubeObject } from "./manifests.ts";
import type { AgentMetrics } from "./metrics.ts";
import type { ObjectChange } from "./observer.ts";

export interface DriftOptions {
  table: DesiredTable;
  region: string;
  metrics: AgentMetrics;
  /** Re-apply resources whose last successful apply is older than this. */
  refreshIntervalMs: number;
  /** Resources re-applied per second by the periodic refresh, at most. */
  refreshPerSecond: number;
}

export class DriftCorrector {
  readonly #options: DriftOptions;

  constructor(options: DriftOptions) {
    this.#options = options;
  }

  /**
   * Observer hook (ObserverOptions.held): the digest of what the agent applies to the full
   * `object` of resource `key`, if the object holds it. A status write keeps what the object held.
   */
  held(object: KubeObject, key: string | undefined, previous: CachedObject | undefined): string | undefined {
    if (previous?.held !== undefined && onlyStatusChanged(previous.object, object)) return previous.held;
    const entry = key === undefined ? undefined : this.#options.table.get(key);
    // A newer version is due after one this process applied: its own writes are on their way and
    // the run applies anyway, so the check (a decode, the manifests, a comparison) would be wasted
    // on every event of a burst. Settled entries, and entries never applied by this process (a
    // restart's), are checked.
    if (!entry || (entry.status !== "done" && entry.appliedVersion !== undefined)) return undefined;
    const wanted = this.#wanted(entry, object);
    return wanted && heldDigest(object, wanted);
  }

  /** Observer hook: re-applies the resource if `change` undid what the agent applied; retries it if it failed. */
  onChange({ key, object, previous, held }: ObjectChange): void {
    const { table } = this.#options;
    const entry = key === undefined ? undefined : table.get(key);
    // A failed resource (e.g. an ownership conflict: another resource's labels on the object, or
    // labels added for adoption) is checked again when its object changes, not only after its backoff.
    if (entry?.status === "error" && object && !(previous && onlyStatusChanged(previous, object))) {
      table.retryNow(entry.key);
      return;
    }
    if (entry?.desired.kind !== "upsert") return;
    // A run is due or in flight: it applies anyway, but one in flight may have written the object
    // before this delete, so a delete is noted for it (edits are caught by the run's own check).
    const unsettled = entry.status !== "done";
    if (unsettled ? object !== undefined : entry.appliedVersion !== entry.version) {
      // An object the resource must not have (a Service once port is 0, a budget removed…),
      // appearing while a run is due or in flight: the run may be past its deletes of absent
      // objects, so it runs once more, as after a delete during a run. Deployments are always
      // wanted, so a burst's events build no manifests here.
      if (unsettled && object && object.kind !== "Deployment" && !this.#wanted(entry, object)) {
        table.noteDeleted(entry.key);
        this.#options.metrics.driftCorrections.inc({ type: entry.key.slice(0, entry.key.indexOf("/")), reason: "orphan" });
      }
      return;
    }
    // An object that holds what the agent applies (held() compared it) has not drifted.
    if (object && (held !== undefined || (previous && onlyStatusChanged(previous, object)))) return;
    if (!this.#wanted(entry, object ?? previous!)) {
      if (object && !unsettled && table.requestReapply(entry.key, "orphan")) {
        this.#options.metrics.driftCorrections.inc({ type: entry.key.slice(0, entry.key.indexOf("/")), reason: "orphan" });
      }
      return;
    }
    if (!object) {
      if (unsettled) table.noteDeleted(entry.key);
      else table.requestReapply(entry.key, "deleted");
      return;
    }
    table.requestReapply(entry.key, "modified");
  }

  /** The manifest the agent applies to `live`'s place for `entry`, if the entry wants one there. */
  #wanted(entry: DesiredEntry, live: KubeObject): KubeObject | undefined {
    const { desired } = entry;
    if (desired.kind !== "upsert") return undefined;
    const name = describeObject(live);
    return buildManifests(desiredResource(desired), this.#options.region).apply.find((m) => describeObject(m) === name);
  }

  /** Runs refresh rounds until `signal` aborts. */
  async runRefresh(signal: AbortSignal): Promise<void> {
    const { table, metrics, refreshIntervalMs, refreshPerSecond } = this.#options;
    const spacingMs = 1000 / refreshPerSecond;
    while (!signal.aborted) {
      const dueBefore = Date.now() - refreshIntervalMs;
      const due = [...table.entries()].filter((e) => e.status === "done" && e.appliedAt !== undefined && e.appliedAt <= dueBefore).map((e) => e.key);
      metrics.refreshRemaining.set(due.length);
      for (const [index, key] of due.entries()) {
        if (signal.aborted) break;
        const entry = table.get(key);
        // Applied (or changed) since the round started: not due any more.
        if (entry?.appliedAt !== undefined && entry.appliedAt <= dueBefore) {
          table.requestReapply(key, "refresh");
          await sleep(spacingMs, signal);
        }
        metrics.refreshRemaining.set(due.length - index - 1);
      }
      // The oldest apply becomes due one interval after it happened: look again then, but not
      // more often than every second.
      let oldest = Date.now();
      for (const entry of table.entries()) if (entry.appliedAt !== undefined && entry.appliedAt < oldest) oldest = entry.appliedAt;
      await sleep(Math.max(1000, oldest + refreshIntervalMs - Date.now()), signal);
    }
  }
}

/** A write that changed neither the spec (generation) nor the labels and annotations. */
function onlyStatusChanged(previous: KubeObject, object: KubeObject): boolean {
  const generation = object.metadata.generation;
  return (
    generation !== undefined &&
    generation === previous.metadata.generation &&
    JSON.stringify(previous.metadata.labels) === JSON.stringify(object.metadata.labels) &&
    JSON.stringify(previous.metadata.annotations) === JSON.stringify(object.metadata.annotations)
  );
}
