// Every kind the emulator serves, each a KindStrategy in its own module. The generic code
// iterates this list: its order is discovery's (groups and resources) and the OpenAPI
// documents'. A new kind is a new module and one line here.
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
];
