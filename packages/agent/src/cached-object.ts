// What the observer keeps of a watched object (client-go's informer transform functions): only
// the fields that status reports, drift checks and applies read, so 100,000 Deployments cost a
// few hundred bytes each rather than the 3–5 KB of a full object with its managedFields. The
// full object of a watch event or list page is still what the event handler (drift
// correction) compares; only the cache holds the reduced one.
import { DESIRED_VERSION_ANNOTATION, ID_LABEL, MANAGED_BY_LABEL, REGION_LABEL, TYPE_LABEL, type KubeObject } from "./manifests.ts";

/** Labels the agent reads (resource key, managed-by check). */
const KEPT_LABELS = [MANAGED_BY_LABEL, REGION_LABEL, TYPE_LABEL, ID_LABEL];
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
 * The reduced copy of `object` the observer caches: apiVersion, kind, name, namespace,
 * resourceVersion, generation, the agent's labels and desired-version annotation; for a
 * Deployment also spec.replicas, the first container's image and the status counters and
 * Progressing/Available conditions.
 */
export function cachedObject(object: KubeObject): KubeObject {
  const { metadata } = object;
  const labels: Record<string, string> = {};
  for (const label of KEPT_LABELS) {
    const value = metadata.labels?.[label];
    if (value !== undefined) labels[label] = intern(value);
  }
  const version = metadata.annotations?.[DESIRED_VERSION_ANNOTATION];
  const cached: KubeObject = {
    apiVersion: object.apiVersion,
    kind: object.kind,
    metadata: {
      name: metadata.name,
      ...(metadata.namespace !== undefined && { namespace: intern(metadata.namespace) }),
      resourceVersion: metadata.resourceVersion,
      ...(metadata.generation !== undefined && { generation: metadata.generation }),
      labels,
      ...(version !== undefined && { annotations: { [DESIRED_VERSION_ANNOTATION]: version } }),
    },
  };
  if (object.kind === "Deployment") {
    cached.spec = deploymentSpec(object.spec as DeploymentSpec | undefined);
    cached.status = deploymentStatus(object.status as DeploymentStatus | undefined);
  }
  return cached;
}

interface DeploymentSpec {
  replicas?: number;
  template?: { spec?: { containers?: { image?: string }[] } };
}

interface DeploymentStatus {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  readyReplicas?: number;
  availableReplicas?: number;
  conditions?: { type?: string; status?: string; reason?: string; message?: string }[];
}

function deploymentSpec(spec: DeploymentSpec | undefined): DeploymentSpec {
  const image = spec?.template?.spec?.containers?.[0]?.image;
  return {
    ...(spec?.replicas !== undefined && { replicas: spec.replicas }),
    ...(image !== undefined && { template: { spec: { containers: [{ image: intern(image) }] } } }),
  };
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
