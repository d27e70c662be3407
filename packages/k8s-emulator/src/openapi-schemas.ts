// Schemas of the built-in types the emulator serves, for /openapi/v2 and
// /openapi/v3: the definition names, field types, patch strategies and list
// keys of the real API (k8s.io/api, as published by kube-apiserver), for the
// fields client tools commonly touch. Descriptions are short summaries.
// References are written as `$ref: '<definition name>'` and turned into
// `#/definitions/...` (v2) or `allOf: [{$ref: '#/components/schemas/...'}]`
// (v3) by openapi.ts. Less common nested types (probes, security contexts,
// affinity, volume sources) are open objects here.
import type { Schema } from "./schema.ts";

const META = "io.k8s.apimachinery.pkg.apis.meta.v1";
const CORE = "io.k8s.api.core.v1";
const APPS = "io.k8s.api.apps.v1";
const RBAC = "io.k8s.api.rbac.v1";

export const OBJECT_META = `${META}.ObjectMeta`;

const str = (description: string, extra: Schema = {}): Schema => ({ type: "string", description, ...extra });
const int = (description: string): Schema => ({ type: "integer", format: "int32", description });
const bool = (description: string): Schema => ({ type: "boolean", description });
const ref = (name: string, description: string): Schema => ({ $ref: name, description });
const strMap = (description: string): Schema => ({ type: "object", description, additionalProperties: { type: "string" } });
const strList = (description: string): Schema => ({ type: "array", description, items: { type: "string" } });
const openObject = (description: string): Schema => ({ type: "object", description, "x-kubernetes-preserve-unknown-fields": true });
/** A list merged by key in strategic merge patch and server-side apply. */
const keyedList = (item: string, key: string, description: string, mapKeys = [key]): Schema => ({
  type: "array",
  description,
  items: { $ref: item },
  "x-kubernetes-list-type": "map",
  "x-kubernetes-list-map-keys": mapKeys,
  "x-kubernetes-patch-merge-key": key,
  "x-kubernetes-patch-strategy": "merge",
});
const list = (item: string, description: string): Schema => ({ type: "array", description, items: { $ref: item } });
const obj = (description: string, properties: Record<string, Schema>, required?: string[]): Schema => ({
  type: "object",
  description,
  properties,
  ...(required ? { required } : {}),
});

/** Fields every top-level object has. */
const TYPE_META: Record<string, Schema> = {
  apiVersion: str("APIVersion defines the versioned schema of this representation of an object."),
  kind: str("Kind is a string value representing the REST resource this object represents."),
  metadata: ref(OBJECT_META, "Standard object's metadata."),
};

/** A top-level object with a spec and a status. */
function resource(description: string, spec: string | undefined, status: string | undefined): Schema {
  return obj(description, {
    ...TYPE_META,
    ...(spec ? { spec: ref(spec, "Specification of the desired behavior.") } : {}),
    ...(status ? { status: ref(status, "Most recently observed status. Populated by the system. Read-only.") } : {}),
  });
}

