// What a request asks beyond its path, read and checked as the API server does: its query
// parameters (dryRun, fieldValidation, fieldManager, limits), DeleteOptions, the patch type its
// content type names, and its body decoded.
import type { IncomingMessage } from "node:http";
import { ApiError, badRequest, invalid, type FieldError } from "../errors.ts";
import type { DeleteOptions, FieldValidation, PatchType } from "../registry.ts";
import { isObject, type JsonObject } from "../util.ts";
import { decodeBody } from "../yaml.ts";

export function queryOf(url: URL): Record<string, string> {
  const q: Record<string, string> = {};
  for (const [k, v] of url.searchParams) q[k] = v;
  return q;
}

export function mediaType(req: IncomingMessage): string {
  return (req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
}

export const PATCH_TYPES: Record<string, PatchType> = {
  "application/apply-patch+yaml": "apply",
  "application/merge-patch+json": "merge",
  "application/strategic-merge-patch+json": "strategic",
  "application/json-patch+json": "json",
};

export function optionsInvalid(kind: string, errors: FieldError[]): ApiError {
  return invalid(kind, "meta.k8s.io", "", errors);
}

export function parseDryRun(query: Record<string, string>, kind: string): boolean {
  const v = query.dryRun;
  if (v === undefined || v === "") return false;
  if (v !== "All") throw optionsInvalid(kind, [{ field: "dryRun", type: "Unsupported value", value: [v], detail: 'supported values: "All"' }]);
  return true;
}

export function parseFieldValidation(query: Record<string, string>, kind: string): FieldValidation | undefined {
  const v = query.fieldValidation;
  if (v === undefined || v === "") return undefined;
  if (v !== "Strict" && v !== "Warn" && v !== "Ignore") {
    throw optionsInvalid(kind, [{ field: "fieldValidation", type: "Unsupported value", value: v, detail: 'supported values: "", "Ignore", "Strict", "Warn"' }]);
  }
  return v;
}

export function parseIntParam(query: Record<string, string>, name: string): number | undefined {
  const v = query[name];
  if (v === undefined || v === "") return undefined;
  if (!/^\d+$/.test(v)) throw badRequest(`invalid ${name} parameter: ${JSON.stringify(v)}`);
  return Number(v);
}

/** fieldManager, or the User-Agent's product token as upstream derives it. */
export function managerName(req: IncomingMessage, query: Record<string, string>): string {
  if (query.fieldManager) return query.fieldManager;
  const ua = req.headers["user-agent"] ?? "";
  return ua.split("/")[0].trim() || "unknown";
}

/** metav1.DeleteOptions from the query and the body (none, or a JSON object), as the server reads them. */
export function deleteOptions(query: Record<string, string>, body: string): DeleteOptions {
  let options: JsonObject = {};
  if (body.trim()) {
    const parsed = decodeJson(body);
    if (!isObject(parsed)) throw badRequest("DeleteOptions must be an object");
    options = parsed;
  }
  const dryRun = parseDryRun(query, "DeleteOptions") || (Array.isArray(options.dryRun) && options.dryRun.includes("All"));
  let propagationPolicy = query.propagationPolicy ?? (options.propagationPolicy as string | undefined);
  const orphan = query.orphanDependents ?? options.orphanDependents;
  if (propagationPolicy === undefined && orphan !== undefined) propagationPolicy = String(orphan) === "true" ? "Orphan" : "Background";
  const preconditions = isObject(options.preconditions) ? (options.preconditions as { uid?: string; resourceVersion?: string }) : undefined;
  return { dryRun, propagationPolicy, preconditions };
}

export function decodeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw badRequest(`the body of the request could not be decoded: ${(err as Error).message}`);
  }
}

export function decodeWriteBody(body: string, contentType: string): unknown {
  if (!body.trim()) throw badRequest("the body of the request was empty");
  if (contentType === "" || contentType === "application/json" || contentType === "*/*") return decodeJson(body);
  if (contentType === "application/yaml") return decodeBody(body);
  throw new ApiError(415, `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml`, {
    details: {},
  });
}
