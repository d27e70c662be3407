// The kubernetes target: server-side apply with the agent's field manager (forcing conflicts:
// the agent owns these fields) onto objects that carry its ownership marks only, deletes of its
// own objects with Background propagation, prune listing by labels.
// An object that does not track the desired version (a Service) is not applied again while its
// content is what this process last applied and the live object is still the one that apply wrote.
import type { AgentOptions } from "node:https";
import { Agent, type Dispatcher as UndiciDispatcher } from "undici";
import {
  ApiException,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  type Cluster,
  type KubernetesObject,
  type RequestContext,
} from "@kubernetes/client-node";
import type { DesiredResource, ResourceTombstone } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import {
  buildManifests,
  describeObject as describe,
  FIELD_MANAGER,
  managedSelector,
  ownedRefs,
  tracksDesiredVersion,
  withoutDesiredVersion,
  type KubeObject,
  type ObjectRef,
} from "../manifests.ts";
import { containsCanonical } from "../compare.ts";
import { typeName } from "../keys.ts";
import { isOwnedBy, ownershipConflict, type Owner } from "../ownership.ts";
import { Listeners } from "../listeners.ts";
import { managedObject, TargetError, type AppliedVersions, type ManagedObject, type Target } from "../target.ts";
import { contentDigest, LastApplied } from "./last-applied.ts";

/** Kinds that listManaged() looks at (Namespaces are never pruned). */
const PRUNABLE_KINDS = [
  { apiVersion: "apps/v1", kind: "Deployment" },
  { apiVersion: "v1", kind: "Service" },
  { apiVersion: "cilium.io/v2", kind: "CiliumNetworkPolicy" },
];

const LIST_PAGE_SIZE = 500;

/** Read-check-write rounds of one object that may each lose a race (409) before the work queue retries. */
const WRITE_ATTEMPTS = 3;

type Dispatcher = NonNullable<ReturnType<RequestContext["getDispatcher"]>>;

/** KubeConfig's per-request dispatcher factory: private in client-node 2.0.1, hence this declaration. */
interface DispatcherFactory {
  createDispatcher(cluster: Cluster | null, agentOptions: AgentOptions): Dispatcher | undefined;
}

/**
 * A KubeConfig whose requests share one connection pool. For every request (API call or watch),
 * client-node 2.0.1 builds the TLS options afresh (CA, client certificate, also from exec credentials,
 * insecure-skip-tls-verify) and, if there are any, a new undici Agent: a new connection per request.
 * The only place that builds that Agent is the private createDispatcher(), so this replaces it on
 * the instance: the options are still the client's own, computed per request by its public
 * createDispatcherOptions(); the Agent is reused while they stay the same, and replaced (the old one
 * closing once its requests end) when they change, e.g. a rotated client certificate.
 */
export class PooledKubeConfig extends KubeConfig {
  /** Every request's outcome, seen where all requests pass (the dispatcher): for metrics and the cluster's reachability. */
  readonly requests = new Listeners<RestRequest>();
  #current?: { key: string; dispatcher: Dispatcher | undefined };

  constructor() {
    super();
    const factory = this as unknown as DispatcherFactory;
    const create = factory.createDispatcher.bind(this);
    factory.createDispatcher = (cluster, agentOptions) => {
      const key = JSON.stringify(this.createDispatcherOptions(cluster, agentOptions), base64Buffers);
      if (this.#current?.key !== key) {
        void this.#current?.dispatcher?.close();
        // Without TLS options client-node uses fetch's global dispatcher; ours counts the requests.
        const dispatcher = (create(cluster, agentOptions) ?? new Agent()) as unknown as UndiciDispatcher;
        this.#current = { key, dispatcher: dispatcher.compose(observeRequests(this.requests.emit)) as unknown as Dispatcher };
      }
      return this.#current.dispatcher;
    };
  }
}

/** One request to the Kubernetes API, as client-go's rest_client_requests_total labels it. */
export interface RestRequest {
  method: string;
  /** The response's status code, or "<error>" when none arrived (client-go's label). */
  code: string;
  host: string;
  /** An error after the response had begun (a watch broken midway): no new request, but the API server stopped answering. */
  broken?: boolean;
}