export const DEFINITIONS: Record<string, Schema> = {
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

  [`${APPS}.Deployment`]: resource("Deployment enables declarative updates for Pods and ReplicaSets.", `${APPS}.DeploymentSpec`, `${APPS}.DeploymentStatus`),
  [`${APPS}.DeploymentSpec`]: obj(
    "DeploymentSpec is the specification of the desired behavior of the Deployment.",
    {
      minReadySeconds: int("Minimum number of seconds a new pod must be ready without crashing to be considered available. Defaults to 0."),
      paused: bool("Indicates that the deployment is paused."),
      progressDeadlineSeconds: int(
        "The maximum time in seconds for a deployment to make progress before it is considered to be failed (reason ProgressDeadlineExceeded in the Progressing condition). Defaults to 600s.",
      ),
      replicas: int("Number of desired pods. Defaults to 1."),
      revisionHistoryLimit: int("The number of old ReplicaSets to retain to allow rollback. Defaults to 10."),
      selector: ref(`${META}.LabelSelector`, "Label selector for pods. It must match the pod template's labels."),
      strategy: {
        ...ref(`${APPS}.DeploymentStrategy`, "The deployment strategy to use to replace existing pods with new ones."),
        "x-kubernetes-patch-strategy": "retainKeys",
      },
      template: ref(`${CORE}.PodTemplateSpec`, "Template describes the pods that will be created."),
    },
    ["selector", "template"],
  ),
  [`${APPS}.ReplicaSet`]: resource(
    "ReplicaSet ensures that a specified number of pod replicas are running at any given time.",
    `${APPS}.ReplicaSetSpec`,
    `${APPS}.ReplicaSetStatus`,
  ),
  [`${APPS}.ReplicaSetSpec`]: obj(
    "ReplicaSetSpec is the specification of a ReplicaSet.",
    {
      minReadySeconds: int("Minimum number of seconds a new pod must be ready without crashing to be considered available. Defaults to 0."),
      replicas: int("Number of desired pods. Defaults to 1."),
      selector: ref(`${META}.LabelSelector`, "Label selector for pods. It must match the pod template's labels."),
      template: ref(`${CORE}.PodTemplateSpec`, "Template describes the pods that will be created."),
    },
    ["selector"],
  ),
  [`${APPS}.ReplicaSetStatus`]: obj("ReplicaSetStatus represents the current status of a ReplicaSet.", {
    replicas: int("The most recently observed number of replicas."),
    fullyLabeledReplicas: int("The number of pods that have labels matching the labels of the pod template of the replicaset."),
    readyReplicas: int("The number of pods targeted by this ReplicaSet with a Ready Condition."),
    availableReplicas: int("The number of available pods (ready for at least minReadySeconds) for this replica set."),
    observedGeneration: { type: "integer", format: "int64", description: "The most recent generation observed by the controller." },
  }),
  [`${APPS}.DeploymentStrategy`]: obj("DeploymentStrategy describes how to replace existing pods with new ones.", {
    rollingUpdate: ref(`${APPS}.RollingUpdateDeployment`, "Rolling update config params. Present only if type = RollingUpdate."),
    type: str('Type of deployment: "Recreate" or "RollingUpdate". Default is RollingUpdate.', { enum: ["Recreate", "RollingUpdate"] }),
  }),
  [`${APPS}.RollingUpdateDeployment`]: obj("Spec to control the desired behavior of rolling update.", {
    maxSurge: ref(
      "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
      "The maximum number of pods that can be scheduled above the desired number of pods (number or percentage, rounded up). Defaults to 25%.",
    ),
    maxUnavailable: ref(
      "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
      "The maximum number of pods that can be unavailable during the update (number or percentage, rounded down). Defaults to 25%.",
    ),
  }),
  [`${APPS}.DeploymentStatus`]: obj("DeploymentStatus is the most recently observed status of the Deployment.", {
    observedGeneration: { type: "integer", format: "int64", description: "The generation observed by the deployment controller." },
    replicas: int("Total number of non-terminated pods targeted by this deployment (their labels match the selector)."),
    updatedReplicas: int("Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
    readyReplicas: int("Number of pods targeted by this Deployment with a Ready Condition."),
    availableReplicas: int("Total number of available pods (ready for at least minReadySeconds)."),
    unavailableReplicas: int("Total number of unavailable pods targeted by this deployment."),
    collisionCount: int("Count of hash collisions for the Deployment."),
    conditions: keyedList(`${APPS}.DeploymentCondition`, "type", "Represents the latest available observations of a deployment's current state."),
  }),
  [`${APPS}.DeploymentCondition`]: obj(
    "DeploymentCondition describes the state of a deployment at a certain point.",
    {
      type: str("Type of deployment condition: Available, Progressing or ReplicaFailure."),
      status: str("Status of the condition, one of True, False, Unknown."),
      reason: str("The reason for the condition's last transition."),
      message: str("A human readable message indicating details about the transition."),
      lastUpdateTime: ref(`${META}.Time`, "The last time this condition was updated."),
      lastTransitionTime: ref(`${META}.Time`, "Last time the condition transitioned from one status to another."),
    },
    ["type", "status"],
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

  [`${CORE}.Service`]: resource(
    "A named abstraction of software service: a local port that the proxy listens on, and the selector that determines which pods answer requests sent through the proxy.",
    `${CORE}.ServiceSpec`,
    `${CORE}.ServiceStatus`,
  ),
  [`${CORE}.ServiceSpec`]: obj("ServiceSpec describes the attributes that a user creates on a service.", {
    type: str("How the Service is exposed: ExternalName, ClusterIP, NodePort, and LoadBalancer. Defaults to ClusterIP."),
    selector: strMap("Route service traffic to pods with label keys and values matching this selector."),
    ports: keyedList(`${CORE}.ServicePort`, "port", "The list of ports that are exposed by this service.", ["port", "protocol"]),
    clusterIP: str("The IP address of the service, usually assigned randomly."),
    clusterIPs: strList("IP addresses assigned to this service."),
    ipFamilies: strList("IP families (IPv4, IPv6) assigned to this service."),
    ipFamilyPolicy: str("SingleStack, PreferDualStack or RequireDualStack."),
    sessionAffinity: str("ClientIP or None. Defaults to None."),
    externalTrafficPolicy: str("How nodes distribute service traffic they receive on externally-facing addresses: Cluster or Local."),
    internalTrafficPolicy: str("How nodes distribute service traffic they receive on the ClusterIP: Cluster or Local."),
    externalName: str("The external reference for an ExternalName service."),
  }),
  [`${CORE}.ServicePort`]: obj(
    "ServicePort contains information on service's port.",
    {
      name: str("The name of this port within the service; required with more than one port."),
      protocol: str("TCP, UDP or SCTP. Default is TCP."),
      port: int("The port that will be exposed by this service."),
      targetPort: ref(
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
        "Number or name of the port to access on the pods targeted by the service. Defaults to port.",
      ),
      nodePort: int("The port on each node on which this service is exposed when type is NodePort or LoadBalancer."),
      appProtocol: str("The application protocol for this port."),
    },
    ["port"],
  ),
  [`${CORE}.ServiceStatus`]: obj("ServiceStatus represents the current status of a service.", {
    loadBalancer: openObject("The current status of the load-balancer, if one is present."),
    conditions: { type: "array", description: "Current service state.", items: openObject("A condition.") },
  }),
  [`${CORE}.Namespace`]: resource("Namespace provides a scope for Names.", `${CORE}.NamespaceSpec`, `${CORE}.NamespaceStatus`),
  [`${CORE}.NamespaceSpec`]: obj("NamespaceSpec describes the attributes on a Namespace.", {
    finalizers: strList("An opaque list of values that must be empty to permanently remove the object from storage."),
  }),
  [`${CORE}.NamespaceStatus`]: obj("NamespaceStatus is information about the current status of a Namespace.", {
    phase: str("The current lifecycle phase of the namespace: Active or Terminating."),
    conditions: keyedList(`${CORE}.NamespaceCondition`, "type", "The latest available observations of a namespace's current state."),
  }),
  [`${CORE}.NamespaceCondition`]: obj(
    "NamespaceCondition contains details about state of namespace.",
    {
      type: str("Type of namespace controller condition."),
      status: str("Status of the condition, one of True, False, Unknown."),
      reason: str("Unique, one-word, CamelCase reason for the condition's last transition."),
      message: str("Human-readable message indicating details about last transition."),
      lastTransitionTime: ref(`${META}.Time`, "Last time the condition transitioned."),
    },
    ["type", "status"],
  ),
  [`${CORE}.Pod`]: resource("Pod is a collection of containers that can run on a host.", `${CORE}.PodSpec`, `${CORE}.PodStatus`),
  [`${CORE}.PodStatus`]: openObject("The most recently observed status of the pod: phase, conditions, IPs and container statuses."),
  // Kinds stored as given (no spec/status split in most): their top-level fields.
  [`${CORE}.ServiceAccount`]: obj("ServiceAccount binds together a name, a principal for non-humans, and a set of secrets.", {
    ...TYPE_META,
    secrets: keyedList(`${CORE}.ObjectReference`, "name", "Secrets pods running as this account may use."),
    imagePullSecrets: list(`${CORE}.LocalObjectReference`, "Secrets for pulling container images."),
    automountServiceAccountToken: bool("Whether pods running as this account mount an API token automatically."),
  }),
  [`${CORE}.ObjectReference`]: openObject("A reference to an object."),
  [`${CORE}.Event`]: obj("Event is a report of an event somewhere in the cluster.", {
    ...TYPE_META,
    involvedObject: ref(`${CORE}.ObjectReference`, "The object that this event is about."),
    reason: str("A short, machine understandable string that gives the reason for the transition into the object's current status."),
    message: str("A human-readable description of the status of this operation."),
    source: openObject("The component reporting this event."),
    firstTimestamp: ref(`${META}.Time`, "The time at which the event was first recorded."),
    lastTimestamp: ref(`${META}.Time`, "The time at which the most recent occurrence of this event was recorded."),
    count: int("The number of times this event has occurred."),
    type: str("Type of this event (Normal, Warning)."),
    reportingComponent: str("Name of the controller that emitted this Event."),
    reportingInstance: str("ID of the controller instance."),
  }),
  [`${CORE}.LocalObjectReference`]: obj("A reference to an object in the same namespace.", { name: str("Name of the referent.") }),
  [`${CORE}.ConfigMap`]: obj("ConfigMap holds configuration data for pods to consume.", {
    ...TYPE_META,
    data: strMap("Configuration data (UTF-8)."),
    binaryData: strMap("Binary configuration data, base64."),
    immutable: bool("Whether the data may not be updated."),
  }),
  [`${CORE}.Secret`]: obj("Secret holds secret data of a certain type.", {
    ...TYPE_META,
    type: str("Used to facilitate programmatic handling of secret data; defaults to Opaque."),
    data: strMap("Secret data, base64."),
    stringData: strMap("Write-only plain-text data, merged into data on write."),
    immutable: bool("Whether the data may not be updated."),
  }),
  [`${RBAC}.PolicyRule`]: obj(
    "What a rule allows: verbs on resources of API groups (or on non-resource URLs).",
    {
      verbs: strList("Verbs the rule allows; * is all."),
      apiGroups: strList('API groups of the resources; "" is the core group, * is all.'),
      resources: strList("Resources (and resource/subresource) the rule applies to; * is all."),
      resourceNames: strList("Names the rule is restricted to; empty is all."),
      nonResourceURLs: strList("URL paths (a trailing * is a prefix) for cluster-wide rules."),
    },
    ["verbs"],
  ),
  [`${RBAC}.Subject`]: obj(
    "A user, group or service account a binding applies to.",
    {
      kind: str("User, Group or ServiceAccount."),
      apiGroup: str('rbac.authorization.k8s.io for User and Group, "" for ServiceAccount.'),
      name: str("Name of the subject."),
      namespace: str("Namespace of a ServiceAccount subject."),
    },
    ["kind", "name"],
  ),
  [`${RBAC}.RoleRef`]: obj(
    "The role a binding grants.",
    {
      apiGroup: str("rbac.authorization.k8s.io"),
      kind: str("Role or ClusterRole."),
      name: str("Name of the role."),
    },
    ["apiGroup", "kind", "name"],
  ),
  [`${RBAC}.Role`]: obj("A namespaced set of PolicyRules.", { ...TYPE_META, rules: list(`${RBAC}.PolicyRule`, "The rules of this role.") }),
  [`${RBAC}.ClusterRole`]: obj("A cluster-level set of PolicyRules.", {
    ...TYPE_META,
    rules: list(`${RBAC}.PolicyRule`, "The rules of this role."),
    aggregationRule: openObject("How to build the rules of an aggregated role (not evaluated by the emulator)."),
  }),
  [`${RBAC}.RoleBinding`]: obj(
    "Grants a Role or ClusterRole to subjects in a namespace.",
    {
      ...TYPE_META,
      subjects: list(`${RBAC}.Subject`, "Who the role is granted to."),
      roleRef: ref(`${RBAC}.RoleRef`, "The role granted."),
    },
    ["roleRef"],
  ),
  [`${RBAC}.ClusterRoleBinding`]: obj(
    "Grants a ClusterRole to subjects cluster-wide.",
    {
      ...TYPE_META,
      subjects: list(`${RBAC}.Subject`, "Who the role is granted to."),
      roleRef: ref(`${RBAC}.RoleRef`, "The role granted."),
    },
    ["roleRef"],
  ),
  "io.k8s.api.coordination.v1.Lease": resource("A lease, e.g. of leader election.", "io.k8s.api.coordination.v1.LeaseSpec", undefined),
  "io.k8s.api.coordination.v1.LeaseSpec": obj("The holder and timing of a lease.", {
    holderIdentity: str("The holder of the lease."),
    leaseDurationSeconds: int("How long candidates wait before forcing an acquisition."),
    acquireTime: str("When the current lease was acquired (MicroTime).", { format: "date-time" }),
    renewTime: str("When the holder last renewed the lease (MicroTime).", { format: "date-time" }),
    leaseTransitions: int("Number of holder changes."),
    strategy: str("The strategy for picking the leader (coordinated leader election)."),
    preferredHolder: str("Signals to a holder that it should release the lease."),
  }),
  "io.k8s.api.policy.v1.PodDisruptionBudget": resource(
    "Bounds the disruption of a collection of pods.",
    "io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
    "io.k8s.api.policy.v1.PodDisruptionBudgetStatus",
  ),
  "io.k8s.api.policy.v1.PodDisruptionBudgetSpec": obj("What a PodDisruptionBudget protects.", {
    minAvailable: ref("io.k8s.apimachinery.pkg.util.intstr.IntOrString", "Pods that must stay available after an eviction (number or percentage)."),
    maxUnavailable: ref("io.k8s.apimachinery.pkg.util.intstr.IntOrString", "Pods that may be unavailable after an eviction (number or percentage)."),
    selector: ref(`${META}.LabelSelector`, "The pods the budget covers."),
    unhealthyPodEvictionPolicy: str("IfHealthyBudget or AlwaysAllow."),
  }),
  "io.k8s.api.policy.v1.PodDisruptionBudgetStatus": openObject("The observed state of a PodDisruptionBudget (not computed by the emulator)."),
};

/** Definition name of each built-in kind: the first label of the group (`rbac` for rbac.authorization.k8s.io). */
export function definitionName(group: string, version: string, kind: string): string {
  return `${group === "" ? CORE.replace(".v1", `.${version}`) : `io.k8s.api.${group.split(".")[0]}.${version}`}.${kind}`;
}
