// The resource types the emulator serves, with the per-type behaviour the real
// API server encodes in each type's registry strategy.
import { CILIUM_POLICY_SCHEMA } from "./cilium-schema.ts";
import type { Schema } from "./schema.ts";

/** 'path': any name usable as a URL path segment (RBAC objects, as `system:discovery`). */
export type NameRule = "subdomain" | "label" | "dns1035" | "path";

export interface ResourceType {
  group: string; // '' for the core group
  version: string;
  resource: string; // plural, as in the URL
  singular: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  nameRule: NameRule;
  /** Has a /status subresource: main-resource writes ignore `.status` and vice versa. */
  statusSubresource: boolean;
  /**
   * How metadata.generation is maintained: 'spec' bumps on spec changes
   * (built-in workloads), 'nonMetadata' bumps on any change outside metadata
   * and status (custom resources), 'none' leaves it unset (namespaces, services).
   */
  generation: "spec" | "nonMetadata" | "none";
  /** PUT without metadata.resourceVersion is allowed (false for custom resources). */
  allowUnconditionalUpdate: boolean;
  /** A custom resource's openAPIV3Schema: objects are pruned and validated against it. */
  schema?: Schema;
}

export const VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

export const RESOURCE_TYPES: readonly ResourceType[] = [
  {
    group: "",
    version: "v1",
    resource: "namespaces",
    singular: "namespace",
    kind: "Namespace",
    listKind: "NamespaceList",
    namespaced: false,
    shortNames: ["ns"],
    categories: [],
    nameRule: "label",
    statusSubresource: true,
    generation: "none",
    allowUnconditionalUpdate: true,
  },
  {
    group: "",
    version: "v1",
    resource: "services",
    singular: "service",
    kind: "Service",
    listKind: "ServiceList",
    namespaced: true,
    shortNames: ["svc"],
    categories: ["all"],
    nameRule: "dns1035",
    statusSubresource: true,
    generation: "none",
    allowUnconditionalUpdate: true,
  },
  {
    group: "apps",
    version: "v1",
    resource: "deployments",
    singular: "deployment",
    kind: "Deployment",
    listKind: "DeploymentList",
    namespaced: true,
    shortNames: ["deploy"],
    categories: ["all"],
    nameRule: "subdomain",
    statusSubresource: true,
    generation: "spec",
    allowUnconditionalUpdate: true,
  },
  // What the rollout controller (rollout.ts) makes of a Deployment: its ReplicaSets and their
  // pods (pkg/registry/apps/replicaset and core/pod strategies: status subresources; a
  // ReplicaSet's generation follows its spec), and the Events it and the kubelets record.
  {
    group: "apps",
    version: "v1",
    resource: "replicasets",
    singular: "replicaset",
    kind: "ReplicaSet",
    listKind: "ReplicaSetList",
    namespaced: true,
    shortNames: ["rs"],
    categories: ["all"],
    nameRule: "subdomain",
    statusSubresource: true,
    generation: "spec",
    allowUnconditionalUpdate: true,
  },
  {
    group: "",
    version: "v1",
    resource: "pods",
    singular: "pod",
    kind: "Pod",
    listKind: "PodList",
    namespaced: true,
    shortNames: ["po"],
    categories: ["all"],
    nameRule: "subdomain",
    statusSubresource: true,
    generation: "none",
    allowUnconditionalUpdate: true,
  },
  {
    group: "",
    version: "v1",
    resource: "events",
    singular: "event",
    kind: "Event",
    listKind: "EventList",
    namespaced: true,
    shortNames: ["ev"],
    categories: [],
    nameRule: "subdomain",
    statusSubresource: false,
    generation: "none",
    allowUnconditionalUpdate: true,
  },
  {
    group: "cilium.io",
    version: "v2",
    resource: "ciliumnetworkpolicies",
    singular: "ciliumnetworkpolicy",
    kind: "CiliumNetworkPolicy",
    listKind: "CiliumNetworkPolicyList",
    namespaced: true,
    shortNames: ["cnp", "ciliumnp"],
    categories: ["cilium", "ciliumpolicy"],
    nameRule: "subdomain",
    statusSubresource: true,
    generation: "nonMetadata",
    allowUnconditionalUpdate: false,
    schema: CILIUM_POLICY_SCHEMA,
  },
  {
    group: "cilium.io",
    version: "v2",
    resource: "ciliumclusterwidenetworkpolicies",
    singular: "ciliumclusterwidenetworkpolicy",
    kind: "CiliumClusterwideNetworkPolicy",
    listKind: "CiliumClusterwideNetworkPolicyList",
    namespaced: false,
    shortNames: ["ccnp"],
    categories: ["cilium", "ciliumpolicy"],
    nameRule: "subdomain",
    statusSubresource: true,
    generation: "nonMetadata",
    allowUnconditionalUpdate: false,
    schema: CILIUM_POLICY_SCHEMA,
  },
  // Plain stored kinds the deployment manifests use: no defaulting or validation beyond
  // metadata (names as in their registry strategies: pkg/apis/<group>/validation).
  {
    group: "",
    version: "v1",
    resource: "serviceaccounts",
    singular: "serviceaccount",
    kind: "ServiceAccount",
    listKind: "ServiceAccountList",
    namespaced: true,
    shortNames: ["sa"],
    categories: [],
    nameRule: "subdomain",
    statusSubresource: false,
    generation: "none",
    allowUnconditionalUpdate: true,
  },
  {
    group: "",
    version: "v1",
    resource: "configmaps",
    singular: "configmap",
    kind: "ConfigMap",
    listKind: "ConfigMapList",
    namespaced: true,
    shortNames: ["cm"],
    categories: [],
    nameRule: "subdomain",
    statusSubresource: false,
    generation: "none",
    allowUnconditionalUpdate: true,
  },
  {
    group: "",
    version: "v1",
    resource: "secrets",
    singular: "secret",
    kind: "Secret",
    listKind: "SecretList",
    namespaced: true,
    shortNames: [],
    categories: [],
    nameRule: "subdomain",
    statusSubresource: false,
    generation: "none",
    allowUnconditionalUpdate: true,
  },
  ...(["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"] as const).map(
    (kind): ResourceType => ({
      group: "rbac.authorization.k8s.io",
      version: "v1",
      resource: `${kind.toLowerCase()}s`,
      singular: kind.toLowerCase(),
      kind,
      listKind: `${kind}List`,
      namespaced: !kind.startsWith("Cluster"),
      shortNames: [],
      categories: [],
      nameRule: "path",
      statusSubresource: false,
      generation: "none",
      allowUnconditionalUpdate: true,
    }),
  ),
  {
    // Leader election's lock (client-go resourcelock.LeaseLock). Strategy as in Kubernetes'
    // pkg/registry/coordination/lease/strategy.go: namespaced, no status subresource, no
    // generation, updates must carry a resourceVersion; names are DNS subdomains.
    group: "coordination.k8s.io",
    version: "v1",
    resource: "leases",
    singular: "lease",
    kind: "Lease",
    listKind: "LeaseList",
    namespaced: true,
    shortNames: [],
    categories: [],
    nameRule: "subdomain",
    statusSubresource: false,
    generation: "none",
    allowUnconditionalUpdate: false,
  },
  {
    // pkg/registry/policy/poddisruptionbudget/strategy.go: status subresource, generation on spec changes.
    group: "policy",
    version: "v1",
    resource: "poddisruptionbudgets",
    singular: "poddisruptionbudget",
    kind: "PodDisruptionBudget",
    listKind: "PodDisruptionBudgetList",
    namespaced: true,
    shortNames: ["pdb"],
    categories: [],
    nameRule: "subdomain",
    statusSubresource: true,
    generation: "spec",
    allowUnconditionalUpdate: true,
  },
];

