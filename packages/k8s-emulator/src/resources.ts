// What the generic code knows of every served type (its descriptor) and how it finds one;
// each type's own rules are in its module under kinds/ (kinds/strategy.ts).
import { KINDS } from "./kinds/index.ts";
import type { KindStrategy } from "./kinds/strategy.ts";

/** 'path': any name usable as a URL path segment (RBAC objects, as `system:discovery`). */
export type NameRule = "subdomain" | "label" | "dns1035" | "path";

export interface ResourceType {
  group: string; // '' for the core group
  version: string;
  resource: string; // plural, as in the URL
  singular: string;
  kind: string;
  listKind: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  nameRule: NameRule;
  /** Has a /status subresource: main-resource writes ignore `.status` and vice versa. */
  statusSubresource: boolean;
  /**
   * How metadata.generation is maintained: 'spec' bumps on spec changes
   * (built-in workloads), 'nonMetadata' bumps on any change outside metadata
   * and status (custom resources), 'none' leaves it unset (namespaces, services).
   */
  generation: "spec" | "nonMetadata" | "none";
  /** PUT without metadata.resourceVersion is allowed (false for custom resources). */
  allowUnconditionalUpdate: boolean;
}

export const VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/** The subresources a type serves: `status` when it has one, then its strategy's others. */
export function subresourcesOf(rt: KindStrategy): string[] {
  return [...(rt.statusSubresource ? ["status"] : []), ...(rt.extraSubresources ?? [])];
}

export function groupVersion(rt: ResourceType): string {
  return rt.group ? `${rt.group}/${rt.version}` : rt.version;
}

/** Key used in the store and in error details, e.g. `deployments.apps`. */
export function resourceKey(rt: ResourceType): string {
  return rt.group ? `${rt.resource}.${rt.group}` : rt.resource;
}

export function findByPath(group: string, version: string, resource: string): KindStrategy | undefined {
  return KINDS.find((rt) => rt.group === group && rt.version === version && rt.resource === resource);
}

/**
 * Resolves a descriptor used by the direct (non-HTTP) API: an apiVersion plus
 * a kind (`Deployment`) or a resource name (`deployments`, `deploy`).
 */
export function findType(apiVersion: string, kindOrResource: string): KindStrategy | undefined {
  const lower = kindOrResource.toLowerCase();
  return KINDS.find(
    (rt) => groupVersion(rt) === apiVersion && (rt.kind === kindOrResource || rt.resource === lower || rt.singular === lower || rt.shortNames.includes(lower)),
  );
}
