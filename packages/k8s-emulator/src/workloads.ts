// The objects the rollout model (rollout/) makes visible: ReplicaSets as the deployment
// controller writes them, pods as the ReplicaSet controller creates them and the kubelet
// reports them, and Events as the controllers and the kubelet record them. Only what kubectl
// shows and rollout history/undo read is filled in; a pod is small (no managedFields), as
// B7 keeps hundreds of thousands of them.
import { createHash } from "node:crypto";
import type { Registry } from "./registry.ts";
import { KINDS } from "./kinds/index.ts";
import { ALPHANUMS, isObject, nowRfc3339, type JsonObject, type KubeObject } from "./util.ts";

export const REPLICA_SETS = KINDS.find((rt) => rt.kind === "ReplicaSet")!;
export const PODS = KINDS.find((rt) => rt.kind === "Pod")!;
export const EVENTS = KINDS.find((rt) => rt.kind === "Event")!;

/** apps/v1 DefaultDeploymentUniqueLabelKey. */
export const POD_TEMPLATE_HASH = "pod-template-hash";
export const REVISION = "deployment.kubernetes.io/revision";
const DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas";
const MAX_REPLICAS = "deployment.kubernetes.io/max-replicas";
/** Deployment annotations not copied to its ReplicaSets (deployment/util annotationsToSkip). */
const NOT_COPIED = new Set([
  "kubectl.kubernetes.io/last-applied-configuration",
  REVISION,
  "deployment.kubernetes.io/revision-history",
  DESIRED_REPLICAS,
  MAX_REPLICAS,
  "deprecated.deployment.rollback.to",
]);
/** The one node pods run on. */
export const NODE_NAME = "emulator-node";
const NODE_IP = "10.0.0.2";

/** Drops what Go's semantic equality ignores (nil and empty maps and slices, null), keys sorted. */
function normalized(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(normalized);
  if (!isObject(value)) return value;
  const out: JsonObject = {};
  for (const k of Object.keys(value).sort()) {
    const v = normalized(value[k]);
    if (v === null || v === undefined || (Array.isArray(v) && v.length === 0) || (isObject(v) && Object.keys(v).length === 0)) continue;
    out[k] = v;
  }
  return out;
}

/**
 * The pod-template-hash of a template (controller.ComputeHash: a 32-bit FNV-1a hash, its
 * decimal digits encoded by SafeEncodeString). Upstream hashes the Go struct; here the
 * normalized JSON, so templates equal as EqualIgnoreHash sees them hash the same, whatever
 * their key order or a Go client's `creationTimestamp: null`.
 */
export function templateHash(template: unknown): string {
  const copy = isObject(template) ? { ...template } : {};
  if (isObject(copy.metadata) && isObject(copy.metadata.labels)) {
    const { [POD_TEMPLATE_HASH]: _h, ...labels } = copy.metadata.labels;
    copy.metadata = { ...copy.metadata, labels };
  }
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(JSON.stringify(normalized(copy)))) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return [...String(hash)].map((c) => ALPHANUMS[c.charCodeAt(0) % ALPHANUMS.length]).join("");
}

/** An ownerReference naming `owner` as the controller (metav1.NewControllerRef). */
function controllerRef(owner: KubeObject): JsonObject {
  return { apiVersion: owner.apiVersion, kind: owner.kind, name: owner.metadata.name, uid: owner.metadata.uid, controller: true, blockOwnerDeletion: true };
}

export const spec = (o: KubeObject): JsonObject => (isObject(o.spec) ? o.spec : {});
const objectAt = (o: JsonObject, k: string): JsonObject => (isObject(o[k]) ? o[k] : {});

function withHashLabel(labels: unknown, hash: string): Record<string, string> {
  return { ...(isObject(labels) ? (labels as Record<string, string>) : {}), [POD_TEMPLATE_HASH]: hash };
}

/** The Deployment's annotations its new ReplicaSet carries (deployment/util copyDeploymentAnnotationsToReplicaSet). */
export function copiedAnnotations(d: KubeObject): Record<string, string> {
  const annotations: Record<string, string> = {};
  for (const [k, v] of Object.entries(d.metadata.annotations ?? {})) if (!NOT_COPIED.has(k)) annotations[k] = v;
  return annotations;
}

