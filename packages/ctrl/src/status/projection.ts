// Status per (resource, region) as a pure function of the desired state, the latest
// observation and the previous status (ARCHITECTURE §4). Nothing here is sticky: FAILED is
// derived anew from every observation, so a fixed rollout reads RUNNING with no manual step.
import type { ResourceObservation } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { Phase, type DesiredResource, type Probe } from "@flotilla/proto/ctrl/v1/resources_pb.js";

export interface Projection {
  phase: Phase;
  reason: string;
}

export interface ProjectionInput {
  /** Undefined when the resource is not desired in the region (stopped, standby, removed). */
  desired: DesiredResource | undefined;
  /** The agent's latest observation of it, if any. */
  observation: ResourceObservation | undefined;
  /** The status projected from the previous observation. */
  previous: Projection | undefined;
}

export function project({ desired, observation: obs, previous }: ProjectionInput): Projection {
  if (!desired) {
    if (obs && !obs.missing && (obs.readyReplicas > 0 || obs.desiredReplicas > 0)) {
      return { phase: Phase.PROGRESSING, reason: `stopping: ${obs.readyReplicas} replicas still ready` };
    }
    return { phase: Phase.STOPPED, reason: "stopped" };
  }
  const version = Number(desired.version);
  if (!obs) return { phase: Phase.PENDING, reason: `waiting for the agent to apply version ${version}` };
  if (obs.lastApplyError) return { phase: Phase.FAILED, reason: `apply failed: ${obs.lastApplyError}` };
  if (Number(obs.appliedVersion) < version) {
    return { phase: Phase.PENDING, reason: `waiting for the agent to apply version ${version} (applied ${obs.appliedVersion})` };
  }
  if (obs.missing) return { phase: Phase.PENDING, reason: "applied, but the object is missing from the cluster" };
  const spec = desired.spec;
  if (spec.case !== "deployment" && spec.case !== "sentinel") return { phase: Phase.RUNNING, reason: "applied" };

  // One partial observation (status not populated yet) does not demote a serving workload.
  const partial = obs.observedImage === "" && obs.conditions.length === 0;
  if (partial && previous?.phase === Phase.RUNNING) return previous;

  const want = wantedReplicas(desired, obs);
  const image = spec.value.workload?.image ?? "";
  const projection = rollout(obs, want, image);
  // New pods that never turned ready under a readiness probe: the probe is what to look at.
  const readiness = spec.value.workload?.readinessProbe;
  if (projection.phase === Phase.FAILED && readiness) {
    return { phase: Phase.FAILED, reason: `${projection.reason} (new pods not ready under the ${describeProbe("readiness", readiness)})` };
  }
  return projection;
}

/**
 * The replicas a workload should have: the placement's, or with an autoscaler (which owns the
 * Deployment's spec.replicas) the replicas it set there as observed, at least its minReplicas.
 */
export function wantedReplicas(desired: DesiredResource, obs: ResourceObservation | undefined): number {
  const spec = desired.spec;
  if (spec.case !== "deployment" && spec.case !== "sentinel") return 0;
  const autoscaling = spec.case === "deployment" ? spec.value.autoscaling : undefined;
  if (!autoscaling) return spec.value.replicas;
  return Math.max(obs?.desiredReplicas ?? 0, autoscaling.minReplicas);
}

/** How a reason names a probe, e.g. "readiness probe HTTP GET :80/healthz". */
export function describeProbe(kind: string, probe: Probe): string {
  const handler = probe.handler;
  const what =
    handler.case === "httpGet"
      ? `HTTP GET :${handler.value.port}${handler.value.path || "/"}`
      : handler.case === "tcpSocket"
        ? `TCP :${handler.value.port}`
        : `exec ${(handler.value?.command ?? []).join(" ")}`;
  return `${kind} probe ${what}`;
}

/**
 * A Deployment's rollout as kstatus (cli-utils) and `kubectl rollout status` judge it: current
 * only when the controller observed the latest generation and every desired replica is updated
 * and available with no old replica left. A status of an older generation says nothing about
 * the current spec: neither its deadline nor its counts apply.
 */
function rollout(obs: ResourceObservation, want: number, image: string): Projection {
  // Agents that predate generation/replicas report 0 for them: read replicas as the updated ones
  // and ready replicas as available (what those agents' counts meant).
  const legacy = obs.generation === 0n;
  const observed = legacy || obs.observedGeneration >= obs.generation;
  const replicas = legacy ? obs.updatedReplicas : obs.replicas;
  const available = legacy ? obs.readyReplicas : obs.availableReplicas;
  const deadline = obs.conditions.find((c) => c.type === "Progressing" && c.status === "False" && c.reason === "ProgressDeadlineExceeded");
  if (deadline && observed) return { phase: Phase.FAILED, reason: `rollout deadline exceeded${deadline.message ? `: ${deadline.message}` : ""}` };
  if (want === 0) {
    return obs.readyReplicas === 0
      ? { phase: Phase.STOPPED, reason: "scaled to zero" }
      : { phase: Phase.PROGRESSING, reason: `scaling to zero: ${obs.readyReplicas} replicas still ready` };
  }
  const waiting: string[] = [];
  if (!observed) waiting.push(`generation ${obs.generation} not yet observed (at ${obs.observedGeneration})`);
  if (observed && obs.updatedReplicas < want) waiting.push(`${obs.updatedReplicas}/${want} updated`);
  const old = replicas - obs.updatedReplicas;
  if (observed && old > 0) waiting.push(`${old} old ${old === 1 ? "replica" : "replicas"} terminating`);
  const surplus = obs.updatedReplicas - want;
  if (observed && surplus > 0) waiting.push(`scaling down, ${surplus} surplus ${surplus === 1 ? "replica" : "replicas"} terminating`);
  if (observed && (available < want || obs.readyReplicas < want)) waiting.push(`${Math.min(available, obs.readyReplicas)}/${want} available`);
  if (obs.observedImage !== image) waiting.push(`rolling out ${image}`);
  if (waiting.length === 0) return { phase: Phase.RUNNING, reason: `${want}/${want} replicas ready` };
  return { phase: Phase.PROGRESSING, reason: waiting.join(", ") };
}
