// @flotilla/agent/kubernetes: the kubernetes target, the observer and the cluster's client.
export { KubernetesTarget } from "./targets/kubernetes.ts";
export { Observer, type ObjectChange, type ObserverOptions, type RestartReason } from "./observer.ts";
export { KubeApiError, KubeClient, resourcePath, statusCodeOf, type ApiObject, type RestRequest, type WatchEvent } from "./kube-api.ts";
export { inClusterConnection, kubeconfigConnection, kubeconfigConnectionFromString, loadKubeConnection, type KubeConnection } from "./kube-connection.ts";
