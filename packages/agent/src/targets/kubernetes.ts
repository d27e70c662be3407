// The kubernetes target: server-side apply with the agent's field manager (forcing conflicts:
// the agent owns these fields), deletes with Background propagation, prune listing by labels.
// An object that does not track the desired version (a Service) is not applied again while its
// content is what this process last applied and the live object is still the one that apply wrote.
import { createHash } from "node:crypto";
import type { AgentOptions } from "node:https";
import { Agent, type Dispatcher as UndiciDispatcher } from "undici";
import { ApiException, KubeConfig, KubernetesObjectApi, PatchStrategy, type Cluster, type KubernetesObject, type RequestContext } from "@kubernetes/client-node";
import type { DesiredResource, ResourceTombstone } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import {
  buildManifests,
  describeObject as describe,
  FIELD_MANAGER,
  isManagedBy,
  managedSelector,
  ownedRefs,
  tracksDesiredVersion,
  withoutDesiredVersion,
  type KubeObject,
  type ObjectRef,
} from "../manifests.ts";
import { Listeners } from "../listeners.ts";
import { managedObject, TargetError, type AppliedVersions, type ManagedObject, type Target } from "../target.ts";

/** Kinds that listManaged() looks at (Namespaces are never pruned). */
const PRUNABLE_KINDS = [
  { apiVersion: "apps/v1", kind: "Deployment" },
  { apiVersion: "v1", kind: "Service" },
  { apiVersion: "cilium.io/v2", kind: "CiliumNetworkPolicy" },
];

const LIST_PAGE_SIZE = 500;

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

/** What this process last applied to an object: its content's digest and the resourceVersion written. */
interface LastApply {
  digest: string;
  resourceVersion: string;
}

export class KubernetesTarget implements Target {
  /** The cluster's access, also used by the agent's observer. */
  readonly kubeConfig: KubeConfig;
  readonly #api: KubernetesObjectApi;
  readonly #region: string;
  /** Namespaces applied by this process; forgotten when an apply into one finds it missing. */
  readonly #ensuredNamespaces = new Set<string>();
  /** By describeObject() name, for objects that do not track the desired version. */
  readonly #lastApplied = new Map<string, LastApply>();

  constructor({ kubeConfig, region }: KubernetesTargetOptions) {
    this.kubeConfig = kubeConfig;
    this.#api = KubernetesObjectApi.makeApiClient(kubeConfig);
    this.#region = region;
  }

  async apply(resource: DesiredResource, live?: AppliedVersions): Promise<AppliedVersions> {
    const { apply, absent } = buildManifests(resource, this.#region);
    const applied: AppliedVersions = new Map();
    for (const object of apply) {
      if (object.kind === "Namespace") {
        if (this.#ensuredNamespaces.has(object.metadata.name)) continue;
        await this.#serverSideApply(object);
        this.#ensuredNamespaces.add(object.metadata.name);
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
        const written = await this.#serverSideApply(object);
        const resourceVersion = written.metadata?.resourceVersion ?? "";
        applied.set(name, resourceVersion);
        if (digest !== undefined) this.#lastApplied.set(name, { digest, resourceVersion });
      } catch (error) {
        // The namespace was deleted behind our back: ensure it again on the retry.
        if (error instanceof TargetError && error.statusCode === 404) this.#ensuredNamespaces.delete(resource.namespace);
        throw error;
      }
    }
    for (const ref of absent) await this.#deleteManaged(ref);
    return applied;
  }

  async delete(tombstone: ResourceTombstone): Promise<void> {
    for (const ref of ownedRefs(tombstone.type, tombstone.namespace, tombstone.name)) await this.#deleteManaged(ref);
  }

  async listManaged(): Promise<ManagedObject[]> {
    const managed: ManagedObject[] = [];
    for (const { apiVersion, kind } of PRUNABLE_KINDS) {
      let continueToken: string | undefined;
      do {
        let page;
        try {
          page = await this.#api.list(apiVersion, kind, undefined, undefined, undefined, undefined, undefined, managedSelector(this.#region), LIST_PAGE_SIZE, continueToken);
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

  async #serverSideApply(object: KubeObject): Promise<KubernetesObject> {
    try {
      return await this.#api.patch(object as KubernetesObject, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
    } catch (error) {
      throw targetError(error, `apply ${describe(object)}`);
    }
  }

  /** Deletes the object only if it carries this region's managed labels (uid precondition: it is still that object). */
  async #deleteManaged(ref: ObjectRef): Promise<void> {
    const header = { apiVersion: ref.apiVersion, kind: ref.kind, metadata: { name: ref.name, namespace: ref.namespace } };
    this.#lastApplied.delete(describe(header));
    let live: KubernetesObject;
    try {
      live = await this.#api.read(header);
    } catch (error) {
      if (isNotFound(error) || isUnknownKind(error)) return;
      throw targetError(error, `read ${describe(header)}`);
    }
    if (!isManagedBy(live.metadata?.labels, this.#region)) return;
    try {
      await this.#api.delete(header, undefined, undefined, undefined, undefined, "Background", { preconditions: { uid: live.metadata?.uid } });
    } catch (error) {
      if (isNotFound(error)) return;
      throw targetError(error, `delete ${describe(header)}`);
    }
  }
}

/** Digest of what an apply of `object` would make of it, apart from the desired version. */
function contentDigest(object: KubeObject): string {
  return createHash("sha1").update(JSON.stringify(withoutDesiredVersion(object))).digest("base64");
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
  const body: unknown = typeof error.body === "string" ? safeJson(error.body) : error.body;
  const message = body && typeof body === "object" && "message" in body ? String(body.message) : `HTTP ${error.code}`;
  return new TargetError(`${what}: ${message}`, error.code, retryAfterMs(error.headers["retry-after"]));
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
