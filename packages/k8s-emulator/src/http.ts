// HTTP routing: maps API paths to verbs on the registry, the way the real
// server's RequestInfoFactory does, and renders results and errors (always a
// metav1.Status) as JSON.
import { tableOptions, toTable, wantsTable } from "./table.ts";
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { ADMIN, unauthorized, type Authenticator, type UserInfo } from "./auth.ts";
import { apiGroupDoc, apiGroupList, apiResourceList, apiVersions, SERVER_VERSION } from "./discovery.ts";
import { ApiError, badRequest, internalError, invalid, type FieldError } from "./errors.ts";
import type { FaultInjector, Verb } from "./faults.ts";
import { isBuiltIn, type FieldValidation, type PatchType, type Registry, type WriteOptions } from "./registry.ts";
import {
  forbiddenError,
  forbiddenRequest,
  requestAttributes,
  SELF_SUBJECT_ACCESS_REVIEWS,
  selfSubjectAccessReview,
  type RbacAuthorizer,
  type RequestAttributes,
} from "./rbac.ts";
import { impersonatedUser } from "./impersonation.ts";
import { findByPath } from "./kinds/index.ts";
import { subresourcesOf, type KindStrategy } from "./kinds/strategy.ts";
import { groupVersion } from "./resources.ts";
import { parseFieldSelector, parseLabelSelector, type Selector } from "./selectors.ts";
import { isObject, type JsonObject, type KubeObject } from "./util.ts";
import type { WatchHub } from "./watch.ts";
import { OPENAPI_V2_PROTOBUF, OPENAPI_V2_PROTOBUF_TYPES, openApiV2, openApiV2Protobuf, openApiV3, openApiV3Root } from "./openapi.ts";
import { DecodeError, decodeBody } from "./yaml.ts";

/** Largest request body accepted, as the real server's limit. */
export const MAX_BODY_BYTES = 3 * 1024 * 1024;

export interface RequestLogEntry {
  time: string;
  method: string;
  path: string;
  query: Record<string, string>;
  /** undefined for discovery and other non-resource requests. */
  verb?: Verb;
  group?: string;
  version?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  status: number;
  fieldManager?: string;
  /** The authenticated user's name (without RBAC: when the credentials are known). */
  user?: string;
  /** The user the request ran as, when it impersonated one (Impersonate-User). */
  impersonatedUser?: string;
}

export interface HttpContext {
  registry: Registry;
  watches: WatchHub;
  faults: FaultInjector;
  /** Issues ServiceAccount tokens; with an authorizer, also tells who each request is. */
  authenticator: Authenticator;
  /** RBAC, when on: requests are authenticated and authorized before dispatch. */
  authorizer?: RbacAuthorizer;
  /** Appends to the request log. */
  log(entry: RequestLogEntry): void;
  /** Handles /_emulator/* requests. */
  admin(req: IncomingMessage, res: ServerResponse, path: string, body: string): Promise<void> | void;
  serverAddress(): string;
}

interface ResourceRoute {
  rt: KindStrategy;
  namespace?: string;
  name?: string;
  subresource?: string;
  /** Path used the deprecated /watch/ prefix. */
  legacyWatch: boolean;
}

const PATCH_TYPES: Record<string, PatchType> = {
  "application/apply-patch+yaml": "apply",
  "application/merge-patch+json": "merge",
  "application/strategic-merge-patch+json": "strategic",
  "application/json-patch+json": "json",
};

const NOT_FOUND_MESSAGE = "the server could not find the requested resource";

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string | string[]> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(text),
    "Cache-Control": "no-cache, private",
    "Audit-Id": randomUUID(),
    ...headers,
  });
  res.end(text);
}

function sendError(res: ServerResponse, err: ApiError): void {
  sendJson(res, err.code, err.toStatus(), err.headers);
}

function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof DecodeError) return badRequest(`the body of the request could not be decoded: ${err.message}`);
  return internalError(err instanceof Error ? err.message : String(err));
}

/** Reads the body up to MAX_BODY_BYTES; rejects with 413 beyond that. */
function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on("data", (chunk: Buffer) => {
      if (tooLarge) return;
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        tooLarge = true;
        chunks.length = 0;
        reject(new ApiError(413, `Request entity too large: limit is ${MAX_BODY_BYTES}`));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (!tooLarge) resolve(Buffer.concat(chunks).toString("utf8"));
    });
    req.on("error", reject);
  });
}

