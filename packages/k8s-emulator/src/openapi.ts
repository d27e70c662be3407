// /openapi/v2 and /openapi/v3, enough for kubectl: `kubectl apply` checks in
// the v3 document of a group-version that the PATCH operation of the kind
// takes the fieldValidation query parameter (resource.QueryParamVerifierV3)
// and then leaves schema validation to the server, but it also downloads the
// v2 document first, in protobuf (discovery.OpenAPISchema, Accept
// application/com.github.proto-openapi.spec.v2@v1.0+protobuf); `kubectl
// explain` reads the v3 schemas. The v2 document has the definitions but no
// paths (kubectl uses v2 paths only when the v3 document is unavailable).
import { createHash } from "node:crypto";
import { stringify } from "yaml";
import { SERVER_VERSION } from "./discovery.ts";
import { KINDS } from "./kinds/index.ts";
import type { KindStrategy } from "./kinds/strategy.ts";
import { OBJECT_META, SHARED_DEFINITIONS, definitionName } from "./openapi-schemas.ts";
import { isBuiltIn } from "./registry.ts";
import { groupVersion, type ResourceType } from "./resources.ts";
import type { Schema } from "./schema.ts";
import { isObject, type JsonObject } from "./util.ts";

/** Media types of the v2 protobuf document: client-go asks for the deprecated one. */
export const OPENAPI_V2_PROTOBUF_TYPES = [
  "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
  "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
];
/** What kube-openapi's handler answers for both (the '@' form does not parse as a media type). */
export const OPENAPI_V2_PROTOBUF = OPENAPI_V2_PROTOBUF_TYPES[1];

type Flavor = "v2" | "v3";

/** Every definition a document may refer to: the shared ones and each built-in kind's. */
const DEFINITIONS: Record<string, Schema> = Object.assign({}, SHARED_DEFINITIONS, ...KINDS.map((rt) => rt.definitions ?? {}));

function gvk(rt: ResourceType): JsonObject {
  return { group: rt.group, version: rt.version, kind: rt.kind };
}

/** Definition name of a served type; custom resources are named like upstream (reversed group). */
function typeName(rt: KindStrategy): string {
  if (isBuiltIn(rt)) return definitionName(rt.group, rt.version, rt.kind);
  return `${rt.group.split(".").reverse().join(".")}.${rt.version}.${rt.kind}`;
}

/** The schema of a served type, marked with its group-version-kind. */
function typeSchema(rt: KindStrategy): Schema {
  const base = isBuiltIn(rt) ? DEFINITIONS[typeName(rt)] : customResourceSchema(rt.schema!);
  return { ...base, "x-kubernetes-group-version-kind": [gvk(rt)] };
}

/** A CRD's schema as the server publishes it: metadata refers to ObjectMeta. */
function customResourceSchema(schema: Schema): Schema {
  return { ...schema, properties: { ...schema.properties, metadata: { $ref: OBJECT_META, description: "Standard object's metadata." } } };
}

/** Definitions reachable from `roots`. */
function closure(roots: Record<string, Schema>): Record<string, Schema> {
  const out: Record<string, Schema> = { ...roots };
  const visit = (s: unknown): void => {
    if (Array.isArray(s)) return s.forEach(visit);
    if (!isObject(s)) return;
    if (typeof s.$ref === "string" && !(s.$ref in out)) {
      out[s.$ref] = DEFINITIONS[s.$ref];
      visit(out[s.$ref]);
    }
    for (const v of Object.values(s)) visit(v);
  };
  for (const s of Object.values(roots)) visit(s);
  return out;
}

/** Rewrites `$ref: name` for the document flavor. */
function render(s: unknown, flavor: Flavor): unknown {
  if (Array.isArray(s)) return s.map((x) => render(x, flavor));
  if (!isObject(s)) return s;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(s)) if (k !== "$ref") out[k] = render(v, flavor);
  if (typeof s.$ref !== "string") return out;
  if (flavor === "v2") return { $ref: `#/definitions/${s.$ref}`, ...out };
  const target = { $ref: `#/components/schemas/${s.$ref}` };
  // v3 puts siblings of a reference next to an allOf, as kube-openapi does.
  return Object.keys(out).length ? { ...out, allOf: [target] } : target;
}

