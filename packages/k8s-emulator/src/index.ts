export { KubernetesEmulator, type EmulatorOptions, type TypeRef } from "./emulator.ts";
export { FaultInjector, type Verb, type VerbPattern, type FaultConfig } from "./faults.ts";
export type { RequestLogEntry } from "./http.ts";
export type { KubeObject } from "./util.ts";
export { kubeconfigYaml } from "./kubeconfig.ts";
export { ciliumNetworkPolicyCrd } from "./cilium-crd.ts";
