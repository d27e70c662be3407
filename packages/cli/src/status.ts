// Following a rollout: is a deployment RUNNING at its current revision everywhere it is
// placed (or, with a strategy, has its staged rollout SUCCEEDED), FAILED somewhere, or still
// on its way? Reads the operators' status stream, resuming from its cursor when the
// connection drops.
import { Code, ConnectError } from "@connectrpc/connect";
import { Phase, ResourceType, RolloutState, type RegionStatus, type Rollout } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { ObjectStatus } from "@flotilla/proto/ctrl/v1/status_pb.js";
import type { Clients } from "./client.ts";
import { TimeoutError } from "./errors.ts";

/** running: done (summary "RUNNING", or the staged rollout's SUCCEEDED line). */
export type Verdict = { state: "running"; summary: string } | { state: "failed"; message: string } | { state: "waiting"; summary: string };

/** Rollout states that end a rollout short of its last wave (FAILED: frozen by onFailure PAUSE). */
const FAILED_ROLLOUT_STATES: readonly RolloutState[] = [RolloutState.ROLLED_BACK, RolloutState.ABORTED, RolloutState.FAILED];

export function rolloutStateName(state: RolloutState): string {
  return RolloutState[state] ?? "UNSPECIFIED";
}

/**
 * The staged rollout of the deployment's current change, if it has one: the newest rollout,
 * when it goes to the current revision, or when it failed and the one revision after it is
 * its own way back (a failed rollout restores the previous spec as a new revision).
 */
export function currentRollout(status: ObjectStatus): Rollout | undefined {
  const r = status.rollout;
  if (!r) return undefined;
  if (r.toRevision === status.revision) return r;
  if ((r.state === RolloutState.ROLLED_BACK || r.state === RolloutState.ABORTED) && status.revision === r.toRevision + 1n) return r;
  return undefined;
}

/** Where one object's rollout stands. */
export function verdict(status: ObjectStatus): Verdict {
  if (status.deleted) return { state: "failed", message: `deployment/${status.id} was deleted` };
  const rollout = currentRollout(status);
  if (rollout) return rolloutVerdict(rollout);
  for (const r of status.regions) {
    if (r.phase === Phase.FAILED && !r.stale && r.appliedVersion >= r.desiredVersion)
      return { state: "failed", message: `deployment/${status.id} FAILED in region ${r.region}: ${r.reason}` };
  }
  if (status.regions.every(done)) return { state: "running", summary: "RUNNING" };
  return { state: "waiting", summary: status.regions.map(regionSummary).join(", ") };
}

/** A staged rollout's verdict: SUCCEEDED, failed (its reason names the region), or on its way. */
function rolloutVerdict(r: Rollout): Verdict {
  const line = `rollout ${r.id} ${rolloutStateName(r.state)}${r.reason ? `: ${r.reason}` : ""}`;
  if (r.state === RolloutState.SUCCEEDED) return { state: "running", summary: line };
  if (FAILED_ROLLOUT_STATES.includes(r.state)) return { state: "failed", message: `deployment/${r.deployment}: ${line}` };
  const hint = r.state === RolloutState.WAITING_APPROVAL ? ` (flotilla rollout approve ${r.deployment})` : "";
  return { state: "waiting", summary: `${line}${hint}` };
}

function done(r: RegionStatus): boolean {
  return (r.phase === Phase.RUNNING || r.phase === Phase.STOPPED) && !r.stale && r.appliedVersion >= r.desiredVersion;
}

export function phaseName(phase: Phase): string {
  return Phase[phase] ?? "UNSPECIFIED";
}

export function regionSummary(r: RegionStatus): string {
  const stale = r.stale ? " (agent not reporting)" : "";
  return `${r.region}: ${phaseName(r.phase)} ${r.readyReplicas}/${r.desiredReplicas}${stale}`;
}

export interface FollowOptions {
  timeoutMs: number;
  /** Called when an object's summary changes (progress lines). */
  progress?(id: string, summary: string): void;
}

/**
 * Waits until every deployment in `ids` is done: RUNNING at its current revision in each of
 * its regions, or its current change's staged rollout SUCCEEDED. Resolves when they all are;
 * throws FailedRollout as soon as one failed, and TimeoutError when `timeoutMs` passes first.
 */
export async function followRollouts(clients: Clients, ids: string[], options: FollowOptions): Promise<void> {
  const pending = new Set(ids);
  const lastSummary = new Map<string, string>();
  await watchDeployments(clients, ids, options.timeoutMs, (status) => {
    if (!pending.has(status.id)) return false;
    const v = verdict(status);
    if (v.state === "failed") throw new FailedRollout(v.message);
    if (v.state === "running") {
      pending.delete(status.id);
      options.progress?.(status.id, v.summary);
      return pending.size === 0;
    }
    if (lastSummary.get(status.id) !== v.summary) {
      lastSummary.set(status.id, v.summary);
      options.progress?.(status.id, v.summary);
    }
    return false;
  }).catch((error) => {
    if (error instanceof TimeoutError)
      throw new TimeoutError(
        `timed out after ${options.timeoutMs / 1000}s waiting for ${[...pending].map((id) => `deployment/${id}`).join(", ")} to be RUNNING`,
      );
    throw error;
  });
}

/**
 * Calls `onStatus` with each status of the deployments `ids` from the status stream (first
 * their current status, then every change), resuming after a dropped connection, until it
 * returns true. Throws what it throws, and TimeoutError when `timeoutMs` passes first.
 */
export async function watchDeployments(clients: Clients, ids: string[], timeoutMs: number, onStatus: (status: ObjectStatus) => boolean): Promise<void> {
  const deadline = AbortSignal.timeout(timeoutMs);
  let cursor: bigint | undefined;
  for (;;) {
    // Ends the stream once this attempt is over (done, failed, or reconnecting).
    const attempt = new AbortController();
    try {
      const request =
        ids.length === 1
          ? { resourceType: ResourceType.DEPLOYMENT, id: ids[0]!, afterCursor: cursor }
          : { resourceType: ResourceType.DEPLOYMENT, afterCursor: cursor };
      for await (const response of clients.status.watchStatus(request, { signal: AbortSignal.any([deadline, attempt.signal]) })) {
        cursor = response.cursor;
        if (response.event.case !== "object" || !ids.includes(response.event.value.id)) continue;
        if (onStatus(response.event.value)) return;
      }
    } catch (error) {
      if (deadline.aborted) throw new TimeoutError(`timed out after ${timeoutMs / 1000}s`);
      const code = error instanceof ConnectError ? error.code : undefined;
      if (code === Code.OutOfRange)
        cursor = undefined; // start again from a snapshot
      else if (code !== Code.Unavailable && code !== Code.Unknown && code !== Code.Internal) throw error;
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      attempt.abort();
    }
  }
}

/** A deployment failed: `message` names it, the region and the reason. */
export class FailedRollout extends Error {}