function param(name: string, description: string, type = "string"): JsonObject {
  return { name, in: "query", description, schema: { type, uniqueItems: true } };
}

const WRITE_PARAMS = [
  param("dryRun", "When present, modifications are not persisted. Valid value: All."),
  param("fieldManager", "A name associated with the actor or entity that is making these changes."),
  param("fieldValidation", "How to handle unknown or duplicate fields: Ignore, Warn (default) or Strict."),
];

function operations(rt: KindStrategy): Record<string, JsonObject> {
  const ns = rt.namespaced ? "/namespaces/{namespace}" : "";
  const base = `/${rt.group ? `apis/${groupVersion(rt)}` : "api/v1"}${ns}/${rt.resource}`;
  const ref = { $ref: `#/components/schemas/${typeName(rt)}` };
  const body = { content: { "application/json": { schema: ref } }, required: true };
  const ok = { responses: { "200": { description: "OK", content: { "application/json": { schema: ref } } } } };
  const op = (action: string, extra: JsonObject = {}): JsonObject => ({
    operationId: `${action}${rt.kind}`,
    "x-kubernetes-action": action,
    "x-kubernetes-group-version-kind": gvk(rt),
    ...ok,
    ...extra,
  });
  // Custom resources take no strategic merge patch; kubectl picks its patch type from this list.
  const patchTypes = ["application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json"];
  if (isBuiltIn(rt)) patchTypes.push("application/strategic-merge-patch+json");
  const patchBody = { content: Object.fromEntries(patchTypes.map((t) => [t, { schema: { type: "object" } }])), required: true };
  const item = {
    get: op("get"),
    put: op("put", { parameters: WRITE_PARAMS, requestBody: body }),
    patch: op("patch", { parameters: [...WRITE_PARAMS, param("force", 'Force is going to "force" Apply requests.', "boolean")], requestBody: patchBody }),
    delete: op("delete", { parameters: [WRITE_PARAMS[0]] }),
  };
  const paths: Record<string, JsonObject> = {
    [base]: { get: op("list"), post: op("post", { parameters: WRITE_PARAMS, requestBody: body }) },
    [`${base}/{name}`]: item,
  };
  if (rt.statusSubresource) paths[`${base}/{name}/status`] = { get: op("get"), put: item.put, patch: item.patch };
  return paths;
}

function typesOf(group: string, version: string): KindStrategy[] {
  return KINDS.filter((rt) => rt.group === group && rt.version === version);
}

function v3Path(rt: ResourceType): string {
  return rt.group ? `apis/${groupVersion(rt)}` : "api/v1";
}

/**
 * Types kube-openapi writes in v3 as a oneOf of primitive types, without a type of their own
 * (their OpenAPIV3OneOfTypes); v2 keeps `type: string`. kubectl explain names a reference to a
 * schema without a type by the reference: <IntOrString>, <Quantity>.
 */
const V3_ONE_OF: Record<string, string[]> = {
  "io.k8s.apimachinery.pkg.util.intstr.IntOrString": ["integer", "string"],
  "io.k8s.apimachinery.pkg.api.resource.Quantity": ["string", "number"],
};

function v3Schemas(schemas: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(schemas).map(([name, schema]) => {
      const types = V3_ONE_OF[name];
      if (!types || !isObject(schema)) return [name, schema];
      const { type: _type, ...rest } = schema;
      return [name, { ...rest, oneOf: types.map((type) => ({ type })) }];
    }),
  );
}

/** GET /openapi/v3/<api/v1 | apis/g/v>: undefined when the group-version is not served. */
export function openApiV3(group: string, version: string): JsonObject | undefined {
  const types = typesOf(group, version);
  if (types.length === 0) return undefined;
  const schemas = closure(Object.fromEntries(types.map((rt) => [typeName(rt), typeSchema(rt)])));
  return {
    openapi: "3.0.0",
    info: { title: "Kubernetes", version: SERVER_VERSION.gitVersion },
    paths: Object.assign({}, ...types.map(operations)),
    components: { schemas: render(v3Schemas(schemas), "v3") },
  };
}

