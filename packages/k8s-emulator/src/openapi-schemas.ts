// Schemas of the built-in types the emulator serves, for /openapi/v2 and
// /openapi/v3: the definition names, field types, patch strategies and list
// keys of the real API (k8s.io/api, as published by kube-apiserver), for the
// fields client tools commonly touch. Descriptions are short summaries. Here are
// the helpers that write them and the definitions kinds share; each kind's own
// are in its strategy (kinds/).
// References are written as `$ref: '<definition name>'` and turned into
// `#/definitions/...` (v2) or `allOf: [{$ref: '#/components/schemas/...'}]`
// (v3) by openapi.ts. Less common nested types (probes, security contexts,
// affinity, volume sources) are open objects here.
import type { Schema } from "./schema.ts";

export const META = "io.k8s.apimachinery.pkg.apis.meta.v1";
export const CORE = "io.k8s.api.core.v1";
export const APPS = "io.k8s.api.apps.v1";
export const RBAC = "io.k8s.api.rbac.v1";

export const OBJECT_META = `${META}.ObjectMeta`;

export const str = (description: string, extra: Schema = {}): Schema => ({ type: "string", description, ...extra });
export const int = (description: string): Schema => ({ type: "integer", format: "int32", description });
export const bool = (description: string): Schema => ({ type: "boolean", description });
export const ref = (name: string, description: string): Schema => ({ $ref: name, description });
export const strMap = (description: string): Schema => ({ type: "object", description, additionalProperties: { type: "string" } });
export const strList = (description: string): Schema => ({ type: "array", description, items: { type: "string" } });
export const openObject = (description: string): Schema => ({ type: "object", description, "x-kubernetes-preserve-unknown-fields": true });
/** A list merged by key in strategic merge patch and server-side apply. */
export const keyedList = (item: string, key: string, description: string, mapKeys = [key]): Schema => ({
  type: "array",
  description,
  items: { $ref: item },
  "x-kubernetes-list-type": "map",
  "x-kubernetes-list-map-keys": mapKeys,
  "x-kubernetes-patch-merge-key": key,
  "x-kubernetes-patch-strategy": "merge",
});
export const list = (item: string, description: string): Schema => ({ type: "array", description, items: { $ref: item } });
export const obj = (description: string, properties: Record<string, Schema>, required?: string[]): Schema => ({
  type: "object",
  description,
  properties,
  ...(required ? { required } : {}),
});

/** Fields every top-level object has. */
export const TYPE_META: Record<string, Schema> = {
  apiVersion: str("APIVersion defines the versioned schema of this representation of an object."),
  kind: str("Kind is a string value representing the REST resource this object represents."),
  metadata: ref(OBJECT_META, "Standard object's metadata."),
};

/** A top-level object with a spec and a status. */
export function resource(description: string, spec: string | undefined, status: string | undefined): Schema {
  return obj(description, {
    ...TYPE_META,
    ...(spec ? { spec: ref(spec, "Specification of the desired behavior.") } : {}),
    ...(status ? { status: ref(status, "Most recently observed status. Populated by the system. Read-only.") } : {}),
  });
}

/**
 * The definitions several kinds refer to (metadata, selectors, the pod template); each kind's
 * own are in its strategy's `definitions` (kinds/).
 */