/**
 * An undici interceptor that reports each request once its response starts (or fails first), and
 * a response that fails midway. Our own aborts (a watch restarted, shutdown) are not failures.
 * Handlers come in undici's two shapes (onHeaders/onError and onResponseStart/onResponseError):
 * the Proxy passes everything through and looks at both.
 */
function observeRequests(report: (request: RestRequest) => void): UndiciDispatcher.DispatcherComposeInterceptor {
  return (dispatch) => (options, handler) => {
    const method = options.method;
    const host = new URL(String(options.origin)).host;
    let started = false;
    const observed = new Proxy(handler, {
      get(target, property) {
        const value = Reflect.get(target, property);
        if (typeof value !== "function") return value;
        if (property === "onResponseStart" || property === "onHeaders") {
          return (...args: unknown[]) => {
            if (!started) report({ method, host, code: String(args[property === "onHeaders" ? 0 : 1]) });
            started = true;
            return value.apply(target, args);
          };
        }
        if (property === "onResponseError" || property === "onError") {
          return (...args: unknown[]) => {
            const error = args[property === "onError" ? 0 : 1] as { name?: string; code?: string } | undefined;
            const aborted = error?.name === "AbortError" || error?.code === "UND_ERR_ABORTED";
            if (!aborted) report({ method, host, code: "<error>", broken: started });
            started = true;
            return value.apply(target, args);
          };
        }
        return value.bind(target);
      },
    });
    return dispatch(options, observed);
  };
}

/** JSON.stringify replacer: Buffers (certificates, keys) as base64 rather than arrays of numbers. */
function base64Buffers(this: Record<string, unknown>, key: string, value: unknown): unknown {
  const raw = this[key];
  return Buffer.isBuffer(raw) ? raw.toString("base64") : value;
}

/** The kubeconfig at `path` if given, else the in-cluster service account, else the default (~/.kube/config, $KUBECONFIG). */
export function loadKubeConfig(path?: string): PooledKubeConfig {
  const kc = new PooledKubeConfig();
  if (path) kc.loadFromFile(path);
  // Kubernetes sets these in every pod, as client-go's InClusterConfig checks.
  else if (process.env.KUBERNETES_SERVICE_HOST && process.env.KUBERNETES_SERVICE_PORT) kc.loadFromCluster();
  else kc.loadFromDefault();
  return kc;
}

export interface KubernetesTargetOptions {
  kubeConfig: KubeConfig;
  region: string;
}

export class KubernetesTarget implements Target {
  /** The cluster's access, also used by the agent's observer. */
  readonly kubeConfig: KubeConfig;
  readonly #api: KubernetesObjectApi;
  readonly #region: string;
  /** Namespaces applied by this process; forgotten when an apply into one finds it missing. */
  readonly #ensuredNamespaces = new Set<string>();
  /** By describeObject() name, for objects that do not track the desired version. */
  readonly #lastApplied = new LastApplied();

  constructor({ kubeConfig, region }: KubernetesTargetOptions) {
    this.kubeConfig = kubeConfig;
    this.#api = KubernetesObjectApi.makeApiClient(kubeConfig);
    this.#region = region;
  }