/** GET /openapi/v3: the group-versions, each with a content hash for caching clients. */
export function openApiV3Root(): JsonObject {
  const paths: JsonObject = {};
  for (const rt of KINDS) {
    const path = v3Path(rt);
    if (path in paths) continue;
    const hash = createHash("sha512")
      .update(JSON.stringify(openApiV3(rt.group, rt.version)))
      .digest("hex")
      .toUpperCase();
    paths[path] = { serverRelativeURL: `/openapi/v3/${path}?hash=${hash}` };
  }
  return { paths };
}

/** The /openapi/v2 document (JSON form). */
export function openApiV2(): JsonObject {
  const definitions = closure(Object.fromEntries(KINDS.map((rt) => [typeName(rt), typeSchema(rt)])));
  return {
    swagger: "2.0",
    info: { title: "Kubernetes", version: SERVER_VERSION.gitVersion },
    paths: {},
    definitions: render(definitions, "v2"),
  };
}

// --- protobuf encoding of the v2 document (gnostic's openapi_v2.Document) ---

function varint(n: number): Buffer {
  const out: number[] = [];
  let v = n;
  while (v > 127) {
    out.push((v & 127) | 128);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return Buffer.from(out);
}

const key = (field: number, wire: number) => varint(field * 8 + wire);

function bytesField(field: number, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  return Buffer.concat([key(field, 2), varint(body.length), body]);
}

const stringField = (field: number, s: string) => bytesField(field, Buffer.from(s, "utf8"));

function doubleField(field: number, d: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(d);
  return Buffer.concat([key(field, 1), b]);
}

/** openapi_v2.Any carries values as YAML text (field 2). */
const anyYaml = (value: unknown) => stringField(2, stringify(value));

/** A NamedSchema / NamedAny entry: name (1) and value (2). */
const named = (name: string, value: Buffer) => Buffer.concat([stringField(1, name), bytesField(2, value)]);

/** openapi_v2.Schema; field numbers from gnostic's OpenAPIv2.proto. */
function encodeSchema(s: JsonObject): Buffer {
  const out: Buffer[] = [];
  if (typeof s.$ref === "string") out.push(stringField(1, s.$ref));
  if (typeof s.format === "string") out.push(stringField(2, s.format));
  if (typeof s.description === "string") out.push(stringField(4, s.description));
  if (typeof s.maximum === "number") out.push(doubleField(7, s.maximum));
  if (typeof s.minimum === "number") out.push(doubleField(9, s.minimum));
  if (typeof s.pattern === "string") out.push(stringField(13, s.pattern));
  for (const r of (s.required as string[] | undefined) ?? []) out.push(stringField(19, r));
  for (const e of (s.enum as unknown[] | undefined) ?? []) out.push(bytesField(20, anyYaml(e)));
  if (isObject(s.additionalProperties)) out.push(bytesField(21, bytesField(1, encodeSchema(s.additionalProperties))));
  else if (typeof s.additionalProperties === "boolean") out.push(bytesField(21, key(2, 0), Buffer.from([s.additionalProperties ? 1 : 0])));
  if (typeof s.type === "string") out.push(bytesField(22, stringField(1, s.type)));
  if (isObject(s.items)) out.push(bytesField(23, bytesField(1, encodeSchema(s.items))));
  if (isObject(s.properties)) {
    out.push(bytesField(25, ...Object.entries(s.properties).map(([name, v]) => bytesField(1, named(name, encodeSchema(v as JsonObject))))));
  }
  for (const [name, v] of Object.entries(s)) if (name.startsWith("x-")) out.push(bytesField(31, named(name, anyYaml(v))));
  return Buffer.concat(out);
}

/** The /openapi/v2 document in protobuf, as kubectl requests it. */
export function openApiV2Protobuf(): Buffer {
  const doc = openApiV2();
  const definitions = Object.entries(doc.definitions as Record<string, JsonObject>).map(([name, s]) => bytesField(1, named(name, encodeSchema(s))));
  return Buffer.concat([
    stringField(1, "2.0"),
    bytesField(2, stringField(1, "Kubernetes"), stringField(2, SERVER_VERSION.gitVersion)),
    bytesField(8),
    bytesField(9, ...definitions),
  ]);
}
