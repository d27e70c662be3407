// ClusterService.ReportObservedState: stores what the agent observes and re-projects status.
// Writes only what changed, so a steady state costs no status writes (counted as noop).
// Reports of an agent elected on a Lease carry its epoch: a deposed leader's are refused
// (FAILED_PRECONDITION, reason FENCED), checked and written in one transaction.
import type { HandlerContext } from "@connectrpc/connect";
import type { ReportObservedStateRequest, ReportObservedStateResponse } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { observationBody, type StatusWrite, type Store } from "@flotilla/store";
import { create } from "@bufbuild/protobuf";
import { ReportObservedStateResponseSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { Code } from "@connectrpc/connect";
import { FENCED } from "@flotilla/runtime";
import { authorizeRegion, principalKey, resolveAuthorizedRegion } from "../../auth.ts";
import { invalidArgument, reasonError } from "../../errors.ts";
import type { CtrlMetrics } from "../../metrics.ts";
import { project } from "../../status/projection.ts";
import type { StatusOptions } from "../../status/region-status.ts";
import * as validate from "../../validate.ts";

export const MAX_OBSERVATIONS_PER_REPORT = 5000;
/**
 * A heartbeat is persisted at most this often per region (unless the applied version
 * moved), and well within the staleness window so other replicas see the agent as live.
 */
const HEARTBEAT_PERSIST_MS = 5000;

export function reportObservedState(store: Store, metrics: CtrlMetrics, statusOptions: StatusOptions) {
  const persistEveryMs = Math.min(HEARTBEAT_PERSIST_MS, statusOptions.staleAfterMs / 3);
  const persisted = new Map<number, { at: number; appliedVersion: number }>();
  return async (req: ReportObservedStateRequest, ctx: HandlerContext): Promise<ReportObservedStateResponse> => {
    validate.dnsLabel("region", req.region);
    authorizeRegion(ctx, req.region);
    if (req.observations.length > MAX_OBSERVATIONS_PER_REPORT) {
      throw invalidArgument("observations", `at most ${MAX_OBSERVATIONS_PER_REPORT} per report`);
    }
    req.observations.forEach((o, i) => {
      if (!(o.type in ResourceType) || o.type === ResourceType.UNSPECIFIED) throw invalidArgument(`observations[${i}].type`, `unknown type ${o.type}`);
      validate.dnsLabel(`observations[${i}].id`, o.id);
    });
    if (req.appliedVersion < 0n) throw invalidArgument("applied_version", "must not be negative");
    const leader = req.leader && { epoch: Number(req.leader.epoch), holderIdentity: req.leader.holderIdentity };
    if (leader && !(leader.epoch >= 0 && Number.isSafeInteger(leader.epoch))) throw invalidArgument("leader.epoch", "must be a non-negative integer");
    if (leader && !(leader.holderIdentity.length > 0 && leader.holderIdentity.length <= 253))
      throw invalidArgument("leader.holder_identity", "must be 1 to 253 characters");
    const resolving = resolveAuthorizedRegion(ctx, store.regions, req.region);
    // An agent's token names its region's id: the stored statuses are read while the region is
    // resolved (a token of a since deleted region is refused by the resolve, the read unused).
    const principal = ctx.values.get(principalKey);
    const [region, current] = await Promise.all([
      resolving,
      principal.kind === "agent"
        ? store.observations.load(principal.regionId, req.observations)
        : resolving.then((r) => store.observations.load(r.id, req.observations)),
    ]);
    const now = Date.now();

    const writes: StatusWrite[] = [];
    for (const observation of req.observations) {
      const { stored, desired } = current.get(`${observation.type}/${observation.id}`)!;
      const previous = stored ? { phase: stored.phase, reason: stored.reason } : undefined;
      const next = project({ desired, observation, previous });
      // The stored body leaves out the observation's time: a re-sent identical observation is the same bytes.
      const body = observationBody(observation);
      const sameObservation = stored !== undefined && Buffer.compare(stored.body, body) === 0;
      if (sameObservation && previous?.phase === next.phase && previous.reason === next.reason) {
        metrics.statusUpdates.inc({ result: "noop" });
        continue;
      }
      writes.push({
        type: observation.type,
        id: observation.id,
        previousPhase: previous?.phase,
        body,
        observedAt: now,
        phase: next.phase,
        reason: next.reason,
      });
    }
    const appliedVersion = Number(req.appliedVersion);
    const last = persisted.get(region.id);
    const heartbeatDue = !last || last.appliedVersion !== appliedVersion || now - last.at >= persistEveryMs;
    const { fencedBy } = await store.observations.saveReport(region.id, { leader, writes, heartbeat: heartbeatDue ? { at: now, appliedVersion } : undefined });
    if (fencedBy) {
      metrics.reportsFenced.inc({ region: region.name });
      const message = `region ${region.name}: report of ${leader!.holderIdentity} (epoch ${leader!.epoch}) refused, the region's leader is ${fencedBy.holderIdentity} (epoch ${fencedBy.epoch})`;
      // Logged with the call's outcome (a warn line naming the region), as every refused call is.
      throw reasonError(Code.FailedPrecondition, FENCED, `${FENCED}: ${message}`, { epoch: String(fencedBy.epoch) });
    }
    if (writes.length > 0) metrics.statusUpdates.inc({ result: "changed" }, writes.length);
    if (heartbeatDue) persisted.set(region.id, { at: now, appliedVersion });
    metrics.agentLastReport.set({ region: region.name }, now / 1000);
    metrics.agentAppliedVersion.set({ region: region.name }, appliedVersion);
    metrics.agentLag.set({ region: region.name }, Math.max(0, region.headVersion - appliedVersion));
    return create(ReportObservedStateResponseSchema);
  };
}
