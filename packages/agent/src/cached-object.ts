// What the observer keeps of a watched object (client-go's informer transform functions): only
// the fields that status reports, drift checks and applies read, so 100,000 Deployments cost a
// few hundred bytes each rather than the 3–5 KB of a full object with its managedFields. The
// full object of a watch event or list page is still what the event handler (drift
// correction) compares; only the cache holds the reduced one.
import { DESIRED_VERSION_ANNOTATION, ID_LABEL, MANAGED_BY_LABEL, REGION_LABEL, TYPE_LABEL, type KubeObject } from "./manifests.ts";

/** Labels the agent reads (resource key, managed-by check); the values of the first three repeat on every object. */
const SHARED_LABELS = [MANAGED_BY_LABEL, REGION_LABEL, TYPE_LABEL];
/** Status fields of a Deployment that observations read. */
const KEPT_STATUS = ["observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas"] as const;
/** Deployment conditions reported to ctrl. */
const KEPT_CONDITIONS = new Set(["Progressing", "Available"]);

/**
 * Few distinct values repeat on every object (label values, condition types and reasons):
 * JSON.parse makes a new string for each, so the cache shares one copy. Bounded: values longer
 * than `MAX_INTERNED_LENGTH` or beyond `MAX_INTERNED` distinct ones are kept as they are.
 */
const MAX_INTERNED = 10_000;
const MAX_INTERNED_LENGTH = 64;
const interned = new Map<string, string>();

function intern<T>(value: T): T {
  if (typeof value !== "string" || value.length > MAX_INTERNED_LENGTH) return value;
  const known = interned.get(value);
  if (known !== undefined) return known as T;
  if (interned.size < MAX_INTERNED) interned.set(value, value);
  return value;
}

/**
 * What the observer keeps of one object, in flat fields (a nested object costs a header and a
 * property array for every level; with 100,000 Deployments each level is several MB).
 * toObject() rebuilds the reduced KubeObject when the cache is read.
 */
export class CachedObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace: string | undefined;
  readonly resourceVersion: string | undefined;
  readonly generation: number | undefined;
  readonly labels: Record<string, string>;
  readonly desiredVersion: string | undefined;
  /** Deployments only (else undefined): spec.replicas, the first container's image, the status kept. */
  readonly replicas: number | undefined;
  readonly image: string | undefined;
  readonly status: DeploymentStatus | undefined;

  constructor(object: KubeObject) {
    const { metadata } = object;
    this.apiVersion = object.apiVersion;
    this.kind = object.kind;
    this.name = metadata.name;
    this.namespace = metadata.namespace === undefined ? undefined : intern(metadata.namespace);
    this.resourceVersion = metadata.resourceVersion as string | undefined;
    this.generation = metadata.generation as number | undefined;
    const labels: Record<string, string> = {};
    for (const label of SHARED_LABELS) {
      const value = metadata.labels?.[label];
      if (value !== undefined) labels[label] = intern(value);
    }
    const id = metadata.labels?.[ID_LABEL];
    if (id !== undefined) labels[ID_LABEL] = id;
    this.labels = labels;
    this.desiredVersion = metadata.annotations?.[DESIRED_VERSION_ANNOTATION];
    const deployment = object.kind === "Deployment";
    const spec = object.spec as DeploymentSpec | undefined;
    this.replicas = deployment ? spec?.replicas : undefined;
    const image = spec?.template?.spec?.containers?.[0]?.image;
    this.image = deployment && image !== undefined ? intern(image) : undefined;
    this.status = deployment ? deploymentStatus(object.status as DeploymentStatus | undefined) : undefined;
  }

  /**
   * The reduced object the observer's cache returns (a new one on every call): apiVersion, kind,
   * name, namespace, resourceVersion, generation, the agent's labels and desired-version
   * annotation; for a Deployment also spec.replicas, the first container's image and the status
   * counters and Progressing/Available conditions.
   */
  toObject(): KubeObject {
    const metadata: KubeObject["metadata"] = { name: this.name, labels: { ...this.labels } };
    if (this.namespace !== undefined) metadata.namespace = this.namespace;
    if (this.resourceVersion !== undefined) metadata.resourceVersion = this.resourceVersion;
    if (this.generation !== undefined) metadata.generation = this.generation;
    if (this.desiredVersion !== undefined) metadata.annotations = { [DESIRED_VERSION_ANNOTATION]: this.desiredVersion };
    const object: KubeObject = { apiVersion: this.apiVersion, kind: this.kind, metadata };
    if (this.kind !== "Deployment") return object;
    const spec: DeploymentSpec = {};
    if (this.replicas !== undefined) spec.replicas = this.replicas;
    if (this.image !== undefined) spec.template = { spec: { containers: [{ image: this.image }] } };
    object.spec = spec;
    object.status = { ...this.status, ...(this.status?.conditions && { conditions: this.status.conditions.map((c) => ({ ...c })) }) };
    return object;
  }
}

interface DeploymentSpec {
  replicas?: number;
  template?: { spec?: { containers?: { image?: string }[] } };
}

/** The status fields of a Deployment the agent reads (observation.ts), and all the cache keeps of its status. */
export interface DeploymentStatus {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  readyReplicas?: number;
  availableReplicas?: number;
  conditions?: { type?: string; status?: string; reason?: string; message?: string }[];
}

function deploymentStatus(status: DeploymentStatus | undefined): DeploymentStatus {
  const kept: DeploymentStatus = {};
  for (const field of KEPT_STATUS) if (status?.[field] !== undefined) kept[field] = status[field];
  const conditions = status?.conditions?.filter((c) => KEPT_CONDITIONS.has(c.type ?? ""));
  if (conditions?.length) {
    kept.conditions = conditions.map(({ type, status, reason, message }) => ({ type: intern(type), status: intern(status), reason: intern(reason), message }));
  }
  return kept;
}
