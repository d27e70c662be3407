// Verb semantics on top of the store, mirroring the generic registry of the
// real API server: server-owned metadata, the status subresource, defaulting,
// validation, generation, optimistic concurrency, managedFields, dry-run and
// the NamespaceLifecycle admission; a kind that deletes in its own way says so in
// its strategy. Used by the HTTP layer and by the direct test API.
import { randomUUID } from "node:crypto";
import { serverSideApply, trackUpdate } from "./apply.ts";
import { canonicalize } from "./canonical.ts";
import type { Allocators } from "./defaults.ts";
import { ApiError, STALE_OBJECT, alreadyExists, badRequest, conflict, forbidden, invalid, notFound, subjectOf, type FieldError } from "./errors.ts";
import type { Scope } from "./fields.ts";
import { jsonPatch, mergePatch, strategicMergePatch } from "./patch.ts";
import { KINDS, findType } from "./kinds/index.ts";
import { namespaces } from "./kinds/namespace.ts";
import type { KindStorage, KindStrategy } from "./kinds/strategy.ts";
import { groupVersion } from "./resources.ts";
import { pruneUnknown, validateSchema, type Schema } from "./schema.ts";
import type { Selector } from "./selectors.ts";
import type { ObjectStore } from "./store.ts";
import { clone, deepEqual, isObject, nowRfc3339, randomSuffix, type JsonObject, type KubeObject } from "./util.ts";
import { validateMetadata } from "./validation.ts";

export type FieldValidation = "Strict" | "Warn" | "Ignore";

export interface WriteOptions {
  /** fieldManager query parameter, or the name derived from the User-Agent. */
  manager: string;
  dryRun?: boolean;
  scope?: Scope;
  /** What to do with fields a custom resource's schema does not declare; default Warn. */
  fieldValidation?: FieldValidation;
  /** Collects warnings for the response's Warning headers. */
  warnings?: string[];
  /** Throws when the writer may not create: asked by an apply that would create the object. */
  authorizeCreate?: () => void;
}

export type PatchType = "apply" | "merge" | "strategic" | "json";

export interface DeleteOptions {
  dryRun?: boolean;
  propagationPolicy?: string;
  preconditions?: { uid?: string; resourceVersion?: string };
}

export interface ListOptions {
  namespace?: string;
  labelSelector?: Selector;
  fieldSelector?: Selector;
  limit?: number;
  continueToken?: string;
}

export interface ListResult {
  items: KubeObject[];
  resourceVersion: string;
  continueToken?: string;
  remainingItemCount?: number;
}

/** Built-in types are listed without per-item apiVersion/kind, custom resources with them, as upstream. */
export function isBuiltIn(rt: KindStrategy): boolean {
  // Custom resources are the types defined by a CRD's schema (built-in groups may have dots too).
  return rt.schema === undefined;
}

interface ContinueToken {
  rv: string;
  start: string;
}

function itemKey(o: KubeObject): string {
  return `${o.metadata.namespace ?? ""}/${o.metadata.name ?? ""}`;
}

export class Registry implements KindStorage {
  readonly store: ObjectStore;
  private nextIp = 10;
  private nodePortsAllocated = 0;

  constructor(store: ObjectStore) {
    this.store = store;
  }

  /** Cluster IPs from 10.96.0.0/16 and node ports from 30000-32767, the default ranges. */
  private readonly allocate: Allocators = {
    ip: () => {
      const n = this.nextIp++;
      return `10.96.${(n >> 8) & 255}.${n & 255}`;
    },
    nodePort: () => 30000 + (this.nodePortsAllocated++ % 2768),
  };

  // --- reads ---

  get(rt: KindStrategy, namespace: string | undefined, name: string): KubeObject {
    const obj = this.store.get(rt, namespace, name);
    if (!obj) throw notFound(subjectOf(rt, name));
    return obj;
  }

