// apps/v1 Deployment: pkg/registry/apps/deployment/strategy.go (generation on spec changes,
// status subresource, immutable selector), defaults from pkg/apis/apps/v1/defaults.go,
// validation from pkg/apis/apps/validation/validation.go, columns from printDeployment.
import { defaultPodSpec, objectField, setDefault } from "../defaults.ts";
import type { FieldError } from "../errors.ts";
import { APPS, CORE, META, bool, int, keyedList, obj, ref, resource, str } from "../openapi-schemas.ts";
import { AGE, NAME, templateColumns, age, num, specOf, statusOf, templateCells } from "../table.ts";
import { deepEqual, isObject, type KubeObject } from "../util.ts";
import { intOrPercentProblem, validateContainers } from "../validation.ts";
import { labelSelectorFromObject } from "@flotilla/labels";
import { replicasScale } from "./scale.ts";
import { defineKind } from "./strategy.ts";

const isZero = (v: unknown) => v === 0 || v === "0%";

/** ValidateRollingUpdateDeployment (pkg/apis/apps/validation/validation.go). */
function validateRollingUpdate(ru: Record<string, unknown>, field: string, errors: FieldError[]): void {
  const surgeProblem = intOrPercentProblem(ru.maxSurge, false);
  if (surgeProblem) errors.push({ field: `${field}.maxSurge`, type: "Invalid value", value: ru.maxSurge, detail: surgeProblem });
  const unavailableProblem = intOrPercentProblem(ru.maxUnavailable, true);
  if (unavailableProblem) errors.push({ field: `${field}.maxUnavailable`, type: "Invalid value", value: ru.maxUnavailable, detail: unavailableProblem });
  if (isZero(ru.maxSurge) && isZero(ru.maxUnavailable)) {
    errors.push({ field: `${field}.maxUnavailable`, type: "Invalid value", value: ru.maxUnavailable, detail: "may not be 0 when `maxSurge` is 0" });
  }
}

/** ValidateDeploymentSpec: replicas, a selector that matches the template's labels, containers, the rolling update. */
function validateDeployment(o: KubeObject): FieldError[] {
  const errors: FieldError[] = [];
  const spec = isObject(o.spec) ? o.spec : {};
  const replicas = spec.replicas;
  if (replicas !== undefined && (!Number.isInteger(replicas) || (replicas as number) < 0)) {
    errors.push({ field: "spec.replicas", type: "Invalid value", value: replicas, detail: "must be greater than or equal to 0" });
  }
  const template = isObject(spec.template) ? spec.template : {};
  const tmeta = isObject(template.metadata) ? template.metadata : {};
  const labels = (isObject(tmeta.labels) ? tmeta.labels : {}) as Record<string, string>;
  const selector = spec.selector;
  if (!isObject(selector)) {
    errors.push({ field: "spec.selector", type: "Required value", detail: "" });
  } else if (
    Object.keys(isObject(selector.matchLabels) ? selector.matchLabels : {}).length +
      (Array.isArray(selector.matchExpressions) ? selector.matchExpressions.length : 0) ===
    0
  ) {
    errors.push({ field: "spec.selector", type: "Invalid value", value: selector, detail: "empty selector is invalid for deployment" });
  }
  // Checked whatever the selector's own errors, as upstream: a missing selector matches no
  // labels (LabelSelectorAsSelector(nil) is labels.Nothing()), an empty one matches all.
  if (!isObject(selector) || !labelSelectorFromObject(selector as Parameters<typeof labelSelectorFromObject>[0])(labels)) {
    errors.push({ field: "spec.template.metadata.labels", type: "Invalid value", value: labels, detail: "`selector` does not match template `labels`" });
  }
  const podSpec = isObject(template.spec) ? template.spec : {};
  validateContainers(podSpec.containers, "spec.template.spec.containers", errors);
  const strategy = isObject(spec.strategy) ? spec.strategy : {};
  if (isObject(strategy.rollingUpdate)) validateRollingUpdate(strategy.rollingUpdate, "spec.strategy.rollingUpdate", errors);
  return errors;
}

