// autoscaling/v2 HorizontalPodAutoscaler: pkg/registry/autoscaling/horizontalpodautoscaler/strategy.go
// (status subresource, generation on spec changes), defaults from pkg/apis/autoscaling/v2/defaults.go
// (minReplicas 1, a CPU target of 80% when no metric is given; behavior is filled in only when
// given), validation from pkg/apis/autoscaling/validation/validation.go, columns from
// printHorizontalPodAutoscaler. The controller that acts on it is autoscaler.ts.
import { objectField, setDefault } from "../defaults.ts";
import type { FieldError } from "../errors.ts";
import { META, int, keyedList, list, obj, openObject, ref, resource, str } from "../openapi-schemas.ts";
import { AGE, NAME, age, num, specOf, statusOf } from "../table.ts";
import { isObject, type JsonObject, type KubeObject } from "../util.ts";
import { defineKind } from "./strategy.ts";

const V2 = "io.k8s.api.autoscaling.v2";
/** autoscaling.DefaultCPUUtilization. */
const DEFAULT_CPU_UTILIZATION = 80;
const METRIC_SOURCE_TYPES = ["ContainerResource", "External", "Object", "Pods", "Resource"];
const TARGET_TYPES = ["AverageValue", "Utilization", "Value"];

/** validateMetricTarget for a Resource metric (the one source the emulator's controller reads). */
function validateResourceMetric(resource: unknown, field: string, errors: FieldError[]): void {
  if (!isObject(resource)) return;
  if (!resource.name) errors.push({ field: `${field}.name`, type: "Required value", detail: "must specify a resource name" });
  const target = isObject(resource.target) ? resource.target : {};
  if (!target.type) errors.push({ field: `${field}.target.type`, type: "Required value", detail: "must specify a metric target type" });
  else if (!TARGET_TYPES.includes(String(target.type)))
    errors.push({ field: `${field}.target.type`, type: "Invalid value", value: target.type, detail: "must be either Utilization, Value, or AverageValue" });
  if (target.type === "Utilization" && target.averageUtilization === undefined) {
    errors.push({ field: `${field}.target.averageUtilization`, type: "Required value", detail: "must set either a target raw value or a target utilization" });
  }
  const utilization = target.averageUtilization;
  if (utilization !== undefined && !(Number.isInteger(utilization) && (utilization as number) >= 1)) {
    errors.push({ field: `${field}.target.averageUtilization`, type: "Invalid value", value: utilization, detail: "must be greater than 0" });
  }
}

/** validateHorizontalPodAutoscalerSpec: replica bounds, the target reference, each metric's source. */
function validateAutoscaler(o: KubeObject): FieldError[] {
  const errors: FieldError[] = [];
  const spec = specOf(o);
  const { minReplicas, maxReplicas } = spec;
  if (minReplicas !== undefined && !(Number.isInteger(minReplicas) && (minReplicas as number) >= 1)) {
    errors.push({ field: "spec.minReplicas", type: "Invalid value", value: minReplicas, detail: "must be greater than or equal to 1" });
  }
  if (!(Number.isInteger(maxReplicas) && (maxReplicas as number) >= 1)) {
    errors.push({ field: "spec.maxReplicas", type: "Invalid value", value: maxReplicas ?? 0, detail: "must be greater than 0" });
  } else if (typeof minReplicas === "number" && (maxReplicas as number) < minReplicas) {
    errors.push({ field: "spec.maxReplicas", type: "Invalid value", value: maxReplicas, detail: "must be greater than or equal to `minReplicas`" });
  }
  const target = isObject(spec.scaleTargetRef) ? spec.scaleTargetRef : {};
  for (const part of ["kind", "name"]) {
    if (!target[part]) errors.push({ field: `spec.scaleTargetRef.${part}`, type: "Required value", detail: "" });
  }
  const metrics = Array.isArray(spec.metrics) ? spec.metrics : [];
  for (const [index, metric] of metrics.entries()) {
    const field = `spec.metrics[${index}]`;
    const type = isObject(metric) ? metric.type : undefined;
    if (!type) errors.push({ field: `${field}.type`, type: "Required value", detail: "must specify a metric source type" });
    else if (!METRIC_SOURCE_TYPES.includes(String(type)))
      errors.push({
        field: `${field}.type`,
        type: "Unsupported value",
        value: type,
        detail: `supported values: ${METRIC_SOURCE_TYPES.map((t) => `"${t}"`).join(", ")}`,
      });
    else if (type === "Resource") {
      if (!isObject((metric as JsonObject).resource))
        errors.push({ field: `${field}.resource`, type: "Required value", detail: "must populate information for the given metric source" });
      validateResourceMetric((metric as JsonObject).resource, `${field}.resource`, errors);
    }
  }
  return errors;
}

