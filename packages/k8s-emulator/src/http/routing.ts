// Routing: an API path to the resource, namespace, name and subresource it names, and the
// request's verb, the way the real server's RequestInfoFactory reads them.
import type { Verb } from "../faults.ts";
import { findByPath } from "../kinds/index.ts";
import { subresourcesOf, type KindStrategy } from "../kinds/strategy.ts";

export interface ResourceRoute {
  rt: KindStrategy;
  namespace?: string;
  name?: string;
  subresource?: string;
  /** Path used the deprecated /watch/ prefix. */
  legacyWatch: boolean;
}

/** Splits /api/v1/... and /apis/<g>/<v>/... into group, version and the rest. */
export function splitApiPath(segs: string[]): { group: string; version: string; rest: string[] } | undefined {
  if (segs[0] === "api" && segs.length >= 2) return { group: "", version: segs[1], rest: segs.slice(2) };
  if (segs[0] === "apis" && segs.length >= 3) return { group: segs[1], version: segs[2], rest: segs.slice(3) };
  return undefined;
}

export function resolveRoute(group: string, version: string, rest: string[]): ResourceRoute | undefined {
  let parts = rest;
  let legacyWatch = false;
  if (parts[0] === "watch") {
    legacyWatch = true;
    parts = parts.slice(1);
  }
  let namespace: string | undefined;
  let resource: string;
  let name: string | undefined;
  let subresource: string | undefined;
  // Same disambiguation as upstream: /namespaces/x/status is the namespace's
  // status subresource, /namespaces/x/<resource> a namespaced collection.
  if (parts[0] === "namespaces" && parts.length > 1 && !(parts.length >= 3 && ["status", "finalize"].includes(parts[2]))) {
    if (parts.length === 2) {
      [resource, name] = parts;
    } else {
      namespace = parts[1];
      [resource, name, subresource] = parts.slice(2);
      if (parts.length > 5) return undefined;
    }
  } else {
    if (parts.length === 0 || parts.length > 3) return undefined;
    [resource, name, subresource] = parts;
  }
  const rt = findByPath(group, version, resource);
  if (!rt) return undefined;
  if (namespace !== undefined && !rt.namespaced) return undefined;
  if (rt.namespaced && namespace === undefined && name !== undefined) return undefined;
  if (subresource !== undefined && !subresourcesOf(rt).includes(subresource)) return undefined;
  if (legacyWatch && subresource !== undefined) return undefined;
  return { rt, namespace, name, subresource, legacyWatch };
}

export function verbOf(method: string, route: ResourceRoute, query: Record<string, string>, contentType: string): Verb | undefined {
  const watch = route.legacyWatch || query.watch === "true" || query.watch === "1";
  // TokenRequest is create-only.
  if (route.subresource === "token") return method === "POST" ? "create" : undefined;
  switch (method) {
    case "GET":
      if (watch) return route.subresource ? undefined : "watch";
      return route.name !== undefined ? "get" : "list";
    case "POST":
      return route.name === undefined ? "create" : undefined;
    case "PUT":
      return route.name !== undefined ? "update" : undefined;
    case "PATCH":
      if (route.name === undefined) return undefined;
      return contentType === "application/apply-patch+yaml" ? "apply" : "patch";
    case "DELETE":
      return route.subresource ? undefined : "delete";
    default:
      return undefined;
  }
}
