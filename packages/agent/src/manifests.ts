// The one place that decides which Kubernetes objects a desired resource becomes. Both targets
// use it: the kubernetes target applies these objects, the render target writes them.
import { ResourceType, type Autoscaling, type DesiredResource, type EnvVar, type Probe, type Workload } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { typeFromName, typeName, resourceKey } from "./keys.ts";
import { checkSecretEnvDelivered, liveHoldsSecretEnv, openSecretEnv, secretEnvApplied, secretEnvChecksum } from "./sealed-secrets.ts";

export const FIELD_MANAGER = "flotilla-agent";

export const MANAGED_BY_LABEL = "app.kubernetes.io/managed-by";
export const MANAGED_BY = "flotilla";
export const REGION_LABEL = "flotilla.dev/region";
export const TYPE_LABEL = "flotilla.dev/resource-type";
export const ID_LABEL = "flotilla.dev/resource-id";
export const DESIRED_VERSION_ANNOTATION = "flotilla.dev/desired-version";
/**
 * On a deployment's pods: the deployment revision their spec was written from, so that an
 * analysis query selects the pods of the revision under test (and the monitoring stack can
 * copy it onto the pods' series as `revision`). Pods only: the Deployment's selector stays.
 */
export const REVISION_LABEL = "flotilla.dev/revision";
/**
 * On the pod template: a digest of the secret env's names and keyed fingerprints, so that a
 * changed value (which changes no other field of the template) rolls the pods.
 */
export const SECRET_ENV_CHECKSUM_ANNOTATION = "flotilla.dev/secret-env-checksum";

export interface ObjectRef {
  apiVersion: string;
  kind: string;
  /** Absent for cluster-scoped objects (Namespace). */
  namespace?: string;
  name: string;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [field: string]: unknown;
  };
  [field: string]: unknown;
}

/** What a desired resource means in the cluster. */
export interface Manifests {
  /** Objects to apply, in order (the Namespace first). */
  apply: KubeObject[];
  /** Objects the resource may have had before and must not have now (its Service once port is 0, its PodDisruptionBudget once it has none). */
  absent: ObjectRef[];
}

/** Label selector of everything this agent manages in its region. */
export function managedSelector(region: string): string {
  return `${MANAGED_BY_LABEL}=${MANAGED_BY},${REGION_LABEL}=${region}`;
}

/** Whether labels mark an object as managed by the agent of `region`. */
export function isManagedBy(labels: Record<string, string> | undefined, region: string): boolean {
  return labels?.[MANAGED_BY_LABEL] === MANAGED_BY && labels[REGION_LABEL] === region;
}

/** The resource an object's labels name, if they name one of a known type. */
export function resourceOfLabels(labels: Record<string, string> | undefined): { type: ResourceType; id: string } | undefined {
  const type = typeFromName(labels?.[TYPE_LABEL] ?? "");
  const id = labels?.[ID_LABEL];
  return type === undefined || !id ? undefined : { type, id };
}

/** "Deployment ns/name": how logs and apply results name an object. */
export function describeObject(object: { kind: string; metadata: { name: string; namespace?: string } }): string {
  const { namespace, name } = object.metadata;
  // One flat string (a key of the kubernetes target's last applied map): see resourceKey().
  return [object.kind, " ", namespace ? `${namespace}/` : "", name].join("");
}

/**
 * Whether the object's desired-version annotation must follow every new desired version: the
 * Deployment's and the policy's do (status reports read the applied version from them). Other
 * objects (a Service, a PodDisruptionBudget, a HorizontalPodAutoscaler) keep the version they were last applied from while
 * nothing else about them changes, so a new desired version that changes only the Deployment is
 * not applied to them.
 */
export function tracksDesiredVersion(object: { kind: string }): boolean {
  return object.kind === "Deployment" || object.kind === "CiliumNetworkPolicy";
}

/** The object without its desired-version annotation: the content that decides whether it changed. */
export function withoutDesiredVersion(object: KubeObject): KubeObject {
  const { [DESIRED_VERSION_ANNOTATION]: _version, ...annotations } = object.metadata.annotations ?? {};
  return { ...object, metadata: { ...object.metadata, annotations } };
}

export function refOf(object: KubeObject): ObjectRef {
  const { apiVersion, kind, metadata } = object;
  return { apiVersion, kind, name: metadata.name, ...(metadata.namespace !== undefined ? { namespace: metadata.namespace } : {}) };
}

