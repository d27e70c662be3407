// What the agent reports to ctrl about one resource (a ResourceObservation), derived from the
// desired table (apply outcome) and, with the kubernetes target, the observer's live Deployment
// and its HorizontalPodAutoscaler.
import { create } from "@bufbuild/protobuf";
import { ResourceObservationSchema, type ResourceObservation } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { RolloutConditionSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { AutoscalerStatus, DeploymentStatus } from "./cached-object.ts";
import { desiredResource, type DesiredEntry, type DesiredTable } from "./desired-table.ts";
import { parseResourceKey } from "./keys.ts";
import { DESIRED_VERSION_ANNOTATION, type KubeObject } from "./manifests.ts";
import type { Observer } from "./observer.ts";
import { DEPLOYMENTS, HORIZONTAL_POD_AUTOSCALERS } from "./watched-kinds.ts";

/** Rollout conditions reported to ctrl (its projection reads Progressing). */
const REPORTED_CONDITIONS = new Set(["Progressing", "Available"]);

/**
 * Observations of resource keys. `observe` returns undefined while the key cannot be observed
 * yet (the observer's first list is not done): it must not be reported as missing.
 */
export interface ObservationSource {
  observe(key: string): ResourceObservation | undefined;
  /** Every key there is something to say about: desired, being deleted, or present in the cluster. */
  keys(): Iterable<string>;
  /** Whether the key is still desired or present (false: its last observation can be forgotten once sent). */
  isKnown(key: string): boolean;
}

/** Observations from the desired table only (the render target: nothing to watch). */
export function tableObservations(table: DesiredTable): ObservationSource {
  return {
    observe: (key) => fromTable(key, table.get(key)),
    keys: () => [...table.entries()].map((entry) => entry.key),
    isKnown: (key) => table.get(key) !== undefined,
  };
}

/**
 * Observations from the cluster: Deployments (of deployments and sentinels) as the observer sees
 * them; network policies from the desired table (applied version once applied, apply error).
 */
export function clusterObservations(table: DesiredTable, observer: Observer): ObservationSource {
  return {
    observe(key) {
      const entry = table.get(key);
      if (parseResourceKey(key).type === ResourceType.CILIUM_NETWORK_POLICY) return fromTable(key, entry);
      if (!observer.isSynced(DEPLOYMENTS)) return undefined;
      const live = liveDeployment(observer, key, entry);
      // A deployment's autoscaler (a sentinel has none), named as its Deployment.
      const autoscaler =
        live && parseResourceKey(key).type === ResourceType.DEPLOYMENT
          ? observer.get(HORIZONTAL_POD_AUTOSCALERS, live.metadata.namespace ?? "", live.metadata.name)
          : undefined;
      return fromDeployment(key, entry, live, autoscaler);
    },
    keys: () => new Set([...[...table.entries()].map((entry) => entry.key), ...observer.keys(DEPLOYMENTS)]),
    isKnown: (key) => table.get(key) !== undefined || observer.objectsOf(DEPLOYMENTS, key).length > 0,
  };
}

/** The Deployment of a key: where the table says it is, else wherever the observer saw one. */
function liveDeployment(observer: Observer, key: string, entry: DesiredEntry | undefined): KubeObject | undefined {
  if (entry?.desired.kind === "upsert") {
    const { namespace, id } = desiredResource(entry.desired);
    return observer.get(DEPLOYMENTS, namespace, id);
  }
  if (entry?.desired.kind === "delete") return observer.get(DEPLOYMENTS, entry.desired.tombstone.namespace, entry.desired.tombstone.name);
  return observer.objectsOf(DEPLOYMENTS, key)[0];
}

function fromTable(key: string, entry: DesiredEntry | undefined): ResourceObservation {
  return create(ResourceObservationSchema, {
    ...identity(key),
    appliedVersion: BigInt(entry?.appliedVersion ?? 0),
    missing: entry?.appliedVersion === undefined,
    lastApplyError: entry?.error ?? "",
  });
}

/**
 * The Deployment's status as the controller wrote it, with the generation it describes (ctrl
 * judges the rollout as kstatus does).
 */
function fromDeployment(key: string, entry: DesiredEntry | undefined, live: KubeObject | undefined, autoscaler: KubeObject | undefined): ResourceObservation {
  const lastApplyError = entry?.error ?? "";
  if (!live) return create(ResourceObservationSchema, { ...identity(key), missing: true, lastApplyError });
  const spec = (live.spec ?? {}) as { replicas?: number; template?: { spec?: { containers?: { image?: string }[] } } };
  const status = (live.status ?? {}) as DeploymentStatus;
  // A status written for an older generation describes the previous spec: nothing of the current
  // spec is updated yet, and the old rollout's conditions no longer apply. (ctrl also compares the
  // generations; this keeps the counts right for a ctrl that predates them.)
  const scaled = (autoscaler?.status ?? {}) as AutoscalerStatus;
  const current = status.observedGeneration !== undefined && status.observedGeneration >= Number(live.metadata.generation ?? 1);
  return create(ResourceObservationSchema, {
    ...identity(key),
    appliedVersion: BigInt(Number(live.metadata.annotations?.[DESIRED_VERSION_ANNOTATION] ?? 0) || 0),
    observedImage: spec.template?.spec?.containers?.[0]?.image ?? "",
    desiredReplicas: spec.replicas ?? 1,
    generation: BigInt(Number(live.metadata.generation ?? 1) || 1),
    observedGeneration: BigInt(status.observedGeneration ?? 0),
    replicas: status.replicas ?? 0,
    updatedReplicas: current ? (status.updatedReplicas ?? 0) : 0,
    readyReplicas: status.readyReplicas ?? 0,
    availableReplicas: status.availableReplicas ?? 0,
    conditions: current
      ? (status.conditions ?? [])
          .filter((c) => REPORTED_CONDITIONS.has(c.type ?? ""))
          .map((c) => create(RolloutConditionSchema, { type: c.type, status: c.status ?? "", reason: c.reason ?? "", message: c.message ?? "" }))
      : [],
    lastApplyError,
    autoscalerCurrentReplicas: scaled.currentReplicas ?? 0,
    autoscalerDesiredReplicas: scaled.desiredReplicas ?? 0,
  });
}

function identity(key: string): { type: ResourceType; id: string } {
  const { type, id } = parseResourceKey(key);
  return { type: type ?? ResourceType.UNSPECIFIED, id };
}