function mediaType(req: IncomingMessage): string {
  return (req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
}

/** Splits /api/v1/... and /apis/<g>/<v>/... into group, version and the rest. */
function splitApiPath(segs: string[]): { group: string; version: string; rest: string[] } | undefined {
  if (segs[0] === "api" && segs.length >= 2) return { group: "", version: segs[1], rest: segs.slice(2) };
  if (segs[0] === "apis" && segs.length >= 3) return { group: segs[1], version: segs[2], rest: segs.slice(3) };
  return undefined;
}

function resolveRoute(group: string, version: string, rest: string[]): ResourceRoute | undefined {
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

function queryOf(url: URL): Record<string, string> {
  const q: Record<string, string> = {};
  for (const [k, v] of url.searchParams) q[k] = v;
  return q;
}

function verbOf(method: string, route: ResourceRoute, query: Record<string, string>, contentType: string): Verb | undefined {
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

function optionsInvalid(kind: string, errors: FieldError[]): ApiError {
  return invalid(kind, "meta.k8s.io", "", errors);
}

function parseDryRun(query: Record<string, string>, kind: string): boolean {
  const v = query.dryRun;
  if (v === undefined || v === "") return false;
  if (v !== "All") throw optionsInvalid(kind, [{ field: "dryRun", type: "Unsupported value", value: [v], detail: 'supported values: "All"' }]);
  return true;
}

function parseFieldValidation(query: Record<string, string>, kind: string): FieldValidation | undefined {
  const v = query.fieldValidation;
  if (v === undefined || v === "") return undefined;
  if (v !== "Strict" && v !== "Warn" && v !== "Ignore") {
    throw optionsInvalid(kind, [{ field: "fieldValidation", type: "Unsupported value", value: v, detail: 'supported values: "", "Ignore", "Strict", "Warn"' }]);
  }
  return v;
}

/** Warning headers as the server writes them (RFC 7234 warn-code 299, agent "-"). */
function warningHeaders(warnings: string[]): Record<string, string[]> {
  return warnings.length ? { Warning: warnings.map((w) => `299 - ${JSON.stringify(w)}`) } : {};
}

function parseIntParam(query: Record<string, string>, name: string): number | undefined {
  const v = query[name];
  if (v === undefined || v === "") return undefined;
  if (!/^\d+$/.test(v)) throw badRequest(`invalid ${name} parameter: ${JSON.stringify(v)}`);
  return Number(v);
}

/** fieldManager, or the User-Agent's product token as upstream derives it. */
function managerName(req: IncomingMessage, query: Record<string, string>): string {
  if (query.fieldManager) return query.fieldManager;
  const ua = req.headers["user-agent"] ?? "";
  return ua.split("/")[0].trim() || "unknown";
}

function decodeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw badRequest(`the body of the request could not be decoded: ${(err as Error).message}`);
  }
}

function combine(a: Selector, b: Selector): Selector {
  return (o) => a(o) && b(o);
}

/** List responses: built-in types carry no per-item apiVersion/kind, like the real server's typed lists. */
function listBody(rt: KindStrategy, items: KubeObject[], metadata: JsonObject): JsonObject {
  const shaped = isBuiltIn(rt) ? items.map(({ apiVersion: _a, kind: _k, ...rest }) => rest) : items;
  return { kind: rt.listKind, apiVersion: groupVersion(rt), metadata, items: shaped };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function createRequestHandler(ctx: HttpContext): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    handle(ctx, req, res).catch((err: unknown) => {
      // Last resort: never let a request crash the server.
      if (!res.headersSent) sendError(res, toApiError(err));
      else res.destroy();
    });
  };
}