const deploymentRef = (namespace: string, name: string): ObjectRef => ({ apiVersion: "apps/v1", kind: "Deployment", namespace, name });
const serviceRef = (namespace: string, name: string): ObjectRef => ({ apiVersion: "v1", kind: "Service", namespace, name });
const policyRef = (namespace: string, name: string): ObjectRef => ({ apiVersion: "cilium.io/v2", kind: "CiliumNetworkPolicy", namespace, name });
const budgetRef = (namespace: string, name: string): ObjectRef => ({ apiVersion: "policy/v1", kind: "PodDisruptionBudget", namespace, name });
const autoscalerRef = (namespace: string, name: string): ObjectRef => ({ apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler", namespace, name });
const secretRef = (namespace: string, name: string): ObjectRef => ({ apiVersion: "v1", kind: "Secret", namespace, name: secretEnvName(name) });

/** The Secret holding a workload's secret env values: "<resource id>-env". */
export function secretEnvName(id: string): string {
  return `${id}-env`;
}

/** Every object a resource of `type` can own (what a delete removes). Never its Namespace. */
export function ownedRefs(type: ResourceType, namespace: string, name: string): ObjectRef[] {
  if (type === ResourceType.CILIUM_NETWORK_POLICY) return [policyRef(namespace, name)];
  const workloadRefs = [deploymentRef(namespace, name), serviceRef(namespace, name), budgetRef(namespace, name)];
  return type === ResourceType.DEPLOYMENT ? [...workloadRefs, secretRef(namespace, name), autoscalerRef(namespace, name)] : workloadRefs;
}

export function buildManifests(resource: DesiredResource, region: string): Manifests {
  const { id, namespace } = resource;
  const labels: Record<string, string> = {
    [MANAGED_BY_LABEL]: MANAGED_BY,
    [REGION_LABEL]: region,
    [TYPE_LABEL]: typeName(resource.type),
    [ID_LABEL]: id,
  };
  // A fresh copy per object: objects must not share parts (serializers may mutate, YAML would alias).
  const metadata = (): Metadata => ({
    name: id,
    namespace,
    labels: { ...labels },
    annotations: { [DESIRED_VERSION_ANNOTATION]: String(resource.version) },
  });
  // Shared namespaces may be used by several resources, so a Namespace carries no resource labels.
  const namespaceObject: KubeObject = {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [REGION_LABEL]: region } },
  };
  const spec = resource.spec;
  switch (spec.case) {
    case "deployment":
    case "sentinel": {
      const workload = spec.value.workload;
      if (!workload) throw new Error(`${resourceKey(resource.type, id)}: no workload`);
      // With an autoscaler the applied Deployment leaves spec.replicas out: the HPA owns that field
      // (a first create defaults it to 1, then the HPA scales into its bounds); without one it is ours again.
      const autoscaling = spec.case === "deployment" ? spec.value.autoscaling : undefined;
      const revision = spec.case === "deployment" ? spec.value.revision : 0n;
      const apply = [namespaceObject, deploymentObject(metadata(), workload, autoscaling ? undefined : spec.value.replicas, revision)];
      const absent: ObjectRef[] = [];
      if (workload.port > 0) apply.push(serviceObject(metadata(), workload.port));
      else absent.push(serviceRef(namespace, id));
      if (workload.disruptionBudget?.budget.case !== undefined) apply.push(disruptionBudgetObject(metadata(), workload));
      else absent.push(budgetRef(namespace, id));
      if (workload.secretEnv.length > 0) apply.push(secretEnvObject({ ...metadata(), name: secretEnvName(id) }, workload));
      else if (spec.case === "deployment") absent.push(secretRef(namespace, id));
      if (autoscaling) apply.push(autoscalerObject(metadata(), autoscaling));
      else if (spec.case === "deployment") absent.push(autoscalerRef(namespace, id));
      return { apply, absent };
    }
    case "ciliumNetworkPolicy":
      return {
        apply: [namespaceObject, { apiVersion: "cilium.io/v2", kind: "CiliumNetworkPolicy", metadata: metadata(), spec: spec.value.spec ?? {} }],
        absent: [],
      };
    default:
      throw new Error(`${resourceKey(resource.type, id)}: no spec`);
  }
}

type Metadata = KubeObject["metadata"] & { labels: Record<string, string> };

/** The immutable selector: the resource's identity labels only. */
function selectorLabels(labels: Record<string, string>): Record<string, string> {
  return { [TYPE_LABEL]: labels[TYPE_LABEL]!, [ID_LABEL]: labels[ID_LABEL]! };
}

