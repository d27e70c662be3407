// Following a rollout: is a deployment RUNNING at its current revision everywhere it is
// placed, FAILED somewhere, or still on its way? Reads the operators' status stream,
// resuming from its cursor when the connection drops.
import { Code, ConnectError } from "@connectrpc/connect";
import { Phase, ResourceType, type RegionStatus } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { ObjectStatus } from "@flotilla/proto/ctrl/v1/status_pb.js";
import type { Clients } from "./client.ts";
import { TimeoutError } from "./errors.ts";

export type Verdict = { state: "running" } | { state: "failed"; region: string; reason: string } | { state: "waiting"; summary: string };

/** Where one object's rollout stands. */
export function verdict(status: ObjectStatus): Verdict {
  if (status.deleted) return { state: "failed", region: "-", reason: "deleted" };
  for (const r of status.regions) {
    if (r.phase === Phase.FAILED && !r.stale && r.appliedVersion >= r.desiredVersion) return { state: "failed", region: r.region, reason: r.reason };
  }
  if (status.regions.every(done)) return { state: "running" };
  return { state: "waiting", summary: status.regions.map(regionSummary).join(", ") };
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
 * Waits until every deployment in `ids` is RUNNING at its current revision in each of its
 * regions. Resolves when they all are; throws FailedRollout as soon as one FAILED, and
 * TimeoutError when `timeoutMs` passes first.
 */
export async function followRollouts(clients: Clients, ids: string[], options: FollowOptions): Promise<void> {
  const pending = new Set(ids);
  const lastSummary = new Map<string, string>();
  const deadline = AbortSignal.timeout(options.timeoutMs);
  let cursor: bigint | undefined;
  while (pending.size > 0) {
    // Ends the stream once this attempt is over (done, failed, or reconnecting).
    const attempt = new AbortController();
    try {
      const request =
        ids.length === 1
          ? { resourceType: ResourceType.DEPLOYMENT, id: ids[0]!, afterCursor: cursor }
          : { resourceType: ResourceType.DEPLOYMENT, afterCursor: cursor };
      for await (const response of clients.status.watchStatus(request, { signal: AbortSignal.any([deadline, attempt.signal]) })) {
        cursor = response.cursor;
        if (response.event.case !== "object" || !pending.has(response.event.value.id)) continue;
        const id = response.event.value.id;
        const v = verdict(response.event.value);
        if (v.state === "failed") throw new FailedRollout(id, v.region, v.reason);
        if (v.state === "running") {
          pending.delete(id);
          options.progress?.(id, "RUNNING");
          if (pending.size === 0) return;
        } else if (lastSummary.get(id) !== v.summary) {
          lastSummary.set(id, v.summary);
          options.progress?.(id, v.summary);
        }
      }
    } catch (error) {
      if (deadline.aborted)
        throw new TimeoutError(
          `timed out after ${options.timeoutMs / 1000}s waiting for ${[...pending].map((id) => `deployment/${id}`).join(", ")} to be RUNNING`,
        );
      if (error instanceof FailedRollout) throw error;
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

export class FailedRollout extends Error {
  readonly id: string;
  readonly region: string;
  readonly reason: string;
  constructor(id: string, region: string, reason: string) {
    super(`deployment/${id} FAILED in region ${region}: ${reason}`);
    this.id = id;
    this.region = region;
    this.reason = reason;
  }
}
