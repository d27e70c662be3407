// Builds the per-region status of Get/List responses from stored observations.
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { AgentStatusSchema, type Region } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { RegionStatusSchema, type Phase, type RegionStatus } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { StatusInputs, Store } from "@flotilla/store";
import { project, wantedReplicas } from "./projection.ts";

export interface StatusOptions {
  /** An agent silent for longer than this makes its region's statuses stale. */
  staleAfterMs: number;
}

export const DEFAULT_STATUS_OPTIONS: StatusOptions = { staleAfterMs: 30_000 };

/** Whether a region's agent counts as reporting at `now`. */
export function agentConnected(lastSeen: number | undefined, now: number, options: StatusOptions): boolean {
  return lastSeen !== undefined && now - lastSeen <= options.staleAfterMs;
}

export function regionStatus(input: StatusInputs, now: number, options: StatusOptions): RegionStatus {
  const stored = input.stored;
  const previous = stored ? { phase: stored.phase as Phase, reason: stored.reason } : undefined;
  // Re-projected on read: the desired state may have moved since the last observation.
  const { phase, reason } = project({ desired: input.desired, observation: stored?.observation, previous });
  return create(RegionStatusSchema, {
    region: input.region,
    phase,
    reason,
    lastObservedAt: stored ? timestampFromMs(stored.observedAt) : undefined,
    stale: !agentConnected(input.agentLastSeen, now, options),
    desiredVersion: input.desired?.version ?? 0n,
    appliedVersion: stored?.observation.appliedVersion ?? 0n,
    desiredReplicas: input.desired ? wantedReplicas(input.desired, stored?.observation) : 0,
    readyReplicas: stored?.observation.readyReplicas ?? 0,
    conditions: stored?.observation.conditions ?? [],
    autoscalerCurrentReplicas: stored?.observation.autoscalerCurrentReplicas ?? 0,
    autoscalerDesiredReplicas: stored?.observation.autoscalerDesiredReplicas ?? 0,
  });
}

/** Per-region statuses of resources of one type, keyed by resource id, in placement order. */
export async function statusesOf(store: Store, type: number, ids: string[], options: StatusOptions): Promise<Map<string, RegionStatus[]>> {
  const now = Date.now();
  const result = new Map<string, RegionStatus[]>(ids.map((id) => [id, []]));
  for (const input of await store.observations.inputs(type, ids)) {
    result.get(input.id)?.push(regionStatus(input, now, options));
  }
  for (const list of result.values()) list.sort((a, b) => a.region.localeCompare(b.region));
  return result;
}

/** Fills each region's agent liveness: last report, applied version, lag. */
export async function withAgentStatus(store: Store, regions: Region[], options: StatusOptions): Promise<Region[]> {
  const ids = await store.regions.idsByName(regions.map((r) => r.name));
  const agents = await store.observations.agents([...ids.values()]);
  const now = Date.now();
  for (const r of regions) {
    const id = ids.get(r.name);
    const agent = id === undefined ? undefined : agents.get(id);
    if (!agent) continue;
    r.agent = create(AgentStatusSchema, {
      connected: agentConnected(agent.lastSeen, now, options),
      lastSeen: timestampFromMs(agent.lastSeen),
      appliedVersion: BigInt(agent.appliedVersion),
      lag: r.headVersion > BigInt(agent.appliedVersion) ? r.headVersion - BigInt(agent.appliedVersion) : 0n,
      leaderIdentity: agent.leader ?? "",
      leaderSince: agent.leaderSince === undefined ? undefined : timestampFromMs(agent.leaderSince),
    });
  }
  return regions;
}
