// One work-queue run of one key: read the newest desired state from the table, make the target
// follow it, record the outcome, and choose the retry (client-go's processNextWorkItem).
import type { Logger } from "@flotilla/runtime";
import type { DesiredResource } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { desiredResource, type DesiredTable, type ReapplyReason, type SecretEnvSealFetch } from "./desired-table.ts";
import { jittered } from "./backoff.ts";
import { QUEUE_NAME, type AgentMetrics } from "./metrics.ts";
import { namespaceRefusal, type NamespaceRules } from "./namespaces.ts";
import { prune, type PruneDeps, type PruneOptions, type PruneResult } from "./prune.ts";
import type { RateLimitingQueue } from "./queue/rate-limiting-queue.ts";
import { SecretValuesNeeded, TargetError, type AppliedVersions, type LiveObjects, type Target } from "./target.ts";

export interface ReconcilerDeps {
  table: DesiredTable;
  queue: RateLimitingQueue;
  target: Target;
  metrics: AgentMetrics;
  log: Logger;
  /**
   * A key's objects as last observed (by describeObject() name), once the observer listed
   * every kind: the target skips those that hold what it would apply and the deletes of objects
   * not there, and a re-apply that moves one of their versions corrected drift (counted in
   * drift_corrections_total).
   */
  liveObjects?: (key: string) => LiveObjects | undefined;
  /** Namespaces the agent may write into; the others are refused (reported, not applied). */
  namespaces: NamespaceRules;
  /** Interval at which an ownership conflict is checked again (it clears once the object is removed or marked for adoption). */
  ownershipRecheckMs: number;
  /**
   * Fetches secret values again (GetSecretEnvSeals) for an apply that needs them once they left
   * the table (SecretValuesNeeded); without it, such an apply fails saying so.
   */
  fetchSecretEnvSeals?: SecretEnvSealFetch;
}

/**
 * Makes the target follow the desired table (after statedb's reconciler Operations). Both
 * operations are idempotent: either may run again after any failure, or twice for the same
 * input, and converges on the same target state.
 */
export interface Reconciler {
  /**
   * One work-queue run of `key`: applies the newest desired state of the key (an upsert) or
   * deletes its objects (a tombstone), records the outcome in the table and schedules the retry
   * (backoff, Retry-After, or none after a success). Target failures do not throw.
   */
  reconcile(key: string): Promise<void>;
  /**
   * After a complete snapshot replaced the table (`snapshotVersion`): deletes the managed
   * objects nothing desires, unless more than the safety valve allows (then refuses).
   */
  prune(snapshotVersion: number): Promise<PruneResult>;
}

/** The agent's Reconciler: reconcile() as reconciler() below, prune() as prune.ts. */
export function newReconciler(deps: ReconcilerDeps & Pick<PruneDeps, "managedObjects"> & { prune: PruneOptions }): Reconciler {
  const reconcile = reconciler(deps);
  return { reconcile, prune: (snapshotVersion) => prune(deps, snapshotVersion, deps.prune) };
}