/** formatHPAMetrics: "cpu: 45%/70%" per Resource metric ("<unknown>" before a measurement), at most two. */
function targetsCell(o: KubeObject): string {
  const specs = (Array.isArray(specOf(o).metrics) ? specOf(o).metrics : []) as JsonObject[];
  if (specs.length === 0) return "<none>";
  const statuses = (Array.isArray(statusOf(o).currentMetrics) ? statusOf(o).currentMetrics : []) as JsonObject[];
  const cells = specs.map((metric, i) => {
    if (metric.type !== "Resource" || !isObject(metric.resource)) return "<unknown type>";
    const target = (metric.resource.target ?? {}) as JsonObject;
    const current = ((statuses[i]?.resource as JsonObject | undefined)?.current ?? {}) as JsonObject;
    if (target.averageValue !== undefined) return `${metric.resource.name}: ${current.averageValue ?? "<unknown>"}/${target.averageValue}`;
    const shown = typeof current.averageUtilization === "number" ? `${current.averageUtilization}%` : "<unknown>";
    return `${metric.resource.name}: ${shown}/${typeof target.averageUtilization === "number" ? `${target.averageUtilization}%` : "<auto>"}`;
  });
  const shown = cells.slice(0, 2).join(", ");
  return cells.length > 2 ? `${shown} + ${cells.length - 2} more...` : shown;
}

