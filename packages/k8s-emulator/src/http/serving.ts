// Serving: a routed resource request as its verb on the registry (get, list, watch, create,
// update, patch, apply, delete), as a Table when asked, and the scale and token subresources.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Authenticator, UserInfo } from "../auth.ts";
import { ApiError, badRequest, type FieldError } from "../errors.ts";
import type { Verb } from "../faults.ts";
import type { KindStrategy } from "../kinds/strategy.ts";
import { forbiddenError, type RbacAuthorizer, type RequestAttributes } from "../rbac.ts";
import { isBuiltIn, type Registry, type WriteOptions } from "../registry.ts";
import { groupVersion } from "../resources.ts";
import { parseFieldSelector, parseLabelSelector, type Selector } from "../selectors.ts";
import { tableOptions, toTable, wantsTable } from "../table.ts";
import type { JsonObject, KubeObject } from "../util.ts";
import type { WatchHub } from "../watch.ts";
import { decodeBody } from "../yaml.ts";
import {
  PATCH_TYPES,
  decodeJson,
  decodeWriteBody,
  deleteOptions,
  managerName,
  optionsInvalid,
  parseDryRun,
  parseFieldValidation,
  parseIntParam,
} from "./options.ts";
import type { ResourceRoute } from "./routing.ts";

/** What resource requests are served with. */
export interface ServingContext {
  registry: Registry;
  watches: WatchHub;
  /** Issues ServiceAccount tokens; with an authorizer, also tells who each request is. */
  authenticator: Authenticator;
}

/** Who a request is and what it asks, when RBAC is on. */
export interface RequestAccess {
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

/** Warning headers as the server writes them (RFC 7234 warn-code 299, agent "-"). */
function warningHeaders(warnings: string[]): Record<string, string[]> {
  return warnings.length ? { Warning: warnings.map((w) => `299 - ${JSON.stringify(w)}`) } : {};
}

function combine(a: Selector, b: Selector): Selector {
  return (o) => a(o) && b(o);
}

/** List responses: built-in types carry no per-item apiVersion/kind, like the real server's typed lists. */
function listBody(rt: KindStrategy, items: KubeObject[], metadata: JsonObject): JsonObject {
  const shaped = isBuiltIn(rt) ? items.map(({ apiVersion: _a, kind: _k, ...rest }) => rest) : items;
  return { kind: rt.listKind, apiVersion: groupVersion(rt), metadata, items: shaped };
}

/**
 * A routed resource request as its verb on the registry; `respond` sends and logs the answer,
 * an error is thrown.
 */
export async function serve(
  ctx: ServingContext,
  req: IncomingMessage,
  res: ServerResponse,
  route: ResourceRoute,
  verb: Verb,
  query: Record<string, string>,
  body: string,
  contentType: string,
  respond: (status: number, payload: unknown, headers?: Record<string, string | string[]>) => void,
  /** Logs the request as answered (200) when a watch starts streaming. */
  watching: () => void,
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
      watching();
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
      const options = deleteOptions(query, body);
      if (name === undefined) {
        const deleted = registry.deleteCollection(rt, {
          namespace,
          labelSelector: parseLabelSelector(query.labelSelector),
          fieldSelector: parseFieldSelector(query.fieldSelector, rt.fieldLabels),
          dryRun: options.dryRun,
        });
        return respond(200, listBody(rt, deleted, { resourceVersion: String(registry.store.resourceVersion) }));
      }
      return respond(200, registry.delete(rt, namespace, name, options));
    }
  }
}

/** The scale subresource: a Scale read, or written by update or merge patch, through the kind's rules. */
function serveScale(
  ctx: ServingContext,
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