export function reconciler({
  table,
  queue,
  target,
  metrics,
  log,
  liveObjects,
  namespaces,
  ownershipRecheckMs,
  fetchSecretEnvSeals,
}: ReconcilerDeps): (key: string) => Promise<void> {
  /**
   * Applies `resource`, the desired state of `key` at `version`; given its secret values again
   * and applied once more if the target needs them (they left the table once applied before).
   */
  const apply = async (key: string, version: number, resource: DesiredResource, live: LiveObjects | undefined) => {
    try {
      return await target.apply(resource, live);
    } catch (error) {
      if (!(error instanceof SecretValuesNeeded)) throw error;
      if (!fetchSecretEnvSeals) throw new TargetError(`${error.message}, and this agent cannot fetch them again`);
      let sealed: Uint8Array | undefined;
      try {
        sealed = (await fetchSecretEnvSeals([{ id: resource.id, version: resource.version }])).get(resource.id);
      } catch (fetchError) {
        throw new TargetError(`${error.message}; fetching them from ctrl failed: ${fetchError instanceof Error ? fetchError.message : String(fetchError)}`);
      }
      if (!sealed)
        throw new TargetError(
          `${error.message}; ctrl gave none for version ${resource.version} (a newer version replaced it, or this credential receives no values)`,
        );
      const restored = table.restoreSecretEnvValues(key, version, sealed);
      if (!restored) throw new TargetError(`${error.message}; a newer version replaced version ${version} meanwhile`);
      return await target.apply(restored, live);
    }
  };
  return async (key) => {
    const entry = table.get(key);
    if (!entry) return queue.forget(key);
    const { desired, version } = entry;
    const type = key.slice(0, key.indexOf("/"));
    const { reapply } = entry;
    if (desired.kind === "upsert" && entry.appliedVersion === version && !reapply) {
      // Already applied this version (e.g. the run a coalesced change scheduled): nothing to do.
      table.markDone(key, version);
      metrics.reconciles.inc({ type, op: "skip", result: "success" });
      return queue.forget(key);
    }
    const op = desired.kind === "upsert" ? "apply" : "delete";
    const timer = metrics.reconcileDuration.startTimer({ type, op });
    try {
      const resource = desired.kind === "upsert" ? desiredResource(desired) : undefined;
      const refused = resource && namespaceRefusal(resource.namespace, namespaces);
      if (refused) throw new TargetError(refused, undefined, undefined, "namespace");
      // Deletes noted before this run are undone by it; those noted from here on may not be.
      entry.deletedDuringRun = false;
      const before = liveObjects?.(key);
      // A re-apply must restore every object: no object may be skipped as unchanged.
      const applied = desired.kind === "upsert" ? await apply(key, version, resource!, reapply ? undefined : before) : await target.delete(desired.tombstone);
      timer();
      // Drift correction ignores edits while a run is in flight; an object this run left
      // alone (skipped or a no-op) that changed meanwhile would go uncorrected otherwise.
      // An object this run wrote and someone deleted before the run ended shows only as a noted delete.
      const drifted =
        (!reapply && before && applied ? changedMeanwhile(before, applied, liveObjects!(key) ?? new Map()) : undefined) ??
        (entry.deletedDuringRun ? "deleted" : undefined);
      table.markDone(key, version);
      if (resource?.spec.case === "deployment" && resource.spec.value.workload?.secretEnv.length) table.dropSecretEnvValues(key, version);
      if (drifted) table.requestReapply(key, drifted);
      if (reapply && before && applied && changedAny(before, applied)) metrics.driftCorrections.inc({ type, reason: reapply });
      metrics.reconciles.inc({ type, op, result: "success" });
      // Debug: a full sync applies thousands; failures are the lines worth keeping (warn/error).
      log.debug(op === "apply" ? "applied" : "deleted", { resource: key, version });
      queue.forget(key);
    } catch (error) {
      timer();
      const failure = error instanceof TargetError ? error : new TargetError(error instanceof Error ? error.message : String(error));
      table.markError(key, version, failure.message);
      metrics.reconciles.inc({ type, op, result: "error" });
      metrics.retries.inc({ name: QUEUE_NAME });
      if (failure.refusal === "ownership") {
        // Nothing we do changes the other owner's object: look again at a steady pace (sooner on
        // a new desired version), not with the error backoff's first quick retries.
        queue.addAfter(key, jittered(ownershipRecheckMs, 0.1));
        if (entry.attempts === 1)
          log.warn(`${op} refused (checked again every ${ownershipRecheckMs / 1000} s): ${failure.message}`, { resource: key, version });
        return;
      }
      if (failure.permanent) {
        // The same request fails the same way: try again only after the longest backoff, or
        // sooner when a new desired version arrives (add() pulls the key forward).
        const delay = jittered(queue.backoff.maxMs, 0.1);
        queue.addAfter(key, delay);
        log.error(`${op} rejected (retry in ${Math.round(delay / 1000)} s or on a new version): ${failure.message}`, { resource: key, version });
        return;
      }
      // 409 conflicts, 429 (Retry-After is the floor), 5xx and network errors: back off and retry.
      const delay = queue.addRateLimited(key, failure.retryAfterMs);
      if (queue.failures(key) <= 3 || queue.failures(key) % 10 === 0) {
        log.warn(`${op} failed (attempt ${queue.failures(key)}, retry in ${Math.round(delay)} ms): ${failure.message}`, { resource: key, version });
      }
    }
  };
}

/**
 * How an object the apply left as it was (`before` had the version it returned) changed while
 * the apply ran: deleted or modified (another writer moved its version), if any did.
 */
function changedMeanwhile(before: LiveObjects, applied: AppliedVersions, now: LiveObjects): ReapplyReason | undefined {
  for (const [object, version] of applied) {
    if (before.get(object)?.resourceVersion !== version || now.get(object)?.resourceVersion === version) continue;
    return now.has(object) ? "modified" : "deleted";
  }
  return undefined;
}

/** Whether an apply created an object or moved its resourceVersion (a no-op apply moves none). */
function changedAny(before: LiveObjects, after: AppliedVersions): boolean {
  for (const [object, version] of after) if (before.get(object)?.resourceVersion !== version) return true;
  return false;
}