export const deployments = defineKind({
  group: "apps",
  version: "v1",
  kind: "Deployment",
  resource: "deployments",
  namespaced: true,
  shortNames: ["deploy"],
  categories: ["all"],
  statusSubresource: true,
  generation: "spec",
  scale: replicasScale,
  definitions: {
    [`${APPS}.Deployment`]: resource("Deployment enables declarative updates for Pods and ReplicaSets.", `${APPS}.DeploymentSpec`, `${APPS}.DeploymentStatus`),
    [`${APPS}.DeploymentSpec`]: obj(
      "DeploymentSpec is the specification of the desired behavior of the Deployment.",
      {
        minReadySeconds: int("Minimum number of seconds a new pod must be ready without crashing to be considered available. Defaults to 0."),
        paused: bool("Indicates that the deployment is paused."),
        progressDeadlineSeconds: int(
          "The maximum time in seconds for a deployment to make progress before it is considered to be failed (reason ProgressDeadlineExceeded in the Progressing condition). Defaults to 600s.",
        ),
        replicas: int("Number of desired pods. Defaults to 1."),
        revisionHistoryLimit: int("The number of old ReplicaSets to retain to allow rollback. Defaults to 10."),
        selector: ref(`${META}.LabelSelector`, "Label selector for pods. It must match the pod template's labels."),
        strategy: {
          ...ref(`${APPS}.DeploymentStrategy`, "The deployment strategy to use to replace existing pods with new ones."),
          "x-kubernetes-patch-strategy": "retainKeys",
        },
        template: ref(`${CORE}.PodTemplateSpec`, "Template describes the pods that will be created."),
      },
      ["selector", "template"],
    ),
    [`${APPS}.DeploymentStrategy`]: obj("DeploymentStrategy describes how to replace existing pods with new ones.", {
      rollingUpdate: ref(`${APPS}.RollingUpdateDeployment`, "Rolling update config params. Present only if type = RollingUpdate."),
      type: str('Type of deployment: "Recreate" or "RollingUpdate". Default is RollingUpdate.', { enum: ["Recreate", "RollingUpdate"] }),
    }),
    [`${APPS}.RollingUpdateDeployment`]: obj("Spec to control the desired behavior of rolling update.", {
      maxSurge: ref(
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
        "The maximum number of pods that can be scheduled above the desired number of pods (number or percentage, rounded up). Defaults to 25%.",
      ),
      maxUnavailable: ref(
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
        "The maximum number of pods that can be unavailable during the update (number or percentage, rounded down). Defaults to 25%.",
      ),
    }),
    [`${APPS}.DeploymentStatus`]: obj("DeploymentStatus is the most recently observed status of the Deployment.", {
      observedGeneration: { type: "integer", format: "int64", description: "The generation observed by the deployment controller." },
      replicas: int("Total number of non-terminated pods targeted by this deployment (their labels match the selector)."),
      updatedReplicas: int("Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
      readyReplicas: int("Number of pods targeted by this Deployment with a Ready Condition."),
      availableReplicas: int("Total number of available pods (ready for at least minReadySeconds)."),
      unavailableReplicas: int("Total number of unavailable pods targeted by this deployment."),
      collisionCount: int("Count of hash collisions for the Deployment."),
      conditions: keyedList(`${APPS}.DeploymentCondition`, "type", "Represents the latest available observations of a deployment's current state."),
    }),
    [`${APPS}.DeploymentCondition`]: obj(
      "DeploymentCondition describes the state of a deployment at a certain point.",
      {
        type: str("Type of deployment condition: Available, Progressing or ReplicaFailure."),
        status: str("Status of the condition, one of True, False, Unknown."),
        reason: str("The reason for the condition's last transition."),
        message: str("A human readable message indicating details about the transition."),
        lastUpdateTime: ref(`${META}.Time`, "The last time this condition was updated."),
        lastTransitionTime: ref(`${META}.Time`, "Last time the condition transitioned from one status to another."),
      },
      ["type", "status"],
    ),
  },
  /** SetDefaults_Deployment, then the pod template's. */
  defaults(d) {
    const spec = objectField(d, "spec");
    setDefault(spec, "replicas", 1);
    setDefault(spec, "revisionHistoryLimit", 10);
    setDefault(spec, "progressDeadlineSeconds", 600);
    const strategy = objectField(spec, "strategy");
    setDefault(strategy, "type", "RollingUpdate");
    if (strategy.type === "RollingUpdate") {
      const ru = objectField(strategy, "rollingUpdate");
      setDefault(ru, "maxUnavailable", "25%");
      setDefault(ru, "maxSurge", "25%");
    }
    const template = objectField(spec, "template");
    objectField(template, "metadata");
    defaultPodSpec(objectField(template, "spec"));
  },
  validate: validateDeployment,
  validateUpdate(old, o) {
    const selector = (x: KubeObject) => (isObject(x.spec) ? x.spec.selector : undefined);
    if (deepEqual(selector(old), selector(o))) return [];
    return [{ field: "spec.selector", type: "Invalid value", value: selector(o), detail: "field is immutable" }];
  },
  zeroStatus: {},
  printer: {
    columns: [
      NAME,
      { name: "Ready", type: "string", description: "Number of the pod with ready state", priority: 0 },
      {
        name: "Up-to-date",
        type: "string",
        description: "Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
        priority: 0,
      },
      {
        name: "Available",
        type: "string",
        description: "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.",
        priority: 0,
      },
      AGE,
      ...templateColumns(
        "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.",
      ),
    ],
    cells: (o, now) => [
      o.metadata.name,
      `${num(statusOf(o).readyReplicas)}/${num(specOf(o).replicas ?? 1)}`,
      num(statusOf(o).updatedReplicas),
      num(statusOf(o).availableReplicas),
      age(o, now),
      ...templateCells(o),
    ],
  },
});
