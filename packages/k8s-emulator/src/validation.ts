// Validation with the real server's messages for the checks client code is
// likely to trip over: object names and labels here (ValidateObjectMeta), each
// kind's own checks in its strategy (kinds/), with the helpers they share.
import type { FieldError } from "./errors.ts";
import type { NameRule, ResourceType } from "./resources.ts";
import { dns1123SubdomainProblem, labelKeyProblem, labelValueProblem } from "@flotilla/labels";
import { isObject, type KubeObject } from "./util.ts";

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

/** ValidateObjectMeta: the name by the type's rule, label and annotation keys and values. */
export function validateMetadata(rt: ResourceType, obj: KubeObject, errors: FieldError[]): void {
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

/** ValidateContainers: at least one, each with a unique DNS-label name and an image. */
export function validateContainers(containers: unknown, field: string, errors: FieldError[]): void {
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

const PERCENT = /^[0-9]+%$/;

/** ValidatePositiveIntOrPercent and IsNotMoreThan100Percent (apps/validation). */
export function intOrPercentProblem(value: unknown, max100: boolean): string | undefined {
  if (typeof value === "string") {
    if (!PERCENT.test(value))
      return "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";
    if (max100 && Number(value.slice(0, -1)) > 100) return "must not be greater than 100%";
    return undefined;
  }
  if (typeof value === "number" && value < 0) return "must be greater than or equal to 0";
  return undefined;
}

/** ValidateLabelSelector (apimachinery's metav1 validation): label keys and values, operators and their values. */
export function labelSelectorErrors(selector: Record<string, unknown>, field: string): FieldError[] {
  const errors: FieldError[] = [];
  for (const [key, value] of Object.entries(isObject(selector.matchLabels) ? selector.matchLabels : {})) {
    const problem = labelKeyProblem(key) ?? (typeof value === "string" ? labelValueProblem(value) : "must be a string");
    if (problem) errors.push({ field: `${field}.matchLabels`, type: "Invalid value", value: labelKeyProblem(key) ? key : value, detail: problem });
  }
  const expressions = Array.isArray(selector.matchExpressions) ? selector.matchExpressions : [];
  expressions.forEach((e: unknown, i) => {
    const at = `${field}.matchExpressions[${i}]`;
    const { key, operator, values } = (isObject(e) ? e : {}) as { key?: unknown; operator?: unknown; values?: unknown };
    const count = Array.isArray(values) ? values.length : 0;
    if (operator === "In" || operator === "NotIn") {
      if (count === 0) errors.push({ field: `${at}.values`, type: "Required value", detail: "must be specified when `operator` is 'In' or 'NotIn'" });
    } else if (operator === "Exists" || operator === "DoesNotExist") {
      if (count > 0) errors.push({ field: `${at}.values`, type: "Forbidden", detail: "may not be specified when `operator` is 'Exists' or 'DoesNotExist'" });
    } else {
      errors.push({ field: `${at}.operator`, type: "Invalid value", value: operator, detail: "not a valid selector operator" });
    }
    const problem = typeof key === "string" ? labelKeyProblem(key) : "must be a string";
    if (problem) errors.push({ field: `${at}.key`, type: "Invalid value", value: key, detail: problem });
  });
  return errors;
}

/** ValidatePortNumOrName (core/validation): a number in range, or an IANA service name. */
export function portNumOrNameProblem(value: unknown): string | undefined {
  if (typeof value === "number") return Number.isInteger(value) && value >= 1 && value <= 65535 ? undefined : "must be between 1 and 65535, inclusive";
  if (typeof value !== "string") return undefined;
  if (value.length > 15) return "must be no more than 15 characters";
  if (!/^[-a-z0-9]+$/.test(value)) return "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)";
  if (!/[a-z]/.test(value)) return "must contain at least one letter (a-z)";
  if (value.includes("--")) return "must not contain consecutive hyphens (-)";
  if (value.startsWith("-") || value.endsWith("-")) return "must not begin or end with a hyphen (-)";
  return undefined;
}