  list(rt: KindStrategy, opts: ListOptions): ListResult {
    let rv = String(this.store.resourceVersion);
    let start = "";
    if (opts.continueToken) {
      try {
        const token = JSON.parse(Buffer.from(opts.continueToken, "base64url").toString()) as ContinueToken;
        if (typeof token.rv !== "string" || typeof token.start !== "string") throw new Error("bad token");
        rv = token.rv;
        start = token.start;
      } catch {
        throw badRequest("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
      }
    }
    const { labelSelector, fieldSelector } = opts;
    const { items, remaining } = this.store.page(rt, {
      namespace: rt.namespaced ? opts.namespace : undefined,
      after: start,
      filter: labelSelector || fieldSelector ? (o) => (labelSelector?.(o) ?? true) && (fieldSelector?.(o) ?? true) : undefined,
      limit: opts.limit && opts.limit > 0 ? opts.limit : undefined,
    });
    if (remaining > 0) {
      const token: ContinueToken = { rv, start: itemKey(items[items.length - 1]) };
      return {
        items,
        resourceVersion: rv,
        continueToken: Buffer.from(JSON.stringify(token)).toString("base64url"),
        remainingItemCount: remaining,
      };
    }
    return { items, resourceVersion: rv };
  }

  // --- writes ---

  /**
   * The NamespaceLifecycle admission plugin on create: the namespace must
   * exist and not be terminating (plugin/pkg/admission/namespace/lifecycle).
   */
  private requireNamespace(rt: KindStrategy, namespace: string | undefined, name: string): void {
    if (!rt.namespaced) return;
    if (!namespace) throw badRequest("the server could not find the requested resource");
    const ns = this.store.get(namespaces, undefined, namespace);
    if (!ns) throw notFound(subjectOf(namespaces, namespace));
    if (isObject(ns.status) && ns.status.phase === "Terminating") {
      throw forbidden(subjectOf(rt, name), `unable to create new content in namespace ${namespace} because it is being terminated`, [
        { reason: "NamespaceTerminating", message: `namespace ${namespace} is being terminated`, field: "metadata.namespace" },
      ]);
    }
  }

  /** Checks apiVersion/kind/namespace/name of a request body against the URL. */
  private checkBody(rt: KindStrategy, body: unknown, namespace: string | undefined, name: string | undefined, requireTypeMeta: boolean): KubeObject {
    if (!isObject(body)) throw badRequest("the body of the request must be a JSON or YAML object");
    const o = clone(body) as KubeObject;
    if (requireTypeMeta && (!o.apiVersion || !o.kind)) {
      throw badRequest(`${!o.kind ? "Object 'Kind'" : "Object 'apiVersion'"} is missing in '${JSON.stringify(body).slice(0, 200)}'`);
    }
    if (o.apiVersion !== undefined && o.apiVersion !== groupVersion(rt)) {
      throw badRequest(`the API version in the data (${String(o.apiVersion)}) does not match the expected API version (${groupVersion(rt)})`);
    }
    if (o.kind !== undefined && o.kind !== rt.kind) {
      throw badRequest(`the kind in the data (${String(o.kind)}) does not match the expected kind (${rt.kind})`);
    }
    o.apiVersion = groupVersion(rt);
    o.kind = rt.kind;
    if (o.metadata !== undefined && !isObject(o.metadata)) throw badRequest("metadata must be an object");
    o.metadata = (o.metadata ?? {}) as KubeObject["metadata"];
    if (rt.namespaced) {
      if (o.metadata.namespace && o.metadata.namespace !== namespace) {
        throw badRequest("the namespace of the provided object does not match the namespace sent on the request");
      }
      o.metadata.namespace = namespace;
    } else {
      delete o.metadata.namespace;
    }
    if (name !== undefined) {
      if (o.metadata.name && o.metadata.name !== name) {
        throw badRequest(`the name of the object (${o.metadata.name}) does not match the name on the URL (${name})`);
      }
      o.metadata.name = name;
    }
    return o;
  }

  create(rt: KindStrategy, namespace: string | undefined, body: unknown, opts: WriteOptions): KubeObject {
    const o = this.checkBody(rt, body, namespace, undefined, false);
    if (o.metadata.resourceVersion) throw badRequest("resourceVersion should not be set on objects to be created");
    if (!o.metadata.name && o.metadata.generateName) o.metadata.name = `${o.metadata.generateName}${randomSuffix(5)}`;
    this.requireNamespace(rt, namespace, o.metadata.name ?? "");
    if (o.metadata.name && this.store.get(rt, namespace, o.metadata.name)) throw alreadyExists(subjectOf(rt, o.metadata.name));
    return this.commit(rt, undefined, o, opts, false);
  }

  update(rt: KindStrategy, namespace: string | undefined, name: string, body: unknown, opts: WriteOptions): KubeObject {
    const o = this.checkBody(rt, body, namespace, name, false);
    const old = this.get(rt, namespace, name);
    const rv = o.metadata.resourceVersion;
    if (rv) this.checkResourceVersion(rt, old, rv);
    else if (!rt.allowUnconditionalUpdate) {
      throw invalid(rt.kind, rt.group, name, [
        { field: "metadata.resourceVersion", type: "Invalid value", value: 0, detail: "must be specified for an update" },
      ]);
    }
    return this.commit(rt, old, o, opts, false);
  }

  /** Returns the object and whether it was created (apply creates missing objects). */
  patch(
    rt: KindStrategy,
    namespace: string | undefined,
    name: string,
    type: PatchType,
    body: unknown,
    opts: WriteOptions,
    force: boolean,
  ): { object: KubeObject; created: boolean } {
    const scope = opts.scope ?? "main";
    if (type === "apply") {
      const applied = this.checkBody(rt, body, namespace, name, true);
      const old = this.store.get(rt, namespace, name);
      if (!old) {
        if (scope === "status") throw notFound(subjectOf(rt, name));
        opts.authorizeCreate?.();
        this.requireNamespace(rt, namespace, name);
      }
      if (old && applied.metadata.resourceVersion) this.checkResourceVersion(rt, old, applied.metadata.resourceVersion);
      delete applied.metadata.resourceVersion;
      // The applied configuration is decoded into the typed object before anything compares it
      // (fieldmanager's TypeConverter, staging/src/k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager):
      // 1000m is 1 and 1024Mi is 1Gi for conflicts, no-op detection and managedFields alike.
      if (isBuiltIn(rt)) canonicalize(rt, applied);
      const ctx = { manager: opts.manager, apiVersion: groupVersion(rt), scope, hasStatusSubresource: rt.statusSubresource };
      const merged = serverSideApply(old, applied as unknown as JsonObject, ctx, force);
      return { object: this.commit(rt, old, merged, opts, true), created: !old };
    }
    const old = this.get(rt, namespace, name);
    let patched: unknown;
    if (type === "json") patched = jsonPatch(old, body);
    else if (!isObject(body)) throw badRequest("the body of the request must be a JSON object for a merge patch");
    else patched = type === "merge" ? mergePatch(old, body) : strategicMergePatch(old, body);
    const o = this.checkBody(rt, patched, namespace, name, false);
    if (o.metadata.resourceVersion !== old.metadata.resourceVersion) {
      this.checkResourceVersion(rt, old, o.metadata.resourceVersion ?? "");
    }
    return { object: this.commit(rt, old, o, opts, false), created: false };
  }

  private checkResourceVersion(rt: KindStrategy, old: KubeObject, rv: string): void {
    if (!/^\d+$/.test(rv)) throw badRequest(`invalid resource version: ${JSON.stringify(rv)}`);
    if (rv !== old.metadata.resourceVersion) throw conflict(subjectOf(rt, old.metadata.name ?? ""), STALE_OBJECT);
  }

  /**
   * Completes a write: status subresource rules, server-owned metadata,
   * defaulting, validation, generation, managed fields; then stores it unless
   * it is a dry run or changes nothing (a no-op keeps the resourceVersion and
   * emits no watch event, like the real server).
   */
  private commit(rt: KindStrategy, old: KubeObject | undefined, candidate: KubeObject, opts: WriteOptions, applied: boolean): KubeObject {
    const scope = opts.scope ?? "main";
    let o = candidate;
    if (rt.statusSubresource) {
      if (scope === "status" && old) {
        o = { ...clone(old), status: candidate.status };
        o.metadata.managedFields = candidate.metadata.managedFields ?? old.metadata.managedFields;
      } else if (old) {
        if (old.status === undefined) delete o.status;
        else o.status = clone(old.status);
      } else {
        delete o.status;
      }
    }
    const meta = o.metadata;
    meta.uid = old?.metadata.uid ?? randomUUID();
    meta.creationTimestamp = old?.metadata.creationTimestamp ?? nowRfc3339();
    if (old?.metadata.deletionTimestamp) meta.deletionTimestamp = old.metadata.deletionTimestamp;
    else delete meta.deletionTimestamp;
    meta.resourceVersion = old?.metadata.resourceVersion;
    if (!meta.resourceVersion) delete meta.resourceVersion;
    if (scope === "main") {
      if (isBuiltIn(rt)) canonicalize(rt, o);
      rt.defaults?.(o, old, this.allocate);
    }
    if (rt.zeroStatus && !isObject(o.status)) o.status = clone(rt.zeroStatus);

    if (rt.schema) this.checkSchema(rt, rt.schema, o, opts);
    // The metadata's checks, then the kind's (rest.BeforeCreate and BeforeUpdate).
    const errors: FieldError[] = [];
    validateMetadata(rt, o, errors);
    errors.push(...(rt.validate?.(o) ?? []));
    if (old) errors.push(...(rt.validateUpdate?.(old, o) ?? []));
    if (errors.length) throw invalid(rt.kind, rt.group, meta.name ?? "", errors);

    meta.generation = this.nextGeneration(rt, old, o);
    if (meta.generation === undefined) delete meta.generation;
    if (!applied) {
      const ctx = { manager: opts.manager, apiVersion: groupVersion(rt), scope, hasStatusSubresource: rt.statusSubresource };
      // A write that changes managedFields itself replaces them (as kubectl's
      // client-side to server-side apply migration does with a JSON patch);
      // the writer's own changes are tracked on top.
      const rewritten = old && meta.managedFields !== undefined && !deepEqual(meta.managedFields, old.metadata.managedFields);
      const base = rewritten ? { ...old, metadata: { ...old.metadata, managedFields: meta.managedFields } } : old;
      meta.managedFields = trackUpdate(base, o, ctx);
    }
    if (!meta.managedFields?.length) delete meta.managedFields;

    if (old && deepEqual(old, o)) return old;
    if (opts.dryRun) return o;
    return this.store.write(rt, o);
  }

  /**
   * Structural schema of a custom resource: unknown fields are pruned (an
   * error with fieldValidation=Strict, a warning with Warn), then the object
   * is validated; failures are 422 Invalid with one cause per field.
   */
  private checkSchema(rt: KindStrategy, schema: Schema, o: KubeObject, opts: WriteOptions): void {
    const unknown = pruneUnknown(schema, o).map((path) => `unknown field "${path}"`);
    if (unknown.length > 0 && opts.fieldValidation === "Strict") {
      throw badRequest(`${rt.kind} in version "${rt.version}" cannot be handled as a ${rt.kind}: strict decoding error: ${unknown.join(", ")}`);
    }
    if ((opts.fieldValidation ?? "Warn") === "Warn") opts.warnings?.push(...unknown);
    const errors: FieldError[] = [];
    validateSchema(schema, o, "", errors);
    if (errors.length) throw invalid(rt.kind, rt.group, o.metadata.name ?? "", errors);
  }

  private nextGeneration(rt: KindStrategy, old: KubeObject | undefined, o: KubeObject): number | undefined {
    if (rt.generation === "none") return undefined;
    if (!old) return 1;
    const relevant = (x: KubeObject): unknown => {
      if (rt.generation === "spec") return x.spec;
      const { metadata: _m, status: _s, ...rest } = x;
      return rest;
    };
    const prev = old.metadata.generation ?? 1;
    return deepEqual(relevant(old), relevant(o)) ? prev : prev + 1;
  }

  delete(rt: KindStrategy, namespace: string | undefined, name: string, opts: DeleteOptions): JsonObject {
    const policy = opts.propagationPolicy;
    if (policy !== undefined && !["Orphan", "Background", "Foreground"].includes(policy)) {
      throw new ApiError(
        422,
        `DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "${policy}": supported values: "Foreground", "Background", "Orphan"`,
      );
    }
    const old = this.get(rt, namespace, name);
    const pre = opts.preconditions ?? {};
    if (pre.uid && pre.uid !== old.metadata.uid) {
      throw conflict(subjectOf(rt, name), `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${old.metadata.uid}`);
    }
    if (pre.resourceVersion && pre.resourceVersion !== old.metadata.resourceVersion) {
      throw conflict(
        subjectOf(rt, name),
        `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${old.metadata.resourceVersion}`,
      );
    }
    if (rt.delete) return rt.delete(old, opts.dryRun ?? false, this);
    const terminating = clone(old);
    terminating.metadata.deletionTimestamp = nowRfc3339();
    terminating.metadata.deletionGracePeriodSeconds = 0;
    if (policy === "Foreground" || policy === "Orphan") {
      // Upstream these add a finalizer and return the object; the garbage collector releases
      // (Orphan) or deletes (Foreground) the dependents, then removes the finalizer. Here the
      // finalizer is written (the rollout controller's collector reads it) and the object goes
      // away right after.
      terminating.metadata.finalizers = [...(terminating.metadata.finalizers ?? []), policy === "Orphan" ? "orphan" : "foregroundDeletion"];
      if (!opts.dryRun) this.store.write(rt, terminating);
    }
    if (!opts.dryRun) this.remove(rt, namespace, name);
    if (policy === "Foreground" || policy === "Orphan") return terminating;
    return {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Success",
      details: { name, group: rt.group, kind: rt.resource, uid: old.metadata.uid },
    };
  }

  /** DELETE on a collection: removes the matching objects and returns them. */
  deleteCollection(rt: KindStrategy, opts: ListOptions & DeleteOptions): KubeObject[] {
    const { items } = this.list(rt, { ...opts, limit: undefined, continueToken: undefined });
    if (!opts.dryRun) for (const o of items) this.remove(rt, o.metadata.namespace, o.metadata.name ?? "");
    return items;
  }

  /** Removes an object, after what its kind removes with it (beforeRemove). */
  remove(rt: KindStrategy, namespace: string | undefined, name: string): boolean {
    rt.beforeRemove?.(name, this);
    return this.store.remove(rt, namespace, name) !== undefined;
  }

  /** Removes every object in a namespace, kind by kind. */
  removeContent(namespace: string): void {
    for (const rt of KINDS) {
      if (!rt.namespaced) continue;
      for (const o of this.store.list(rt, namespace)) this.store.remove(rt, namespace, o.metadata.name ?? "");
    }
  }

  /**
   * Direct write for tests: stores `obj` as given (status included) after
   * filling in server-owned metadata, the canonical form and defaults; no
   * validation, no namespace check.
   */
  put(input: unknown): KubeObject {
    if (!isObject(input) || typeof input.apiVersion !== "string" || typeof input.kind !== "string") {
      throw new TypeError("put() needs an object with apiVersion and kind");
    }
    const rt = findType(input.apiVersion, input.kind);
    if (!rt) throw new TypeError(`unknown type ${input.apiVersion} ${input.kind}`);
    const o = clone(input) as KubeObject;
    o.metadata = { ...(o.metadata ?? {}) };
    if (!o.metadata.name) throw new TypeError("put() needs metadata.name");
    if (!rt.namespaced) delete o.metadata.namespace;
    else o.metadata.namespace ??= "default";
    const old = this.store.get(rt, o.metadata.namespace, o.metadata.name);
    o.metadata.uid ??= old?.metadata.uid ?? randomUUID();
    o.metadata.creationTimestamp ??= old?.metadata.creationTimestamp ?? nowRfc3339();
    if (isBuiltIn(rt)) canonicalize(rt, o);
    rt.defaults?.(o, old, this.allocate);
    if (o.metadata.generation === undefined) {
      const g = this.nextGeneration(rt, old, o);
      if (g !== undefined) o.metadata.generation = g;
    }
    if (o.metadata.managedFields === undefined && old?.metadata.managedFields) o.metadata.managedFields = old.metadata.managedFields;
    return this.store.write(rt, o);
  }

  /** Writes a controller's status update (status subresource, manager kube-controller-manager). */
  writeStatus(rt: KindStrategy, current: KubeObject, status: JsonObject, annotations?: Record<string, string>): KubeObject | undefined {
    const next = clone(current);
    next.status = status;
    if (annotations) next.metadata.annotations = { ...(next.metadata.annotations ?? {}), ...annotations };
    if (deepEqual(next, current)) return undefined;
    const ctx = { manager: "kube-controller-manager", apiVersion: groupVersion(rt), hasStatusSubresource: rt.statusSubresource };
    next.metadata.managedFields = trackUpdate(current, next, { ...ctx, scope: "status" });
    if (annotations) {
      const base = { ...current, metadata: { ...current.metadata, managedFields: next.metadata.managedFields } };
      next.metadata.managedFields = trackUpdate(base, next, { ...ctx, scope: "main" });
    }
    return this.store.write(rt, next);
  }
}
