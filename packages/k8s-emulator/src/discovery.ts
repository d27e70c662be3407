// Legacy (non-aggregated) discovery documents. KubernetesObjectApi resolves a
// kind to its plural resource name and scope through GET /api/v1 and
// GET /apis/<group>/<version>, so these must list every served resource.
import { createHash } from "node:crypto";
import { KINDS } from "./kinds/index.ts";
import { subresourcesOf } from "./kinds/strategy.ts";
import { VERBS, groupVersion, type ResourceType } from "./resources.ts";
import type { JsonObject } from "./util.ts";

/** The version reported by GET /version. */
export const SERVER_VERSION = {
  major: "1",
  minor: "31",
  gitVersion: "v1.31.0",
  gitCommit: "0000000000000000000000000000000000000000",
  gitTreeState: "clean",
  buildDate: "2024-08-13T07:28:49Z",
  goVersion: "go1.22.5",
  compiler: "gc",
  platform: "linux/amd64",
};

function groups(): Map<string, string[]> {
  const byGroup = new Map<string, string[]>();
  for (const rt of KINDS) {
    if (!rt.group) continue;
    const versions = byGroup.get(rt.group) ?? [];
    if (!versions.includes(rt.version)) versions.push(rt.version);
    byGroup.set(rt.group, versions);
  }
  return byGroup;
}

function apiGroup(name: string, versions: string[]): JsonObject {
  const list = versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
  return { name, versions: list, preferredVersion: list[0] };
}

export function apiVersions(serverAddress: string): JsonObject {
  return {
    kind: "APIVersions",
    versions: ["v1"],
    serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress }],
  };
}

export function apiGroupList(): JsonObject {
  return {
    kind: "APIGroupList",
    apiVersion: "v1",
    groups: [...groups()].map(([name, versions]) => apiGroup(name, versions)),
  };
}

/** GET /apis/<group>: undefined when the group is not served. */
export function apiGroupDoc(group: string): JsonObject | undefined {
  const versions = groups().get(group);
  if (!versions) return undefined;
  return { kind: "APIGroup", apiVersion: "v1", ...apiGroup(group, versions) };
}

function storageVersionHash(rt: ResourceType): string {
  return createHash("sha256")
    .update(`${groupVersion(rt)}/${rt.kind}`)
    .digest("base64")
    .slice(0, 11);
}

/** GET /api/v1 or /apis/<group>/<version>: undefined when not served. */
export function apiResourceList(group: string, version: string): JsonObject | undefined {
  const types = KINDS.filter((rt) => rt.group === group && rt.version === version);
  if (types.length === 0) return undefined;
  const resources: JsonObject[] = [];
  for (const rt of types) {
    // The main resource must come before its subresources: the client picks the
    // first entry whose kind matches.
    resources.push({
      name: rt.resource,
      singularName: rt.singular,
      namespaced: rt.namespaced,
      kind: rt.kind,
      verbs: rt.noCollectionDelete ? VERBS.filter((v) => v !== "deletecollection") : VERBS,
      ...(rt.shortNames.length ? { shortNames: rt.shortNames } : {}),
      ...(rt.categories.length ? { categories: rt.categories } : {}),
      storageVersionHash: storageVersionHash(rt),
    });
    for (const sub of subresourcesOf(rt)) {
      const base = { name: `${rt.resource}/${sub}`, singularName: "", namespaced: rt.namespaced };
      if (sub === "status") resources.push({ ...base, kind: rt.kind, verbs: ["get", "patch", "update"] });
      else if (sub === "scale") resources.push({ ...base, group: "autoscaling", version: "v1", kind: "Scale", verbs: ["get", "patch", "update"] });
      else resources.push({ ...base, group: "authentication.k8s.io", version: "v1", kind: "TokenRequest", verbs: ["create"] });
    }
  }
  return { kind: "APIResourceList", apiVersion: "v1", groupVersion: group ? `${group}/${version}` : version, resources };
}
