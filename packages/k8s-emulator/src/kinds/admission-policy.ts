// admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding:
// pkg/registry/admissionregistration/validatingadmissionpolicy{,binding}/strategy.go:
// cluster-scoped, the policy with a status subresource and a generation bumped by spec changes.
// Stored, never enforced: the emulator evaluates no CEL, so a policy's refusals (such as the
// agent's, deploy/kubernetes/base/agent/admission-policy.yaml) hold on a real API server only
// (docs/emulator-differences.md).
import { obj, openObject, resource } from "../openapi-schemas.ts";
import { defineKind } from "./strategy.ts";

const ADMISSION = "io.k8s.api.admissionregistration.v1";

export const validatingAdmissionPolicies = defineKind({
  group: "admissionregistration.k8s.io",
  version: "v1",
  kind: "ValidatingAdmissionPolicy",
  resource: "validatingadmissionpolicies",
  namespaced: false,
  statusSubresource: true,
  generation: "spec",
  definitions: {
    [`${ADMISSION}.ValidatingAdmissionPolicy`]: resource(
      "Describes an admission validation by CEL expressions (stored, not enforced, by the emulator).",
      `${ADMISSION}.ValidatingAdmissionPolicySpec`,
      `${ADMISSION}.ValidatingAdmissionPolicyStatus`,
    ),
    [`${ADMISSION}.ValidatingAdmissionPolicySpec`]: openObject("The policy: match constraints, conditions, validations."),
    [`${ADMISSION}.ValidatingAdmissionPolicyStatus`]: obj("The policy's type checking and conditions.", {
      observedGeneration: { type: "integer", format: "int64", description: "The generation the status was computed from." },
    }),
  },
});

export const validatingAdmissionPolicyBindings = defineKind({
  group: "admissionregistration.k8s.io",
  version: "v1",
  kind: "ValidatingAdmissionPolicyBinding",
  resource: "validatingadmissionpolicybindings",
  namespaced: false,
  generation: "spec",
  definitions: {
    [`${ADMISSION}.ValidatingAdmissionPolicyBinding`]: resource(
      "Binds a ValidatingAdmissionPolicy to resources (stored, not enforced, by the emulator).",
      `${ADMISSION}.ValidatingAdmissionPolicyBindingSpec`,
      undefined,
    ),
    [`${ADMISSION}.ValidatingAdmissionPolicyBindingSpec`]: openObject("The policy bound, its parameters, match resources and actions."),
  },
});
