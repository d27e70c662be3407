// policy/v1 PodDisruptionBudget: pkg/registry/policy/poddisruptionbudget/strategy.go: status
// subresource (stored as written, not computed), generation on spec changes.
import { META, obj, openObject, ref, resource, str } from "../openapi-schemas.ts";
import { defineKind } from "./strategy.ts";

export const podDisruptionBudgets = defineKind({
  group: "policy",
  version: "v1",
  kind: "PodDisruptionBudget",
  resource: "poddisruptionbudgets",
  namespaced: true,
  shortNames: ["pdb"],
  statusSubresource: true,
  generation: "spec",
  definitions: {
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
  },
});
