// @flotilla/agent/kubernetes: the parts that load @kubernetes/client-node (some 80 MB of RSS).
export { KubernetesTarget, loadKubeConfig, PooledKubeConfig } from "./targets/kubernetes.ts";
export { Observer, type ObjectChange, type ObserverOptions, type RestartReason } from "./observer.ts";