/** The subresources a type serves: `status`, `scale` on Deployments and ReplicaSets, and `token` (TokenRequest) on ServiceAccounts. */
export function subresourcesOf(rt: ResourceType): string[] {
  const served = rt.statusSubresource ? ["status"] : [];
  if (rt.group === "apps" && (rt.resource === "deployments" || rt.resource === "replicasets")) served.push("scale");
  if (rt.group === "" && rt.resource === "serviceaccounts") served.push("token");
  return served;
}

export function groupVersion(rt: ResourceType): string {
  return rt.group ? `${rt.group}/${rt.version}` : rt.version;
}

/** Key used in the store and in error details, e.g. `deployments.apps`. */
export function resourceKey(rt: ResourceType): string {
  return rt.group ? `${rt.resource}.${rt.group}` : rt.resource;
}

export function findByPath(group: string, version: string, resource: string): ResourceType | undefined {
  return RESOURCE_TYPES.find((rt) => rt.group === group && rt.version === version && rt.resource === resource);
}

/**
 * Resolves a descriptor used by the direct (non-HTTP) API: an apiVersion plus
 * a kind (`Deployment`) or a resource name (`deployments`, `deploy`).
 */
export function findType(apiVersion: string, kindOrResource: string): ResourceType | undefined {
  const lower = kindOrResource.toLowerCase();
  return RESOURCE_TYPES.find(
    (rt) => groupVersion(rt) === apiVersion && (rt.kind === kindOrResource || rt.resource === lower || rt.singular === lower || rt.shortNames.includes(lower)),
  );
}
