// The CustomResourceDefinition of cilium.io/v2 CiliumNetworkPolicy built from the schema the
// emulator serves, for a real API server without Cilium (flotilla-kube): the agent applies
// and watches the kind on both, validated by the same schema.
import { CILIUM_POLICY_SCHEMA } from "./cilium-schema.ts";

export function ciliumNetworkPolicyCrd(): Record<string, unknown> {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "ciliumnetworkpolicies.cilium.io" },
    spec: {
      group: "cilium.io",
      scope: "Namespaced",
      names: {
        kind: "CiliumNetworkPolicy",
        listKind: "CiliumNetworkPolicyList",
        plural: "ciliumnetworkpolicies",
        singular: "ciliumnetworkpolicy",
        shortNames: ["cnp"],
      },
      versions: [{ name: "v2", served: true, storage: true, schema: { openAPIV3Schema: CILIUM_POLICY_SCHEMA }, subresources: { status: {} } }],
    },
  };
}