export interface ReplicaSetCounts {
  replicas: number;
  pods: number;
  ready: number;
}

/**
 * A Deployment's ReplicaSet for the template with `hash` (deployment/sync.go
 * getNewReplicaSet): the template and selector with the pod-template-hash label, the
 * Deployment's annotations with the revision, desired and max replicas, and the Deployment as
 * its controller.
 */
export function replicaSetFor(d: KubeObject, name: string, hash: string, revision: number, maxReplicas: number, counts: ReplicaSetCounts): KubeObject {
  const template = objectAt(spec(d), "template");
  const templateMeta = objectAt(template, "metadata");
  const selector = objectAt(spec(d), "selector");
  const annotations = copiedAnnotations(d);
  Object.assign(annotations, { [DESIRED_REPLICAS]: String(spec(d).replicas ?? 1), [MAX_REPLICAS]: String(maxReplicas), [REVISION]: String(revision) });
  return {
    apiVersion: "apps/v1",
    kind: "ReplicaSet",
    metadata: {
      name,
      namespace: d.metadata.namespace,
      labels: withHashLabel(templateMeta.labels, hash),
      annotations,
      ownerReferences: [controllerRef(d)],
    },
    spec: {
      replicas: counts.replicas,
      ...(spec(d).minReadySeconds ? { minReadySeconds: spec(d).minReadySeconds } : {}),
      selector: { ...selector, matchLabels: withHashLabel(selector.matchLabels, hash) },
      template: { ...template, metadata: { ...templateMeta, labels: withHashLabel(templateMeta.labels, hash) } },
    },
    status: replicaSetStatus(counts),
  };
}

/** ReplicaSetStatus: `replicas` is always written, the other counts are omitempty. */
export function replicaSetStatus(counts: ReplicaSetCounts): JsonObject {
  return {
    replicas: counts.pods,
    ...(counts.pods ? { fullyLabeledReplicas: counts.pods } : {}),
    ...(counts.ready ? { readyReplicas: counts.ready, availableReplicas: counts.ready } : {}),
    observedGeneration: 1,
  };
}

export type PodState = "starting" | "ready" | "imagePullBackOff";

/** A pod of `rs` as the ReplicaSet controller creates it (controller_utils.go GetPodFromTemplate), scheduled on the one node. */
export function podFor(rs: KubeObject, name: string, podIp: string, state: PodState): KubeObject {
  const template = objectAt(spec(rs), "template");
  const templateMeta = objectAt(template, "metadata");
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      generateName: `${rs.metadata.name}-`,
      namespace: rs.metadata.namespace,
      labels: { ...((templateMeta.labels ?? {}) as Record<string, string>) },
      ...(isObject(templateMeta.annotations) ? { annotations: { ...templateMeta.annotations } as Record<string, string> } : {}),
      ownerReferences: [controllerRef(rs)],
    },
    spec: { ...objectAt(template, "spec"), nodeName: NODE_NAME },
    status: podStatus(rs, podIp, state, nowRfc3339()),
  };
}

/** What the kubelet reports of a pod of `rs`: Pending while the containers start or the image cannot be pulled, Running and Ready after. */
export function podStatus(rs: KubeObject, podIp: string, state: PodState, since: string): JsonObject {
  const containers = (objectAt(objectAt(spec(rs), "template"), "spec").containers ?? []) as JsonObject[];
  const ready = state === "ready";
  const condition = (type: string, status: boolean) => ({ type, status: status ? "True" : "False", lastProbeTime: null, lastTransitionTime: since });
  const waiting =
    state === "imagePullBackOff"
      ? (c: JsonObject) => ({ waiting: { reason: "ImagePullBackOff", message: `Back-off pulling image ${JSON.stringify(c.image)}` } })
      : () => ({ waiting: { reason: "ContainerCreating" } });
  return {
    phase: ready ? "Running" : "Pending",
    conditions: [
      condition("PodReadyToStartContainers", state !== "starting"),
      condition("Initialized", true),
      condition("Ready", ready),
      condition("ContainersReady", ready),
      condition("PodScheduled", true),
    ],
    hostIP: NODE_IP,
    podIP: podIp,
    podIPs: [{ ip: podIp }],
    startTime: since,
    containerStatuses: containers.map((c) => ({
      name: c.name,
      image: c.image,
      imageID: ready ? `${String(c.image)}@sha256:${createHash("sha256").update(String(c.image)).digest("hex")}` : "",
      ready,
      started: ready,
      restartCount: 0,
      state: ready ? { running: { startedAt: since } } : waiting(c),
    })),
  };
}