/** `replicas` undefined: left to an autoscaler; `revision` 0: no revision label (a sentinel's). */
function deploymentObject(metadata: Metadata, workload: Workload, replicas: number | undefined, revision: bigint): KubeObject {
  const requests: Record<string, string> = {};
  if (workload.cpuMillicores > 0) requests.cpu = `${workload.cpuMillicores}m`;
  if (workload.memoryMib > 0) requests.memory = `${workload.memoryMib}Mi`;
  const container: Record<string, unknown> = { name: "app", image: workload.image };
  if (workload.command.length > 0) container.command = [...workload.command];
  const secretEnvRefs = workload.secretEnv.map(({ name }) => ({ name, valueFrom: { secretKeyRef: { name: secretEnvName(metadata.name), key: name } } }));
  if (workload.env.length + secretEnvRefs.length > 0) container.env = [...workload.env.map(envVarObject), ...secretEnvRefs];
  if (workload.envFrom.length > 0) {
    container.envFrom = workload.envFrom.map(({ source, prefix }) => ({
      ...(prefix ? { prefix } : {}),
      ...(source.case === "secretName" ? { secretRef: { name: source.value } } : { configMapRef: { name: source.value ?? "" } }),
    }));
  }
  if (workload.port > 0) container.ports = [{ name: "http", containerPort: workload.port, protocol: "TCP" }];
  if (Object.keys(requests).length > 0) container.resources = { requests };
  for (const [field, probe] of [
    ["readinessProbe", workload.readinessProbe],
    ["livenessProbe", workload.livenessProbe],
    ["startupProbe", workload.startupProbe],
  ] as const) {
    if (probe) container[field] = probeObject(probe);
  }
  const podSpec: Record<string, unknown> = { containers: [container] };
  if (workload.terminationGracePeriodSeconds !== undefined) podSpec.terminationGracePeriodSeconds = Number(workload.terminationGracePeriodSeconds);
  // Pods get the labels but not the version annotation: a new desired version that does not
  // change the pod spec must not restart the pods. The operator's pod labels never replace ours
  // (validation refuses them; ours are spread last all the same).
  const podLabels = { ...workload.podLabels, ...metadata.labels, ...(revision > 0n ? { [REVISION_LABEL]: String(revision) } : {}) };
  const podMetadata: Record<string, unknown> = { labels: podLabels };
  const podAnnotations: Record<string, string> = { ...workload.podAnnotations };
  if (workload.secretEnv.length > 0) podAnnotations[SECRET_ENV_CHECKSUM_ANNOTATION] = secretEnvChecksum(workload.secretEnv);
  if (Object.keys(podAnnotations).length > 0) podMetadata.annotations = podAnnotations;
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata,
    spec: {
      ...(replicas === undefined ? {} : { replicas }),
      selector: { matchLabels: selectorLabels(metadata.labels) },
      ...(workload.maxSurge || workload.maxUnavailable
        ? {
            // The API server's defaults written out: the type, and 25% for the one not given.
            strategy: {
              type: "RollingUpdate",
              rollingUpdate: { maxSurge: intOrString(workload.maxSurge || "25%"), maxUnavailable: intOrString(workload.maxUnavailable || "25%") },
            },
          }
        : {}),
      template: { metadata: podMetadata, spec: podSpec },
    },
  };
}

/**
 * The v1 Secret of the workload's secret env values. The manifest never carries `data`: values
 * as base64 strings would stay in the heap until garbage, so it carries secretEnvData() instead,
 * and the kubernetes target writes the values into the request's bytes (secret-request.ts).
 * While the values are held (sealed in the agent's memory) they can be opened for that; once
 * applied they are no longer held (sealed-secrets.ts) and the live Secret must hold them.
 */
function secretEnvObject(metadata: Metadata, workload: Workload): KubeObject {
  const { secretEnv } = workload;
  const applied = secretEnvApplied(secretEnv);
  // A value not delivered fails the build, as a manifest that cannot be written should.
  if (!applied) checkSecretEnvDelivered(secretEnv);
  const data: SecretEnvData = {
    keys: secretEnv.map(({ name }) => name),
    heldBy: (live) => liveHoldsSecretEnv(secretEnv, live),
    ...(applied ? {} : { open: () => openSecretEnv(secretEnv) }),
  };
  return { apiVersion: "v1", kind: "Secret", metadata, type: "Opaque", [SECRET_ENV_DATA]: data };
}

const SECRET_ENV_DATA = Symbol("secret env data");

/**
 * What a Secret manifest of a secret env carries in place of its `data`: a symbol-keyed field,
 * never serialized, never compared.
 */