export const horizontalPodAutoscalers = defineKind({
  group: "autoscaling",
  version: "v2",
  kind: "HorizontalPodAutoscaler",
  resource: "horizontalpodautoscalers",
  namespaced: true,
  shortNames: ["hpa"],
  categories: ["all"],
  statusSubresource: true,
  generation: "spec",
  definitions: {
    [`${V2}.HorizontalPodAutoscaler`]: resource(
      "HorizontalPodAutoscaler automatically manages the replica count of a resource with a scale subresource, from the metrics given.",
      `${V2}.HorizontalPodAutoscalerSpec`,
      `${V2}.HorizontalPodAutoscalerStatus`,
    ),
    [`${V2}.HorizontalPodAutoscalerSpec`]: obj(
      "The desired behavior of the autoscaler.",
      {
        scaleTargetRef: ref(`${V2}.CrossVersionObjectReference`, "The resource whose replicas are scaled."),
        minReplicas: int("The lower limit of the replicas. Defaults to 1."),
        maxReplicas: int("The upper limit of the replicas; not less than minReplicas."),
        metrics: {
          ...list(`${V2}.MetricSpec`, "What the desired replica count is computed from (the highest proposal wins)."),
          "x-kubernetes-list-type": "atomic",
        },
        behavior: openObject("Scaling rules up and down (stabilization windows, policies)."),
      },
      ["scaleTargetRef", "maxReplicas"],
    ),
    [`${V2}.CrossVersionObjectReference`]: obj(
      "Identifies the referred resource.",
      { apiVersion: str("API version of the referent."), kind: str("Kind of the referent."), name: str("Name of the referent.") },
      ["kind", "name"],
    ),
    [`${V2}.MetricSpec`]: obj(
      "One metric to scale on.",
      {
        type: str("ContainerResource, External, Object, Pods or Resource."),
        resource: ref(`${V2}.ResourceMetricSource`, "A resource metric (cpu, memory) of the pods, as the resource metrics API reports it."),
        containerResource: openObject("A resource metric of one container of the pods."),
        external: openObject("A metric not tied to a Kubernetes object."),
        object: openObject("A metric describing one Kubernetes object."),
        pods: openObject("A metric of each pod, averaged."),
      },
      ["type"],
    ),
    [`${V2}.ResourceMetricSource`]: obj(
      "A resource metric of the pods.",
      { name: str("The resource: cpu or memory."), target: ref(`${V2}.MetricTarget`, "The target value.") },
      ["name", "target"],
    ),
    [`${V2}.MetricTarget`]: obj(
      "A metric's target value.",
      {
        type: str("Utilization, Value or AverageValue."),
        averageUtilization: int("The target average over the pods, in percent of their request."),
        averageValue: ref("io.k8s.apimachinery.pkg.api.resource.Quantity", "The target average value over the pods."),
        value: ref("io.k8s.apimachinery.pkg.api.resource.Quantity", "The target value."),
      },
      ["type"],
    ),
    [`${V2}.HorizontalPodAutoscalerStatus`]: obj("The autoscaler's last observed state.", {
      observedGeneration: { type: "integer", format: "int64", description: "The most recent generation observed." },
      lastScaleTime: ref(`${META}.Time`, "When the autoscaler last changed the replicas."),
      currentReplicas: int("The replicas of the target, as last seen."),
      desiredReplicas: int("The replicas the autoscaler last computed."),
      currentMetrics: { ...list(`${V2}.MetricStatus`, "The last read state of the metrics."), "x-kubernetes-list-type": "atomic" },
      conditions: keyedList(`${V2}.HorizontalPodAutoscalerCondition`, "type", "AbleToScale, ScalingActive and ScalingLimited."),
    }),
    [`${V2}.MetricStatus`]: openObject("The last read state of one metric."),
    [`${V2}.HorizontalPodAutoscalerCondition`]: obj(
      "The autoscaler's state at a point in time.",
      {
        type: str("AbleToScale, ScalingActive or ScalingLimited."),
        status: str("True, False or Unknown."),
        reason: str("Why the condition last changed."),
        message: str("A human readable message."),
        lastTransitionTime: ref(`${META}.Time`, "When the condition last changed status."),
      },
      ["type", "status"],
    ),
  },
  /** SetDefaults_HorizontalPodAutoscaler. */
  defaults(o) {
    const spec = objectField(o, "spec");
    setDefault(spec, "minReplicas", 1);
    if (!Array.isArray(spec.metrics) || spec.metrics.length === 0) {
      spec.metrics = [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: DEFAULT_CPU_UTILIZATION } } }];
    }
  },
  validate: validateAutoscaler,
  zeroStatus: { desiredReplicas: 0, currentMetrics: null },
  printer: {
    columns: [
      NAME,
      { name: "Reference", type: "string", description: "The resource whose replicas are scaled.", priority: 0 },
      { name: "Targets", type: "string", description: "The metrics scaled on: current/target.", priority: 0 },
      { name: "MinPods", type: "string", description: "The lower limit of the replicas.", priority: 0 },
      { name: "MaxPods", type: "integer", description: "The upper limit of the replicas.", priority: 0 },
      { name: "Replicas", type: "integer", description: "The replicas of the target, as last seen.", priority: 0 },
      AGE,
    ],
    cells: (o, now) => {
      const spec = specOf(o);
      const target = (spec.scaleTargetRef ?? {}) as JsonObject;
      return [
        o.metadata.name,
        `${target.kind ?? ""}/${target.name ?? ""}`,
        targetsCell(o),
        typeof spec.minReplicas === "number" ? String(spec.minReplicas) : "<unset>",
        num(spec.maxReplicas),
        num(statusOf(o).currentReplicas),
        age(o, now),
      ];
    },
  },
});