/** client-go's event cache holds this many keys (events_cache.go maxLruCacheEntries). */
const OBSERVED_KEYS = 4096;

interface Observation {
  name: string;
  count: number;
  firstTimestamp: string;
}

/**
 * Events as the controllers' and the kubelet's event recorders write them (core/v1). A repeat
 * of an event (same source, involved object, type, reason and message: events_cache.go
 * getEventKey) updates the Event it made, as the recorder's eventLogger does: `count` + 1 and a
 * new `lastTimestamp`, `firstTimestamp` kept; the recorder remembers the last 4096 keys. At most
 * `limit` Events are kept, the least recently written removed first: the API server removes
 * them after --event-ttl (1 h from their last write), which a test's or a benchmark's volume of
 * rollouts would outgrow.
 */
export class EventRecorder {
  private readonly registry: Registry;
  private readonly limit: number;
  /** `namespace/name` of the Events kept, least recently written first. */
  private readonly kept = new Set<string>();
  /** The last occurrence of each event key, least recently seen first. */
  private readonly observed = new Map<string, Observation>();
  private sequence = 0;

  constructor(registry: Registry, limit: number) {
    this.registry = registry;
    this.limit = limit;
  }

  record(about: KubeObject, type: "Normal" | "Warning", reason: string, message: string, component: string): void {
    if (this.limit === 0) return;
    const namespace = about.metadata.namespace ?? "default";
    const now = nowRfc3339();
    const { kind, apiVersion } = about;
    const { uid, resourceVersion } = about.metadata;
    const source = component === "kubelet" ? { component, host: NODE_NAME } : { component };
    const key = JSON.stringify([source.component, source.host, kind, namespace, about.metadata.name, uid, apiVersion, type, reason, message]);
    const last = this.observed.get(key);
    this.observed.delete(key);
    // Upstream: the object's name and the time in hex nanoseconds; the sequence keeps two in one ms apart.
    const name = last?.name ?? `${about.metadata.name}.${(BigInt(Date.now()) * 1_000_000n + BigInt(this.sequence++ % 1_000_000)).toString(16)}`;
    const observation = { name, count: (last?.count ?? 0) + 1, firstTimestamp: last?.firstTimestamp ?? now };
    this.observed.set(key, observation);
    if (this.observed.size > OBSERVED_KEYS) this.observed.delete(this.observed.keys().next().value!);
    const existing = last && this.registry.store.get(EVENTS, namespace, name);
    // A repeat patches count and lastTimestamp; if its Event is gone, it is created anew with the count (event.go recordEvent).
    this.registry.put(
      existing
        ? { ...existing, count: observation.count, lastTimestamp: now }
        : {
            apiVersion: "v1",
            kind: "Event",
            metadata: { name, namespace },
            involvedObject: { kind, namespace, name: about.metadata.name, uid, apiVersion, resourceVersion },
            reason,
            message,
            source,
            firstTimestamp: observation.firstTimestamp,
            lastTimestamp: now,
            count: observation.count,
            type,
            eventTime: null,
            reportingComponent: component,
            reportingInstance: component === "kubelet" ? NODE_NAME : "",
          },
    );
    const id = `${namespace}/${name}`;
    this.kept.delete(id);
    this.kept.add(id);
    if (this.kept.size > this.limit) {
      const oldest = this.kept.values().next().value!;
      this.kept.delete(oldest);
      const [ns, n] = oldest.split("/");
      this.registry.store.remove(EVENTS, ns, n);
    }
  }

  clear(): void {
    this.kept.clear();
    this.observed.clear();
  }
}
