// The kinds of objects the observer watches. Kept apart from the observer so that code reading
// its cache (observation.ts) does not load the Kubernetes client, which only the kubernetes
// target needs.

/** A kind the observer watches, and its collection path across all namespaces. */
export interface WatchedKind {
  apiVersion: string;
  kind: string;
  /** e.g. "/apis/apps/v1/deployments". */
  path: string;
}

export const DEPLOYMENTS: WatchedKind = { apiVersion: "apps/v1", kind: "Deployment", path: "/apis/apps/v1/deployments" };
export const SERVICES: WatchedKind = { apiVersion: "v1", kind: "Service", path: "/api/v1/services" };
export const CILIUM_NETWORK_POLICIES: WatchedKind = {
  apiVersion: "cilium.io/v2",
  kind: "CiliumNetworkPolicy",
  path: "/apis/cilium.io/v2/ciliumnetworkpolicies",
};

export const POD_DISRUPTION_BUDGETS: WatchedKind = {
  apiVersion: "policy/v1",
  kind: "PodDisruptionBudget",
  path: "/apis/policy/v1/poddisruptionbudgets",
};

export const HORIZONTAL_POD_AUTOSCALERS: WatchedKind = {
  apiVersion: "autoscaling/v2",
  kind: "HorizontalPodAutoscaler",
  path: "/apis/autoscaling/v2/horizontalpodautoscalers",
};

/** Kinds of the objects the agent applies (Namespaces are shared and not watched). */
export const APPLIED_KINDS: readonly WatchedKind[] = [DEPLOYMENTS, SERVICES, CILIUM_NETWORK_POLICIES, POD_DISRUPTION_BUDGETS, HORIZONTAL_POD_AUTOSCALERS];
