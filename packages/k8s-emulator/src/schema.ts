// Structural OpenAPI v3 schemas: validation and pruning as the API server
// does them for custom resources (apiextensions-apiserver: pkg/apiserver/
// validation for the messages, which come from kube-openapi's validate
// package; pkg/apiserver/schema/pruning for dropping unknown fields).
import type { FieldError } from "./errors.ts";
import { isObject, type JsonObject } from "./util.ts";

export interface Schema {
  type?: "object" | "array" | "string" | "integer" | "number" | "boolean";
  description?: string;
  format?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: Schema | boolean;
  items?: Schema;
  required?: string[];
  enum?: unknown[];
  pattern?: string;
  maximum?: number;
  minimum?: number;
  /** Only `required` alternatives are supported, as CRDs mostly use them. */
  oneOf?: Schema[];
  $ref?: string;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  "x-kubernetes-int-or-string"?: boolean;
  "x-kubernetes-embedded-resource"?: boolean;
  [extension: `x-${string}`]: unknown;
}

function jsonType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function typeMatches(schema: Schema, value: unknown): boolean {
  if (schema["x-kubernetes-int-or-string"]) return typeof value === "string" || Number.isInteger(value);
  if (!schema.type) return true;
  const actual = jsonType(value);
  return actual === schema.type || (schema.type === "number" && actual === "integer");
}

const child = (path: string, key: string) => (path ? `${path}.${key}` : key);

/** Field errors of `value` against `schema`, with the API server's wording. */
export function validateSchema(schema: Schema, value: unknown, path: string, errors: FieldError[]): void {
  if (!typeMatches(schema, value)) {
    const actual = jsonType(value);
    errors.push({ field: path, type: "Invalid value", value: actual, detail: `${path} in body must be of type ${schema.type}: "${actual}"` });
    return;
  }
  if (schema.enum && !schema.enum.includes(value)) {
    errors.push({ field: path, type: "Unsupported value", value, detail: `supported values: ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}` });
  }
  if (schema.pattern && typeof value === "string" && !new RegExp(schema.pattern).test(value)) {
    errors.push({ field: path, type: "Invalid value", value, detail: `${path} in body should match '${schema.pattern}'` });
  }
  if (typeof value === "number") {
    if (schema.maximum !== undefined && value > schema.maximum) {
      errors.push({ field: path, type: "Invalid value", value, detail: `${path} in body should be less than or equal to ${schema.maximum}` });
    }
    if (schema.minimum !== undefined && value < schema.minimum) {
      errors.push({ field: path, type: "Invalid value", value, detail: `${path} in body should be greater than or equal to ${schema.minimum}` });
    }
  }
  if (Array.isArray(value) && schema.items) {
    for (const [i, item] of value.entries()) validateSchema(schema.items, item, `${path}[${i}]`, errors);
  }
  if (!isObject(value)) return;
  for (const name of schema.required ?? []) {
    if (value[name] === undefined) errors.push({ field: child(path, name), type: "Required value", detail: "" });
  }
  if (schema.oneOf) {
    const matching = schema.oneOf.filter((alt) => (alt.required ?? []).every((name) => value[name] !== undefined)).length;
    if (matching !== 1) {
      const found = matching === 0 ? "Found none valid" : `Found ${matching} valid alternatives`;
      errors.push({ field: path, type: "Invalid value", value: "object", detail: `${path} in body must validate one and only one schema (oneOf). ${found}` });
    }
  }
  for (const [key, v] of Object.entries(value)) {
    const sub = schema.properties?.[key] ?? (isObject(schema.additionalProperties) ? schema.additionalProperties : undefined);
    if (sub) validateSchema(sub, v, child(path, key), errors);
  }
}

/**
 * Drops fields the schema does not declare (structural pruning) and returns
 * their paths. apiVersion, kind and metadata of the root are kept.
 */
export function pruneUnknown(schema: Schema, value: unknown, path = "", root = true): string[] {
  const dropped: string[] = [];
  if (Array.isArray(value) && schema.items) {
    for (const [i, item] of value.entries()) dropped.push(...pruneUnknown(schema.items!, item, `${path}[${i}]`, false));
    return dropped;
  }
  if (!isObject(value) || schema["x-kubernetes-preserve-unknown-fields"]) return dropped;
  for (const key of Object.keys(value)) {
    if (root && (key === "apiVersion" || key === "kind" || key === "metadata")) continue;
    const sub = schema.properties?.[key] ?? (isObject(schema.additionalProperties) ? schema.additionalProperties : undefined);
    if (sub) dropped.push(...pruneUnknown(sub, (value as JsonObject)[key], child(path, key), false));
    else if (schema.additionalProperties !== true) {
      delete value[key];
      dropped.push(child(path, key));
    }
  }
  return dropped;
}
