// The emulator's HTTP front, in the API server's order: the body, the request log, the filter
// chain (authentication, impersonation, RBAC), faults, then the endpoint the path names:
// /_emulator, the non-resource endpoints (http/discovery.ts), a SelfSubjectAccessReview, or a
// resource (http/routing.ts, served by http/serving.ts). Results and errors (always a
// metav1.Status) are rendered as JSON.
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { ADMIN, unauthorized } from "./auth.ts";
import { ApiError, badRequest, internalError } from "./errors.ts";
import type { FaultInjector, Verb } from "./faults.ts";
import { forbiddenRequest, requestAttributes, SELF_SUBJECT_ACCESS_REVIEWS, selfSubjectAccessReview, type RbacAuthorizer } from "./rbac.ts";
import { impersonatedUser } from "./impersonation.ts";
import { nonResourceGet, openApiGet } from "./http/discovery.ts";
import { decodeWriteBody, mediaType, queryOf } from "./http/options.ts";
import { resolveRoute, splitApiPath, verbOf } from "./http/routing.ts";
import { serve, type RequestAccess, type ServingContext } from "./http/serving.ts";
import { DecodeError } from "./yaml.ts";

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

export interface HttpContext extends ServingContext {
  faults: FaultInjector;
  /** RBAC, when on: requests are authenticated and authorized before dispatch. */
  authorizer?: RbacAuthorizer;
  /** Appends to the request log. */
  log(entry: RequestLogEntry): void;
  /** Handles /_emulator/* requests. */
  admin(req: IncomingMessage, res: ServerResponse, path: string, body: string): Promise<void> | void;
  serverAddress(): string;
}

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
  const log = (status: number) => {
    entry.status = status;
    ctx.log(entry);
  };
  const respond = (status: number, payload: unknown, headers?: Record<string, string | string[]>) => {
    log(status);
    sendJson(res, status, payload, headers);
  };
  const fail = (err: unknown) => {
    const e = toApiError(err);
    log(e.code);
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
    log(200);
    res.writeHead(200, { "Content-Type": doc.type, "Content-Length": doc.body.length });
    res.end(doc.body);
    return;
  }

  // Non-resource endpoints.
  if (method === "GET") {
    const nonResource = nonResourceGet(segs, () => ctx.serverAddress());
    if (nonResource !== undefined) {
      if (typeof nonResource === "string") {
        log(200);
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
    await serve(ctx, req, res, route, verb, query, body, contentType, respond, () => log(200), access);
  } catch (err) {
    fail(err);
  }
}