async function handle(ctx: HttpContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://emulator");
  const path = url.pathname.replace(/\/+$/, "") || "/";
  const method = req.method ?? "GET";
  const query = queryOf(url);
  const segs = path.split("/").filter(Boolean).map(decodeURIComponent);

  let body = "";
  let bodyError: ApiError | undefined;
  try {
    body = await readBody(req);
  } catch (err) {
    bodyError = toApiError(err);
  }

  if (segs[0] === "_emulator") {
    if (bodyError) return sendError(res, bodyError);
    try {
      await ctx.admin(req, res, path, body);
    } catch (err) {
      sendError(res, err instanceof TypeError ? badRequest(err.message) : toApiError(err));
    }
    return;
  }

  const entry: RequestLogEntry = { time: new Date().toISOString(), method, path, query, status: 0 };
  const respond = (status: number, payload: unknown, headers?: Record<string, string | string[]>) => {
    entry.status = status;
    ctx.log(entry);
    sendJson(res, status, payload, headers);
  };
  const fail = (err: unknown) => {
    const e = toApiError(err);
    entry.status = e.code;
    ctx.log(entry);
    if (e.code === 413) res.setHeader("Connection", "close");
    sendError(res, e);
  };

  // Authentication, impersonation and authorization (when RBAC is on), before dispatch, as the
  // API server's filter chain: 401 for a token nobody issued, 403 for what RBAC does not allow.
  // Without RBAC every request is allowed, unknown credentials included; the log still names
  // the user the credentials stand for, when it knows them.
  let access: RequestAccess | undefined;
  const authenticated = ctx.authenticator.authenticate(req);
  entry.user = authenticated?.name;
  if (ctx.authorizer && !authenticated) return fail(unauthorized());
  let user = authenticated;
  if (authenticated) {
    try {
      user = impersonatedUser(req, authenticated, ctx.authorizer);
    } catch (err) {
      return fail(err);
    }
    if (user !== authenticated) entry.impersonatedUser = user.name;
  }
  if (ctx.authorizer && user) {
    access = { user, attributes: requestAttributes(method, path, segs, query), authorizer: ctx.authorizer };
    const decision = ctx.authorizer.authorize(user, access.attributes);
    if (!decision.allowed) return fail(forbiddenRequest(user, access.attributes, decision.reason));
  }

  if (method === "GET" && segs[0] === "openapi") {
    const doc = openApiGet(segs, String(req.headers.accept ?? ""));
    if (!doc) return fail(new ApiError(404, NOT_FOUND_MESSAGE, { details: {} }));
    entry.status = 200;
    ctx.log(entry);
    res.writeHead(200, { "Content-Type": doc.type, "Content-Length": doc.body.length });
    res.end(doc.body);
    return;
  }

  // Non-resource endpoints.
  if (method === "GET") {
    const nonResource = nonResourceGet(ctx, segs);
    if (nonResource !== undefined) {
      if (typeof nonResource === "string") {
        entry.status = 200;
        ctx.log(entry);
        res.writeHead(200, { "Content-Type": "text/plain; charset=utf-8" });
        res.end(nonResource);
      } else {
        respond(200, nonResource);
      }
      return;
    }
  }

  if (method === "POST" && path === SELF_SUBJECT_ACCESS_REVIEWS) {
    if (bodyError) return fail(bodyError);
    try {
      return respond(201, selfSubjectAccessReview(access?.user ?? ADMIN, ctx.authorizer, decodeWriteBody(body, mediaType(req))));
    } catch (err) {
      return fail(err);
    }
  }

  const api = splitApiPath(segs);
  const route = api && api.rest.length > 0 ? resolveRoute(api.group, api.version, api.rest) : undefined;
  if (!route) {
    if (api) Object.assign(entry, { group: api.group, version: api.version });
    return fail(new ApiError(404, NOT_FOUND_MESSAGE, { details: {} }));
  }
  const { rt } = route;
  const contentType = mediaType(req);
  Object.assign(entry, {
    group: rt.group,
    version: rt.version,
    resource: rt.resource,
    ...(route.subresource ? { subresource: route.subresource } : {}),
    ...(route.namespace !== undefined ? { namespace: route.namespace } : {}),
    ...(route.name !== undefined ? { name: route.name } : {}),
    ...(query.fieldManager ? { fieldManager: query.fieldManager } : {}),
  });
  const verb = verbOf(method, route, query, contentType);
  if (!verb) {
    return fail(new ApiError(405, `the server does not allow this method on the requested resource`, { details: {} }));
  }
  entry.verb = verb;

  await ctx.faults.released(verb);
  const latency = ctx.faults.latencyFor(verb, rt.resource);
  if (latency > 0) await sleep(latency);
  const fault = ctx.faults.pick(verb);
  if (fault) return fail(fault);
  if (bodyError) return fail(bodyError);

  try {
    await serve(ctx, req, res, route, verb, query, body, contentType, respond, entry, access);
  } catch (err) {
    fail(err);
  }
}