  async apply(resource: DesiredResource, live?: AppliedVersions): Promise<AppliedVersions> {
    const { apply, absent } = buildManifests(resource, this.#region);
    const owner: Owner = { region: this.#region, type: typeName(resource.type), id: resource.id };
    const applied: AppliedVersions = new Map();
    for (const object of apply) {
      if (object.kind === "Namespace") {
        await this.#ensureNamespace(object);
        continue;
      }
      const name = describe(object);
      const digest = tracksDesiredVersion(object) ? undefined : contentDigest(object);
      const last = this.#lastApplied.get(name);
      if (digest !== undefined && last?.digest === digest && live?.get(name) === last.resourceVersion) {
        applied.set(name, last.resourceVersion);
        continue;
      }
      this.#lastApplied.delete(name);
      try {
        const written = await this.#applyOwned(object, owner, live?.get(name));
        const resourceVersion = written.metadata?.resourceVersion ?? "";
        applied.set(name, resourceVersion);
        if (digest !== undefined) this.#lastApplied.set(name, { digest, resourceVersion });
      } catch (error) {
        // The namespace was deleted, or is being deleted, behind our back: ensure it again on the retry.
        if (error instanceof TargetError && (error.statusCode === 404 || error.statusCode === 403)) this.#ensuredNamespaces.delete(resource.namespace);
        throw error;
      }
    }
    for (const ref of absent) await this.#deleteManaged(ref, owner);
    return applied;
  }

  async delete(tombstone: ResourceTombstone): Promise<void> {
    const owner: Owner = { region: this.#region, type: typeName(tombstone.type), id: tombstone.id };
    for (const ref of ownedRefs(tombstone.type, tombstone.namespace, tombstone.name)) await this.#deleteManaged(ref, owner);
  }

  async listManaged(): Promise<ManagedObject[]> {
    const managed: ManagedObject[] = [];
    for (const { apiVersion, kind } of PRUNABLE_KINDS) {
      let continueToken: string | undefined;
      do {
        let page;
        try {
          page = await this.#api.list(
            apiVersion,
            kind,
            undefined,
            undefined,
            undefined,
            undefined,
            undefined,
            managedSelector(this.#region),
            LIST_PAGE_SIZE,
            continueToken,
          );
        } catch (error) {
          // A cluster without the Cilium CRDs has no policies to prune.
          if (isNotFound(error) || isUnknownKind(error)) break;
          throw targetError(error, `list ${kind}`);
        }
        for (const item of page.items) {
          // List items of built-in types come without apiVersion and kind.
          const object = managedObject({ ...item, apiVersion, kind }, this.#region);
          if (object) managed.push(object);
        }
        continueToken = page.metadata?._continue || undefined;
      } while (continueToken);
    }
    return managed;
  }

  /**
   * Writes `object` unless the object already at its place is not the agent's (then a refusal
   * naming the owner), and not at all when the live object already holds it (compared in
   * canonical form: a no-op apply would cost a request per object per refresh). `cachedVersion`,
   * the resourceVersion the observer last saw the object at, saves the read. The read and the
   * write race with other writers, so the write is made to fail rather than overwrite an object
   * that changed since the read, and is then retried from a new read:
   *
   * * existing (ours or marked for adoption): server-side apply, forced (the fields we apply are
   *   ours), carrying the read's resourceVersion: the API server answers 409 Conflict if the
   *   object was replaced or relabelled meanwhile.
   * * absent: server-side apply, not forced. Apply cannot say "create only" (a resourceVersion on
   *   a missing object does not stop the create), and a POST create would record our fields
   *   under an Update entry of our manager that later applies cannot remove (a dropped env var
   *   would stay forever). Not forced, an apply onto an object someone created since the read is
   *   a 409 field conflict wherever their values differ from ours (a Helm object's
   *   app.kubernetes.io/managed-by at least), so it is not taken over.
   */
  async #applyOwned(object: KubeObject, owner: Owner, cachedVersion: string | undefined): Promise<KubernetesObject> {
    const wanted = tracksDesiredVersion(object) ? object : withoutDesiredVersion(object);
    for (let attempt = 1; ; attempt++) {
      // The observer's cache holds only objects labelled as this resource's in this region: at
      // that resourceVersion the object was ours, and the precondition makes the apply fail if it
      // is not that version any more. Otherwise, and after such a failure, read it.
      const current = attempt === 1 && cachedVersion ? undefined : await this.#read(object);
      const conflict = current && ownershipConflict(current, owner);
      if (conflict) throw new TargetError(conflict, 409, undefined, "ownership");
      if (current && containsCanonical(current, wanted)) return current;
      const resourceVersion = current ? current.metadata?.resourceVersion : attempt === 1 ? cachedVersion : undefined;
      const body = resourceVersion ? { ...object, metadata: { ...object.metadata, resourceVersion } } : object;
      try {
        return await this.#api.patch(
          body as KubernetesObject,
          undefined,
          undefined,
          FIELD_MANAGER,
          resourceVersion !== undefined,
          PatchStrategy.ServerSideApply,
        );
      } catch (error) {
        if (isConflict(error) && attempt < WRITE_ATTEMPTS) continue;
        throw targetError(error, `apply ${describe(object)}`);
      }
    }
  }

  /**
   * Makes sure the namespace exists, without writing to one that does: an existing namespace may
   * belong to anyone (kube-system, another team), so only a namespace the agent creates carries
   * its marks, and the agent never changes or deletes any namespace (docs/ownership-and-status.md says why).
   */
  async #ensureNamespace(object: KubeObject): Promise<void> {
    const name = object.metadata.name;
    if (this.#ensuredNamespaces.has(name)) return;
    let current = await this.#read(object);
    if (!current) {
      try {
        current = await this.#api.create(object as KubernetesObject, undefined, undefined, FIELD_MANAGER);
      } catch (error) {
        if (!isConflict(error)) throw targetError(error, `create namespace ${name}`);
        current = await this.#read(object);
      }
    }
    // A namespace being deleted refuses new objects (403 NamespaceTerminating): wait until it is
    // gone, then create it anew. The work queue's backoff spaces the retries.
    if (current?.metadata?.deletionTimestamp || (current as { status?: { phase?: string } } | undefined)?.status?.phase === "Terminating") {
      throw new TargetError(`namespace ${name} is being terminated; waiting for it to be gone to create it again`, 403);
    }
    this.#ensuredNamespaces.add(name);
  }

  /** The live object, or undefined if it does not exist (or its kind is unknown to the cluster). */
  async #read(ref: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } }): Promise<KubernetesObject | undefined> {
    const header = { apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.metadata.name, namespace: ref.metadata.namespace } };
    try {
      return await this.#api.read(header);
    } catch (error) {
      if (isNotFound(error) || isUnknownKind(error)) return undefined;
      throw targetError(error, `read ${describe(header)}`);
    }
  }