export const SHARED_DEFINITIONS: Record<string, Schema> = {
  [`${META}.Time`]: { type: "string", format: "date-time", description: "A timestamp in RFC 3339 form." },
  "io.k8s.apimachinery.pkg.api.resource.Quantity": {
    type: "string",
    description: 'A fixed-point number with an optional suffix (m, k, M, G, Ki, Mi, Gi, ...), e.g. "500m" or "1Gi". Stored in canonical form.',
  },
  "io.k8s.apimachinery.pkg.util.intstr.IntOrString": { type: "string", format: "int-or-string", description: "An integer or a string." },
  [OBJECT_META]: obj("Metadata all persisted resources must have.", {
    name: str("Name must be unique within a namespace."),
    generateName: str("Optional prefix used by the server to generate a unique name if name is not set."),
    namespace: str("The namespace the object belongs to."),
    uid: str("Unique identifier, set by the server."),
    resourceVersion: str("Opaque version of the object, for optimistic concurrency and watches."),
    generation: { type: "integer", format: "int64", description: "A sequence number for the desired state." },
    creationTimestamp: ref(`${META}.Time`, "When the object was created."),
    deletionTimestamp: ref(`${META}.Time`, "When the object will be deleted; set when deletion is requested."),
    deletionGracePeriodSeconds: { type: "integer", format: "int64", description: "Seconds allowed for graceful termination." },
    labels: strMap("Map of string keys and values used to organize and select objects."),
    annotations: strMap("Unstructured key value map for arbitrary metadata."),
    finalizers: {
      ...strList("Must be empty before the object is deleted from the registry."),
      "x-kubernetes-patch-strategy": "merge",
      "x-kubernetes-list-type": "set",
    },
    ownerReferences: { type: "array", description: "Objects this object depends on.", items: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
    managedFields: {
      type: "array",
      description: "Which manager owns which fields (server-side apply).",
      items: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
    },
  }),
  [`${META}.LabelSelector`]: obj("A label query over a set of resources; matchLabels and matchExpressions are ANDed.", {
    matchLabels: strMap('{key,value} pairs; each is equivalent to an "In" expression with a single value.'),
    matchExpressions: list(`${META}.LabelSelectorRequirement`, "A list of label selector requirements."),
  }),
  [`${META}.LabelSelectorRequirement`]: obj(
    "A selector that contains values, a key, and an operator.",
    {
      key: str("The label key that the selector applies to."),
      operator: str("In, NotIn, Exists or DoesNotExist."),
      values: strList("Values for In and NotIn; empty for Exists and DoesNotExist."),
    },
    ["key", "operator"],
  ),
  [`${CORE}.PodTemplateSpec`]: obj("PodTemplateSpec describes the data a pod should have when created from a template.", {
    metadata: ref(OBJECT_META, "Standard object's metadata."),
    spec: ref(`${CORE}.PodSpec`, "Specification of the desired behavior of the pod."),
  }),
  [`${CORE}.PodSpec`]: obj(
    "PodSpec is a description of a pod.",
    {
      containers: keyedList(`${CORE}.Container`, "name", "List of containers belonging to the pod. There must be at least one."),
      initContainers: keyedList(`${CORE}.Container`, "name", "List of initialization containers, run in order before the app containers."),
      volumes: {
        ...keyedList(`${CORE}.Volume`, "name", "List of volumes that can be mounted by containers belonging to the pod."),
        "x-kubernetes-patch-strategy": "merge,retainKeys",
      },
      restartPolicy: str("Restart policy for all containers within the pod: Always, OnFailure, Never. Default to Always."),
      terminationGracePeriodSeconds: {
        type: "integer",
        format: "int64",
        description: "Duration in seconds the pod needs to terminate gracefully. Defaults to 30 seconds.",
      },
      dnsPolicy: str("DNS policy for the pod. Defaults to 'ClusterFirst'."),
      nodeSelector: strMap("Labels a node must have for the pod to be scheduled on it."),
      serviceAccountName: str("Name of the ServiceAccount to use to run this pod."),
      securityContext: openObject("Pod-level security attributes. Defaults to empty."),
      imagePullSecrets: {
        type: "array",
        description: "References to secrets for pulling images.",
        items: openObject("A reference to a secret."),
        "x-kubernetes-patch-merge-key": "name",
        "x-kubernetes-patch-strategy": "merge",
      },
      schedulerName: str('The scheduler that dispatches the pod. Defaults to "default-scheduler".'),
      affinity: openObject("The pod's scheduling constraints."),
      tolerations: { type: "array", description: "The pod's tolerations.", items: openObject("A toleration.") },
    },
    ["containers"],
  ),
  [`${CORE}.Container`]: obj(
    "A single application container that you want to run within a pod.",
    {
      name: str("Name of the container, a DNS label, unique within the pod."),
      image: str("Container image name."),
      command: strList("Entrypoint array. The image's ENTRYPOINT is used if this is not provided."),
      args: strList("Arguments to the entrypoint. The image's CMD is used if this is not provided."),
      workingDir: str("Container's working directory."),
      ports: keyedList(`${CORE}.ContainerPort`, "containerPort", "List of ports to expose from the container.", ["containerPort", "protocol"]),
      env: keyedList(`${CORE}.EnvVar`, "name", "List of environment variables to set in the container."),
      resources: ref(`${CORE}.ResourceRequirements`, "Compute resources required by this container."),
      volumeMounts: keyedList(`${CORE}.VolumeMount`, "mountPath", "Pod volumes to mount into the container's filesystem."),
      livenessProbe: openObject("Periodic probe of container liveness."),
      readinessProbe: openObject("Periodic probe of container service readiness."),
      startupProbe: openObject("Indicates that the pod has successfully initialized."),
      terminationMessagePath: str("Path at which the container's termination message is written. Defaults to /dev/termination-log."),
      terminationMessagePolicy: str("How the termination message is populated: File or FallbackToLogsOnError. Defaults to File."),
      imagePullPolicy: str("Always, Never, IfNotPresent. Defaults to Always if the :latest tag (or no tag) is used, IfNotPresent otherwise."),
      securityContext: openObject("Security options the container should be run with."),
    },
    ["name"],
  ),
  [`${CORE}.ContainerPort`]: obj(
    "A single network port in a single container.",
    {
      containerPort: int("Number of port to expose on the pod's IP address."),
      name: str("An IANA_SVC_NAME, unique within the pod, that services can refer to."),
      protocol: str('UDP, TCP, or SCTP. Defaults to "TCP".'),
      hostPort: int("Number of port to expose on the host."),
    },
    ["containerPort"],
  ),
  [`${CORE}.EnvVar`]: obj(
    "An environment variable present in a Container.",
    {
      name: str("Name of the environment variable."),
      value: str('Variable value; an empty value is not stored. Defaults to "".'),
      valueFrom: openObject("Source for the variable's value. Cannot be used if value is not empty."),
    },
    ["name"],
  ),
  [`${CORE}.ResourceRequirements`]: obj("Compute resource requirements.", {
    limits: {
      type: "object",
      description: "The maximum amount of compute resources allowed.",
      additionalProperties: { $ref: "io.k8s.apimachinery.pkg.api.resource.Quantity" },
    },
    requests: {
      type: "object",
      description: "The minimum amount of compute resources required.",
      additionalProperties: { $ref: "io.k8s.apimachinery.pkg.api.resource.Quantity" },
    },
  }),
  [`${CORE}.VolumeMount`]: obj(
    "A mounting of a Volume within a container.",
    {
      name: str("This must match the Name of a Volume."),
      mountPath: str("Path within the container at which the volume should be mounted."),
      readOnly: bool("Mounted read-only if true. Defaults to false."),
      subPath: str("Path within the volume from which the container's volume should be mounted."),
    },
    ["name", "mountPath"],
  ),
  [`${CORE}.Volume`]: {
    ...openObject("A named volume in a pod (its source, e.g. configMap, secret, emptyDir, is an open object here)."),
    properties: { name: str("Volume name, a DNS label, unique within the pod.") },
    required: ["name"],
  },
  [`${CORE}.ObjectReference`]: openObject("A reference to an object."),
  [`${CORE}.LocalObjectReference`]: obj("A reference to an object in the same namespace.", { name: str("Name of the referent.") }),
};

/** Definition name of each built-in kind: the first label of the group (`rbac` for rbac.authorization.k8s.io). */
export function definitionName(group: string, version: string, kind: string): string {
  return `${group === "" ? CORE.replace(".v1", `.${version}`) : `io.k8s.api.${group.split(".")[0]}.${version}`}.${kind}`;
}