/** The scale subresource: a Scale read, or written by update or merge patch, through the kind's rules. */
function serveScale(
  ctx: HttpContext,
  route: ResourceRoute,
  verb: Verb,
  body: string,
  contentType: string,
  write: (kind: string) => WriteOptions,
  respond: (status: number, payload: unknown) => void,
): void {
  const { rt, namespace, name } = route;
  const rules = rt.scale!;
  const current = ctx.registry.get(rt, namespace, name!);
  if (verb === "get") return respond(200, rules.toScale(current));
  let replicas: unknown;
  if (verb === "update") replicas = (((decodeWriteBody(body, contentType) as JsonObject).spec ?? {}) as JsonObject).replicas;
  else if (verb === "patch" && (contentType === "application/merge-patch+json" || contentType === "application/strategic-merge-patch+json"))
    replicas = ((JSON.parse(body || "{}") as JsonObject).spec as JsonObject | undefined)?.replicas;
  else
    throw new ApiError(
      415,
      "the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json",
      { details: {} },
    );
  if (!(Number.isInteger(replicas) && (replicas as number) >= 0)) {
    throw new ApiError(
      422,
      `Scale.autoscaling "${name}" is invalid: spec.replicas: Invalid value: ${JSON.stringify(replicas)}: must be greater than or equal to 0`,
      { details: {} },
    );
  }
  const next = rules.scaled(current, replicas as number);
  respond(200, rules.toScale(ctx.registry.update(rt, namespace, name!, next, { ...write("UpdateOptions"), scope: "main" })));
}

/** Who a request is and what it asks, when RBAC is on. */
interface RequestAccess {
  user: UserInfo;
  attributes: RequestAttributes;
  authorizer: RbacAuthorizer;
}

/**
 * An apply that creates the object needs `create` too (handlers/patch.go withAuthorization);
 * the 403 carries the authorizer's reason only, as there.
 */
