// policy/v1 PodDisruptionBudget: pkg/registry/policy/poddisruptionbudget/strategy.go (status
// subresource, generation on spec changes, the zero status PrepareForCreate resets to),
// validation from pkg/apis/policy/validation ValidatePodDisruptionBudgetSpec, columns from
// printPodDisruptionBudget. No defaults: policy/v1 leaves both bounds unset when none is
// given. The status is the disruption controller's (disruption.ts).
import type { FieldError } from "../errors.ts";
import { META, int, keyedList, obj, ref, resource, str } from "../openapi-schemas.ts";
import { AGE, NAME, age, num, specOf, statusOf } from "../table.ts";
import { isObject, type KubeObject } from "../util.ts";
import { intOrPercentProblem, labelSelectorErrors } from "../validation.ts";
import { defineKind } from "./strategy.ts";

const UNHEALTHY_POD_EVICTION_POLICIES = ["AlwaysAllow", "IfHealthyBudget"];

/** At most one bound, each a non-negative count or a percentage up to 100%; a valid selector and eviction policy. */
function validateBudget(o: KubeObject): FieldError[] {
  const errors: FieldError[] = [];
  const spec = specOf(o);
  if (spec.minAvailable !== undefined && spec.maxUnavailable !== undefined) {
    errors.push({ field: "spec", type: "Invalid value", value: spec, detail: "minAvailable and maxUnavailable cannot be both set" });
  }
  for (const bound of ["minAvailable", "maxUnavailable"] as const) {
    const problem = spec[bound] === undefined ? undefined : intOrPercentProblem(spec[bound], true);
    if (problem) errors.push({ field: `spec.${bound}`, type: "Invalid value", value: spec[bound], detail: problem });
  }
  if (isObject(spec.selector)) errors.push(...labelSelectorErrors(spec.selector, "spec.selector"));
  const policy = spec.unhealthyPodEvictionPolicy;
  if (policy !== undefined && !UNHEALTHY_POD_EVICTION_POLICIES.includes(policy as string)) {
    const supported = UNHEALTHY_POD_EVICTION_POLICIES.map((p) => JSON.stringify(p)).join(", ");
    errors.push({ field: "spec.unhealthyPodEvictionPolicy", type: "Unsupported value", value: policy, detail: `supported values: ${supported}` });
  }
  return errors;
}

/** An IntOrString bound as kubectl prints it, or N/A. */
const bound = (value: unknown) => (value === undefined || value === null ? "N/A" : String(value));

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
      selector: ref(`${META}.LabelSelector`, "The pods the budget covers; a null or empty selector selects none."),
      unhealthyPodEvictionPolicy: str("IfHealthyBudget or AlwaysAllow."),
    }),
    "io.k8s.api.policy.v1.PodDisruptionBudgetStatus": obj(
      "The observed state of a PodDisruptionBudget, as the disruption controller computes it.",
      {
        observedGeneration: { type: "integer", format: "int64", description: "The generation the status was computed from." },
        disruptedPods: {
          type: "object",
          description: "Pods being evicted, by name, with the time of eviction.",
          additionalProperties: ref(`${META}.Time`, ""),
        },
        disruptionsAllowed: int("Number of pod disruptions that are currently allowed."),
        currentHealthy: int("Current number of healthy pods."),
        desiredHealthy: int("Minimum desired number of healthy pods."),
        expectedPods: int("Total number of pods counted by this disruption budget."),
        conditions: keyedList(`${META}.Condition`, "type", "DisruptionAllowed: whether a pod may be evicted now."),
      },
      ["disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"],
    ),
    [`${META}.Condition`]: obj(
      "An aspect of the current state of a resource.",
      {
        type: str("Type of condition in CamelCase."),
        status: str("True, False or Unknown."),
        observedGeneration: { type: "integer", format: "int64", description: "The generation the condition was set from." },
        lastTransitionTime: ref(`${META}.Time`, "Last time the condition transitioned from one status to another."),
        reason: str("A programmatic identifier of the reason for the last transition."),
        message: str("A human readable message about the transition."),
      },
      ["type", "status", "lastTransitionTime", "reason", "message"],
    ),
  },
  validate: validateBudget,
  // PodDisruptionBudgetStatus's four counts are not omitempty.
  zeroStatus: { disruptionsAllowed: 0, currentHealthy: 0, desiredHealthy: 0, expectedPods: 0 },
  printer: {
    columns: [
      NAME,
      { name: "Min Available", type: "string", description: "The minimum number or percentage of available pods this budget requires.", priority: 0 },
      { name: "Max Unavailable", type: "string", description: "The maximum number or percentage of unavailable pods this budget requires.", priority: 0 },
      { name: "Allowed Disruptions", type: "integer", description: "Calculated number of pods that may be disrupted at this time.", priority: 0 },
      AGE,
    ],
    cells: (o, now) => [o.metadata.name, bound(specOf(o).minAvailable), bound(specOf(o).maxUnavailable), num(statusOf(o).disruptionsAllowed), age(o, now)],
  },
});
