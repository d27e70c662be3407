// cilium.io/v2 CiliumNetworkPolicy and CiliumClusterwideNetworkPolicy, custom resources: the
// apiextensions-apiserver's pkg/registry/customresource/strategy.go (status subresource,
// generation on any change outside metadata and status, updates must carry a
// resourceVersion) with their structural schema (cilium-schema.ts). The two differ only in
// scope, as Cilium's two CRDs do.
import { CILIUM_POLICY_SCHEMA } from "../cilium-schema.ts";
import { defineKind, type KindStrategy } from "./strategy.ts";

function ciliumPolicy(kind: string, resource: string, namespaced: boolean, shortNames: string[]): KindStrategy {
  return defineKind({
    group: "cilium.io",
    version: "v2",
    kind,
    resource,
    namespaced,
    shortNames,
    categories: ["cilium", "ciliumpolicy"],
    statusSubresource: true,
    generation: "nonMetadata",
    allowUnconditionalUpdate: false,
    schema: CILIUM_POLICY_SCHEMA,
  });
}

export const ciliumNetworkPolicies = ciliumPolicy("CiliumNetworkPolicy", "ciliumnetworkpolicies", true, ["cnp", "ciliumnp"]);
export const ciliumClusterwideNetworkPolicies = ciliumPolicy("CiliumClusterwideNetworkPolicy", "ciliumclusterwidenetworkpolicies", false, ["ccnp"]);