  /**
   * Deletes the object only if its labels say it is `owner`'s in this region. The preconditions
   * (uid and resourceVersion of the read) make the delete fail (409) rather than remove an object
   * that was replaced or relabelled since; the retry reads it again.
   */
  async #deleteManaged(ref: ObjectRef, owner: Owner): Promise<void> {
    const header = { apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, namespace: ref.namespace } };
    this.#lastApplied.delete(describe(header));
    const live = await this.#read(header);
    if (!live || !isOwnedBy(live, owner)) return;
    try {
      await this.#api.delete(header, undefined, undefined, undefined, undefined, "Background", {
        preconditions: { uid: live.metadata?.uid, resourceVersion: live.metadata?.resourceVersion },
      });
    } catch (error) {
      if (isNotFound(error)) return;
      throw targetError(error, `delete ${describe(header)}`);
    }
  }
}

function isConflict(error: unknown): boolean {
  return error instanceof ApiException && error.code === 409;
}

function isNotFound(error: unknown): boolean {
  return error instanceof ApiException && error.code === 404;
}

/** KubernetesObjectApi's discovery did not find the kind (e.g. no Cilium CRDs installed). */
function isUnknownKind(error: unknown): boolean {
  return error instanceof Error && !(error instanceof ApiException) && error.message.startsWith("Unrecognized API version and kind");
}

/** Carries the HTTP status, the server's message and Retry-After to the work queue. */
function targetError(error: unknown, what: string): TargetError {
  if (!(error instanceof ApiException)) return new TargetError(`${what}: ${error instanceof Error ? error.message : String(error)}`);
  return new TargetError(`${what}: ${statusMessage(error)}`, error.code, retryAfterMs(error.headers["retry-after"]));
}

/** The message of the server's Status (e.g. `... is forbidden: User ... cannot patch ...`), else the HTTP code. */
export function statusMessage(error: ApiException<unknown>): string {
  const body: unknown = typeof error.body === "string" ? safeJson(error.body) : error.body;
  return body && typeof body === "object" && "message" in body ? String(body.message) : `HTTP ${error.code}`;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Retry-After in seconds (what the API server sends) or as an HTTP date. */
function retryAfterMs(header: string | undefined): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}
