// Every kind the emulator serves, each a KindStrategy in its own module, and how the generic
// code finds one. The generic code iterates this list: its order is discovery's (groups and
// resources) and the OpenAPI documents'. A new kind is a new module and one line here.
import { groupVersion } from "../resources.ts";
import { validatingAdmissionPolicies, validatingAdmissionPolicyBindings } from "./admission-policy.ts";
import { ciliumClusterwideNetworkPolicies, ciliumNetworkPolicies } from "./cilium-policies.ts";
import { configMaps } from "./configmap.ts";
import { deployments } from "./deployment.ts";
import { events } from "./event.ts";
import { horizontalPodAutoscalers } from "./horizontalpodautoscaler.ts";
import { leases } from "./lease.ts";
import { namespaces } from "./namespace.ts";
import { podDisruptionBudgets } from "./poddisruptionbudget.ts";
import { pods } from "./pod.ts";
import { clusterRoleBindings, clusterRoles, roleBindings, roles } from "./rbac.ts";
import { replicaSets } from "./replicaset.ts";
import { secrets } from "./secret.ts";
import { serviceAccounts } from "./serviceaccount.ts";
import { services } from "./service.ts";
import type { KindStrategy } from "./strategy.ts";

export const KINDS: readonly KindStrategy[] = [
  namespaces,
  services,
  deployments,
  replicaSets,
  pods,
  events,
  ciliumNetworkPolicies,
  ciliumClusterwideNetworkPolicies,
  serviceAccounts,
  configMaps,
  secrets,
  roles,
  clusterRoles,
  roleBindings,
  clusterRoleBindings,
  leases,
  podDisruptionBudgets,
  horizontalPodAutoscalers,
  validatingAdmissionPolicies,
  validatingAdmissionPolicyBindings,
];

export function findByPath(group: string, version: string, resource: string): KindStrategy | undefined {
  return KINDS.find((rt) => rt.group === group && rt.version === version && rt.resource === resource);
}

/**
 * Resolves a descriptor used by the direct (non-HTTP) API: an apiVersion plus
 * a kind (`Deployment`) or a resource name (`deployments`, `deploy`).
 */
export function findType(apiVersion: string, kindOrResource: string): KindStrategy | undefined {
  const lower = kindOrResource.toLowerCase();
  return KINDS.find(
    (rt) => groupVersion(rt) === apiVersion && (rt.kind === kindOrResource || rt.resource === lower || rt.singular === lower || rt.shortNames.includes(lower)),
  );
}