export interface SecretEnvData {
  /** The Secret's data keys: the variables' names, in order. */
  keys: readonly string[];
  /** Whether a live Secret's data (base64, as the API server serves it) holds the values; keys beyond ours do not count. */
  heldBy(data: Readonly<Record<string, unknown>> | undefined): boolean;
  /**
   * The values in `keys`' order, as bytes the caller zeroes once written; absent once they left
   * the agent's memory (applied): the Secret is then never written, only checked with heldBy().
   */
  open?: () => Buffer[];
}

/** What a Secret manifest of a secret env carries in place of its data (undefined for any other object). */
export function secretEnvData(object: KubeObject): SecretEnvData | undefined {
  return (object as { [SECRET_ENV_DATA]?: SecretEnvData })[SECRET_ENV_DATA];
}

/** The secret env checksum on a Deployment's pod template (it references its secret env Secret), if any. */
export function secretEnvChecksumOf(deployment: KubeObject): string | undefined {
  const template = (deployment.spec as { template?: { metadata?: { annotations?: Record<string, string> } } } | undefined)?.template;
  return template?.metadata?.annotations?.[SECRET_ENV_CHECKSUM_ANNOTATION];
}

/** A plain value, or a key of an existing Secret or ConfigMap. */
function envVarObject({ name, value, valueFrom }: EnvVar): Record<string, unknown> {
  const source = valueFrom?.source;
  if (source?.case === "secretKeyRef") return { name, valueFrom: { secretKeyRef: { name: source.value.name, key: source.value.key } } };
  if (source?.case === "configMapKeyRef") return { name, valueFrom: { configMapKeyRef: { name: source.value.name, key: source.value.key } } };
  return { name, value };
}

/** "3" → 3, "25%" → "25%": an IntOrString as the API server keeps it (its type as written). */
function intOrString(value: string): number | string {
  return value.endsWith("%") ? value : Number(value);
}

/**
 * An autoscaling/v2 HorizontalPodAutoscaler of the Deployment, a Resource Utilization metric per
 * target, with minReplicas written out (the API server's default would be 1).
 */
function autoscalerObject(metadata: Metadata, autoscaling: Autoscaling): KubeObject {
  const targets: [string, number][] = [
    ["cpu", autoscaling.targetCpuUtilizationPercent],
    ["memory", autoscaling.targetMemoryUtilizationPercent],
  ];
  return {
    apiVersion: "autoscaling/v2",
    kind: "HorizontalPodAutoscaler",
    metadata,
    spec: {
      scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: metadata.name },
      minReplicas: autoscaling.minReplicas,
      maxReplicas: autoscaling.maxReplicas,
      metrics: targets
        .filter(([, percent]) => percent > 0)
        .map(([name, averageUtilization]) => ({ type: "Resource", resource: { name, target: { type: "Utilization", averageUtilization } } })),
    },
  };
}

/** A policy/v1 PodDisruptionBudget over the Deployment's pods (its selector). */
function disruptionBudgetObject(metadata: Metadata, workload: Workload): KubeObject {
  const budget = workload.disruptionBudget!.budget;
  const bound = budget.case === "minAvailable" ? { minAvailable: intOrString(budget.value) } : { maxUnavailable: intOrString(budget.value ?? "") };
  return { apiVersion: "policy/v1", kind: "PodDisruptionBudget", metadata, spec: { ...bound, selector: { matchLabels: selectorLabels(metadata.labels) } } };
}

/**
 * A container probe with every default written out, as the API server stores it: what we
 * apply then compares equal to what we read back.
 */
function probeObject(probe: Probe): Record<string, unknown> {
  const handler = probe.handler;
  const action =
    handler.case === "httpGet"
      ? { httpGet: { path: handler.value.path || "/", port: handler.value.port, scheme: "HTTP" } }
      : handler.case === "tcpSocket"
        ? { tcpSocket: { port: handler.value.port } }
        : { exec: { command: [...(handler.value?.command ?? [])] } };
  return {
    ...action,
    // 0 is the API server's default, which it stores as absent.
    ...(probe.initialDelaySeconds > 0 ? { initialDelaySeconds: probe.initialDelaySeconds } : {}),
    timeoutSeconds: probe.timeoutSeconds || 1,
    periodSeconds: probe.periodSeconds || 10,
    successThreshold: probe.successThreshold || 1,
    failureThreshold: probe.failureThreshold || 3,
  };
}

function serviceObject(metadata: Metadata, port: number): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata,
    spec: { selector: selectorLabels(metadata.labels), ports: [{ name: "http", port, targetPort: port, protocol: "TCP" }] },
  };
}