function authorizeCreate({ user, attributes, authorizer }: RequestAccess): void {
  const create = { ...attributes, verb: "create" };
  const decision = authorizer.authorize(user, create);
  if (!decision.allowed) throw forbiddenError(create, decision.reason);
}

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
function openApiGet(segs: string[], accept: string): { type: string; body: Buffer } | undefined {
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

function nonResourceGet(ctx: HttpContext, segs: string[]): JsonObject | string | undefined {
  const p = segs.join("/");
  if (p === "version") return { ...SERVER_VERSION };
  if (p === "healthz" || p === "livez" || p === "readyz") return "ok";
  if (p === "api") return apiVersions(ctx.serverAddress());
  if (p === "apis") return apiGroupList();
  if (segs[0] === "apis" && segs.length === 2) return apiGroupDoc(segs[1]);
  if (segs[0] === "api" && segs.length === 2) return apiResourceList("", segs[1]);
  if (segs[0] === "apis" && segs.length === 3) return apiResourceList(segs[1], segs[2]);
  return undefined;
}

async function serve(
  ctx: HttpContext,
  req: IncomingMessage,
  res: ServerResponse,
  route: ResourceRoute,
  verb: Verb,
  query: Record<string, string>,
  body: string,
  contentType: string,
  respond: (status: number, payload: unknown, headers?: Record<string, string | string[]>) => void,
  entry: RequestLogEntry,
  access: RequestAccess | undefined,
): Promise<void> {
  const { rt, namespace, name } = route;
  const { registry } = ctx;
  const scope = route.subresource === "status" ? "status" : "main";
  const warnings: string[] = [];
  const write = (kind: string): WriteOptions => ({
    manager: managerName(req, query),
    dryRun: parseDryRun(query, kind),
    scope,
    fieldValidation: parseFieldValidation(query, kind),
    warnings,
    ...(access ? { authorizeCreate: () => authorizeCreate(access) } : {}),
  });

  if (route.subresource === "scale") return serveScale(ctx, route, verb, body, contentType, write, respond);
  const table = wantsTable(req.headers.accept) ? tableOptions(query) : undefined;
  switch (verb) {
    case "get": {
      const object = registry.get(rt, namespace, name!);
      return respond(200, table ? toTable(rt.printer, [object], { resourceVersion: object.metadata.resourceVersion }, table) : object);
    }
    case "list": {
      const result = registry.list(rt, {
        namespace,
        labelSelector: parseLabelSelector(query.labelSelector),
        fieldSelector: parseFieldSelector(query.fieldSelector, rt.fieldLabels),
        limit: parseIntParam(query, "limit"),
        continueToken: query.continue || undefined,
      });
      const metadata: JsonObject = { resourceVersion: result.resourceVersion };
      if (result.continueToken) metadata.continue = result.continueToken;
      if (result.remainingItemCount !== undefined) metadata.remainingItemCount = result.remainingItemCount;
      return respond(200, table ? toTable(rt.printer, result.items, metadata, table) : listBody(rt, result.items, metadata));
    }
    case "watch": {
      let selector = combine(parseLabelSelector(query.labelSelector), parseFieldSelector(query.fieldSelector, rt.fieldLabels));
      if (name !== undefined) selector = combine(selector, (o) => o.metadata.name === name);
      const rvText = query.resourceVersion ?? "";
      if (rvText !== "" && !/^\d+$/.test(rvText)) throw badRequest(`invalid resource version: ${JSON.stringify(rvText)}`);
      const timeoutSeconds = parseIntParam(query, "timeoutSeconds");
      entry.status = 200;
      ctx.log(entry);
      ctx.watches.open(
        {
          rt,
          namespace,
          selector,
          resourceVersion: rvText === "" ? undefined : Number(rvText),
          allowBookmarks: query.allowWatchBookmarks === "true",
          timeoutSeconds,
          table,
        },
        res,
      );
      return;
    }
    case "create": {
      if (route.subresource === "token") {
        const serviceAccount = registry.get(rt, namespace, name!);
        return respond(201, ctx.authenticator.tokenRequest(serviceAccount, decodeWriteBody(body, contentType)));
      }
      const opts = write("CreateOptions");
      const obj = registry.create(rt, namespace, decodeWriteBody(body, contentType), opts);
      return respond(201, obj, warningHeaders(warnings));
    }
    case "update": {
      const opts = write("UpdateOptions");
      return respond(200, registry.update(rt, namespace, name!, decodeWriteBody(body, contentType), opts), warningHeaders(warnings));
    }
    case "apply":
    case "patch": {
      const type = PATCH_TYPES[contentType];
      // Custom resources have no strategic merge patch upstream (no Go struct tags).
      if (!type || (type === "strategic" && !isBuiltIn(rt))) {
        const accepted = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"];
        if (isBuiltIn(rt)) accepted.push("application/strategic-merge-patch+json");
        throw new ApiError(415, `the body of the request was in an unknown format - accepted media types include: ${accepted.join(", ")}`, { details: {} });
      }
      const errors: FieldError[] = [];
      if (type === "apply" && !query.fieldManager) errors.push({ field: "fieldManager", type: "Required value", detail: "is required for apply patch" });
      if (type !== "apply" && query.force !== undefined) errors.push({ field: "force", type: "Forbidden", detail: "may not be specified for non-apply patch" });
      if (errors.length) throw optionsInvalid("PatchOptions", errors);
      const opts = write("PatchOptions");
      if (!body.trim()) throw badRequest("the body of the request was empty");
      const patch = type === "apply" ? decodeBody(body) : decodeJson(body);
      const { object, created } = registry.patch(rt, namespace, name!, type, patch, opts, query.force === "true");
      return respond(created ? 201 : 200, object, warningHeaders(warnings));
    }
    case "delete": {
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
      if (name === undefined) {
        const deleted = registry.deleteCollection(rt, {
          namespace,
          labelSelector: parseLabelSelector(query.labelSelector),
          fieldSelector: parseFieldSelector(query.fieldSelector, rt.fieldLabels),
          dryRun,
        });
        return respond(200, listBody(rt, deleted, { resourceVersion: String(registry.store.resourceVersion) }));
      }
      return respond(200, registry.delete(rt, namespace, name, { dryRun, propagationPolicy, preconditions }));
    }
  }
}

function decodeWriteBody(body: string, contentType: string): unknown {
  if (!body.trim()) throw badRequest("the body of the request was empty");
  if (contentType === "" || contentType === "application/json" || contentType === "*/*") return decodeJson(body);
  if (contentType === "application/yaml") return decodeBody(body);
  throw new ApiError(415, `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml`, {
    details: {},
  });
}
