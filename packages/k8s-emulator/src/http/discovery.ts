// The non-resource endpoints a client reads before it names a resource: /version, the health
// checks, the discovery documents (discovery.ts) and the OpenAPI documents (openapi.ts).
import { apiGroupDoc, apiGroupList, apiResourceList, apiVersions, SERVER_VERSION } from "../discovery.ts";
import { OPENAPI_V2_PROTOBUF, OPENAPI_V2_PROTOBUF_TYPES, openApiV2, openApiV2Protobuf, openApiV3, openApiV3Root } from "../openapi.ts";
import type { JsonObject } from "../util.ts";
import { splitApiPath } from "./routing.ts";

const openApiCache = new Map<string, Buffer>();

/** Builds a document once: they only depend on the served types. */
function cachedDoc(key: string, build: () => Buffer | JsonObject | undefined): Buffer | undefined {
  if (!openApiCache.has(key)) {
    const doc = build();
    if (doc === undefined) return undefined;
    openApiCache.set(key, Buffer.isBuffer(doc) ? doc : Buffer.from(JSON.stringify(doc)));
  }
  return openApiCache.get(key);
}

/** /openapi/v2 (JSON, or protobuf when asked for) and /openapi/v3[/api/v1 | /apis/<g>/<v>]. */
export function openApiGet(segs: string[], accept: string): { type: string; body: Buffer } | undefined {
  const json = (body: Buffer | undefined) => body && { type: "application/json", body };
  if (segs[1] === "v2" && segs.length === 2) {
    if (OPENAPI_V2_PROTOBUF_TYPES.some((t) => accept.includes(t))) return { type: OPENAPI_V2_PROTOBUF, body: cachedDoc("v2.pb", openApiV2Protobuf)! };
    return json(cachedDoc("v2", openApiV2));
  }
  if (segs[1] !== "v3") return undefined;
  if (segs.length === 2) return json(cachedDoc("v3", openApiV3Root));
  const api = splitApiPath(segs.slice(2));
  if (!api || api.rest.length > 0) return undefined;
  return json(cachedDoc(`v3/${api.group}/${api.version}`, () => openApiV3(api.group, api.version)));
}

/** /version, the health checks and the discovery documents; undefined for any other path. */
export function nonResourceGet(segs: string[], serverAddress: () => string): JsonObject | string | undefined {
  const p = segs.join("/");
  if (p === "version") return { ...SERVER_VERSION };
  if (p === "healthz" || p === "livez" || p === "readyz") return "ok";
  if (p === "api") return apiVersions(serverAddress());
  if (p === "apis") return apiGroupList();
  if (segs[0] === "apis" && segs.length === 2) return apiGroupDoc(segs[1]);
  if (segs[0] === "api" && segs.length === 2) return apiResourceList("", segs[1]);
  if (segs[0] === "apis" && segs.length === 3) return apiResourceList(segs[1], segs[2]);
  return undefined;
}
