// Validation with the real server's messages for the checks client code is
// likely to trip over: object names, labels, and the required parts of the
// Deployment and Service specs.
import type { FieldError } from "./errors.ts";
import type { NameRule, ResourceType } from "./resources.ts";
import { dns1123SubdomainProblem, labelKeyProblem, labelSelectorFromObject, labelValueProblem } from "@flotilla/labels";
import { deepEqual, isObject, type KubeObject } from "./util.ts";

const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

export function nameProblem(rule: NameRule, name: string): string | undefined {
  if (rule === "subdomain") {
    return dns1123SubdomainProblem(name);
  } else if (rule === "label") {
    if (name.length > 63) return "must be no more than 63 characters";
    if (!LABEL.test(name)) {
      return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    }
  } else if (rule === "path") {
    // apimachinery path.IsValidPathSegmentName (ValidateRBACName).
    if (name === "." || name === "..") return `may not be '${name}'`;
    for (const bad of ["/", "%"]) if (name.includes(bad)) return `may not contain '${bad}'`;
  } else {
    if (name.length > 63) return "must be no more than 63 characters";
    if (!DNS1035.test(name)) {
      return "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    }
  }
  return undefined;
}

function validateMetadata(rt: ResourceType, obj: KubeObject, errors: FieldError[]): void {
  const name = obj.metadata.name;
  if (!name) {
    errors.push({ field: "metadata.name", type: "Required value", detail: "name or generateName is required" });
  } else {
    const problem = nameProblem(rt.nameRule, name);
    if (problem) errors.push({ field: "metadata.name", type: "Invalid value", value: name, detail: problem });
  }
  for (const [k, v] of Object.entries(obj.metadata.labels ?? {})) {
    const kp = labelKeyProblem(k);
    if (kp) errors.push({ field: "metadata.labels", type: "Invalid value", value: k, detail: kp });
    const vp = typeof v === "string" ? labelValueProblem(v) : "must be a string";
    if (vp) errors.push({ field: "metadata.labels", type: "Invalid value", value: v, detail: vp });
  }
  for (const [k, v] of Object.entries(obj.metadata.annotations ?? {})) {
    const kp = labelKeyProblem(k);
    if (kp) errors.push({ field: "metadata.annotations", type: "Invalid value", value: k, detail: kp });
    if (typeof v !== "string") errors.push({ field: `metadata.annotations`, type: "Invalid value", value: v, detail: "must be a string" });
  }
}

function validateContainers(containers: unknown, field: string, errors: FieldError[]): void {
  if (!Array.isArray(containers) || containers.length === 0) {
    errors.push({ field, type: "Required value", detail: "" });
    return;
  }
  const seen = new Set<string>();
  containers.forEach((c, i) => {
    const f = `${field}[${i}]`;
    if (!isObject(c)) {
      errors.push({ field: f, type: "Invalid value", value: c, detail: "must be an object" });
      return;
    }
    if (typeof c.name !== "string" || c.name === "") errors.push({ field: `${f}.name`, type: "Required value", detail: "" });
    else if (nameProblem("label", c.name)) errors.push({ field: `${f}.name`, type: "Invalid value", value: c.name, detail: nameProblem("label", c.name)! });
    else if (seen.has(c.name)) errors.push({ field: `${f}.name`, type: "Invalid value", value: c.name, detail: "Duplicate value" });
    else seen.add(c.name);
    if (typeof c.image !== "string" || c.image.trim() === "") errors.push({ field: `${f}.image`, type: "Required value", detail: "" });
  });
}

function validateDeployment(obj: KubeObject, errors: FieldError[]): void {
  const spec = isObject(obj.spec) ? obj.spec : {};
  const replicas = spec.replicas;
  if (replicas !== undefined && (!Number.isInteger(replicas) || (replicas as number) < 0)) {
    errors.push({ field: "spec.replicas", type: "Invalid value", value: replicas, detail: "must be greater than or equal to 0" });
  }
  const template = isObject(spec.template) ? spec.template : {};
  const tmeta = isObject(template.metadata) ? template.metadata : {};
  const labels = (isObject(tmeta.labels) ? tmeta.labels : {}) as Record<string, string>;
  const selector = spec.selector;
  if (!isObject(selector) || (!isObject(selector.matchLabels) && !Array.isArray(selector.matchExpressions))) {
    errors.push({ field: "spec.selector", type: "Required value", detail: "" });
  } else if (Object.keys(selector.matchLabels ?? {}).length === 0 && !Array.isArray(selector.matchExpressions)) {
    errors.push({ field: "spec.selector", type: "Invalid value", value: selector, detail: "empty selector is invalid for deployment" });
  } else if (!labelSelectorFromObject(selector as Parameters<typeof labelSelectorFromObject>[0])(labels)) {
    errors.push({ field: "spec.template.metadata.labels", type: "Invalid value", value: labels, detail: "`selector` does not match template `labels`" });
  }
  const podSpec = isObject(template.spec) ? template.spec : {};
  validateContainers(podSpec.containers, "spec.template.spec.containers", errors);
  const strategy = isObject(spec.strategy) ? spec.strategy : {};
  if (isObject(strategy.rollingUpdate)) validateRollingUpdate(strategy.rollingUpdate, "spec.strategy.rollingUpdate", errors);
}

const PERCENT = /^[0-9]+%$/;

/** ValidatePositiveIntOrPercent and IsNotMoreThan100Percent (apps/validation). */
function intOrPercentProblem(value: unknown, max100: boolean): string | undefined {
  if (typeof value === "string") {
    if (!PERCENT.test(value))
      return "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";
    if (max100 && Number(value.slice(0, -1)) > 100) return "must not be greater than 100%";
    return undefined;
  }
  if (typeof value === "number" && value < 0) return "must be greater than or equal to 0";
  return undefined;
}

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

/** ValidatePortNumOrName (core/validation): a number in range, or an IANA service name. */
function portNumOrNameProblem(value: unknown): string | undefined {
  if (typeof value === "number") return Number.isInteger(value) && value >= 1 && value <= 65535 ? undefined : "must be between 1 and 65535, inclusive";
  if (typeof value !== "string") return undefined;
  if (value.length > 15) return "must be no more than 15 characters";
  if (!/^[-a-z0-9]+$/.test(value)) return "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)";
  if (!/[a-z]/.test(value)) return "must contain at least one letter (a-z)";
  if (value.includes("--")) return "must not contain consecutive hyphens (-)";
  if (value.startsWith("-") || value.endsWith("-")) return "must not begin or end with a hyphen (-)";
  return undefined;
}

function validateService(obj: KubeObject, errors: FieldError[]): void {
  const spec = isObject(obj.spec) ? obj.spec : {};
  const type = spec.type ?? "ClusterIP";
  if (!["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"].includes(type as string)) {
    errors.push({
      field: "spec.type",
      type: "Unsupported value",
      value: type,
      detail: 'supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"',
    });
  }
  const ports = spec.ports;
  if ((!Array.isArray(ports) || ports.length === 0) && type !== "ExternalName" && spec.clusterIP !== "None") {
    errors.push({ field: "spec.ports", type: "Required value", detail: "" });
  }
  if (Array.isArray(ports)) {
    ports.forEach((p, i) => {
      const port = isObject(p) ? p.port : undefined;
      if (!Number.isInteger(port) || (port as number) < 1 || (port as number) > 65535) {
        errors.push({ field: `spec.ports[${i}].port`, type: "Invalid value", value: port, detail: "must be between 1 and 65535, inclusive" });
      }
      if (ports.length > 1 && isObject(p) && !p.name) errors.push({ field: `spec.ports[${i}].name`, type: "Required value", detail: "" });
      const target = isObject(p) ? p.targetPort : undefined;
      const targetProblem = portNumOrNameProblem(target);
      if (targetProblem) errors.push({ field: `spec.ports[${i}].targetPort`, type: "Invalid value", value: target, detail: targetProblem });
    });
  }
}

/** Field errors for an object about to be stored (after defaulting). */
export function validateObject(rt: ResourceType, obj: KubeObject): FieldError[] {
  const errors: FieldError[] = [];
  validateMetadata(rt, obj, errors);
  if (rt.kind === "Deployment") validateDeployment(obj, errors);
  if (rt.kind === "Service") validateService(obj, errors);
  return errors;
}

/** Field errors for changes the type forbids on update. */
export function validateUpdate(rt: ResourceType, oldObj: KubeObject, newObj: KubeObject): FieldError[] {
  const errors: FieldError[] = [];
  const spec = (o: KubeObject) => (isObject(o.spec) ? o.spec : {});
  if (rt.kind === "Deployment" && !deepEqual(spec(oldObj).selector, spec(newObj).selector)) {
    errors.push({ field: "spec.selector", type: "Invalid value", value: spec(newObj).selector, detail: "field is immutable" });
  }
  if (rt.kind === "Service" && spec(oldObj).clusterIP && spec(newObj).clusterIP !== spec(oldObj).clusterIP) {
    errors.push({ field: "spec.clusterIPs[0]", type: "Invalid value", value: spec(newObj).clusterIP, detail: "may not change once set" });
  }
  return errors;
}
