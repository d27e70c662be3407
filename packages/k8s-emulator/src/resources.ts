// What the generic code knows of every served type (its descriptor); each type's own rules are
// in its module under kinds/ (kinds/strategy.ts), and kinds/index.ts finds a type.

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

export function groupVersion(rt: ResourceType): string {
  return rt.group ? `${rt.group}/${rt.version}` : rt.version;
}

/** Key used in the store and in error details, e.g. `deployments.apps`. */
export function resourceKey(rt: ResourceType): string {
  return rt.group ? `${rt.resource}.${rt.group}` : rt.resource;
}
