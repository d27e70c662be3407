// A small Kubernetes API client for the verbs the agent uses, over node:http(s) with one
// keep-alive pool per cluster (kube-connection.ts). In place of @kubernetes/client-node, whose
// generated API costs the agent some 40 MB of RSS (docs/benchmarks.md, finding 9).
//
// * Requests send and receive JSON: get, list (a page), create (POST), apply (server-side apply:
//   PATCH application/apply-patch+yaml, with fieldManager and force), replace (PUT), delete
//   (with DeleteOptions: preconditions, propagationPolicy).
// * watch() streams newline-delimited JSON events to a callback, one line at a time as the bytes
//   arrive: the socket is read only as fast as the callback returns (backpressure), and an
//   abort ends it.
// * Every answer that is not 2xx is a KubeApiError: the HTTP status, the Status object's reason
//   and message, the body, and Retry-After. Network failures are the socket's own errors.
// * Every request's outcome is reported to `requests` (client-go's rest_client_requests_total).
// * A request on a pooled keep-alive socket that ends without an answer (ECONNRESET, "socket
//   hang up") is sent once more on a new socket, as Go's net/http does: almost always the server
//   closed the idle connection before reading it (servers close idle connections on their own
//   schedule, Node's after 5 s). Every verb the agent sends may be repeated: GETs and applies
//   are idempotent, a repeated create meets 409 AlreadyExists and a repeated delete or Lease
//   update fails its precondition (404, 409), which the callers handle.
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { ListItemSplitter } from "./list-items.ts";
import { Listeners } from "./listeners.ts";
import type { KubeConnection } from "./kube-connection.ts";
import { KUBE_IDLE_TIMEOUT_MS } from "./kube-limits.ts";

const USER_AGENT = `flotilla-agent node/${process.versions.node}`;

/** One request to the Kubernetes API, as client-go's rest_client_requests_total labels it. */
export interface RestRequest {
  method: string;
  /** The response's status code, or "<error>" when none arrived (client-go's label). */
  code: string;
  host: string;
  /** An error after the response had begun (a watch broken midway): no new request, but the API server stopped answering. */
  broken?: boolean;
}

/** A Kubernetes object as the API sends it. */
export interface ApiObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    deletionTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [field: string]: unknown;
  };
  [field: string]: unknown;
}

/** A list page's metadata. */
export interface ListMetadata {
  resourceVersion?: string;
  continue?: string;
}

/** One watch event; for ERROR the object is a Status. */
export interface WatchEvent {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: ApiObject & { code?: number; message?: string; reason?: string };
}

/** Query parameters; undefined ones are left out. */
export type Query = Record<string, string | number | boolean | undefined>;

/** A failed request: the API server answered with a status that is not 2xx. */
export class KubeApiError extends Error {
  readonly statusCode: number;
  /** The Status object's reason (NotFound, Conflict, AlreadyExists, Expired, Forbidden, Invalid, …), if the body was one. */
  readonly reason: string | undefined;
  /** The Status object's message if the body was one, else "HTTP <code>". */
  readonly statusMessage: string;
  readonly body: string;
  /** The Retry-After header (seconds or an HTTP date), if any. */
  readonly retryAfter: string | undefined;

  constructor(what: string, statusCode: number, body: string, retryAfter: string | undefined) {
    const status = parseStatus(body);
    const statusMessage = status?.message ?? `HTTP ${statusCode}`;
    super(`${what}: ${statusMessage}`);
    this.name = "KubeApiError";
    this.statusCode = statusCode;
    this.reason = status?.reason;
    this.statusMessage = statusMessage;
    this.body = body;
    this.retryAfter = retryAfter;
  }
}

function parseStatus(body: string): { message?: string; reason?: string } | undefined {
  try {
    const status: unknown = JSON.parse(body);
    if (typeof status !== "object" || status === null) return undefined;
    const { message, reason } = status as { message?: unknown; reason?: unknown };
    return { message: typeof message === "string" ? message : undefined, reason: typeof reason === "string" && reason !== "" ? reason : undefined };
  } catch {
    return undefined;
  }
}

/** The HTTP status of a KubeApiError, else undefined (a network error). */
export function statusCodeOf(error: unknown): number | undefined {
  return error instanceof KubeApiError ? error.statusCode : undefined;
}

/** Where a kind's objects live: its plural and whether it is namespaced. Only the kinds the agent uses. */
const RESOURCES: Record<string, { plural: string; namespaced: boolean }> = {
  "v1/Namespace": { plural: "namespaces", namespaced: false },
  "v1/Service": { plural: "services", namespaced: true },
  "apps/v1/Deployment": { plural: "deployments", namespaced: true },
  "cilium.io/v2/CiliumNetworkPolicy": { plural: "ciliumnetworkpolicies", namespaced: true },
  "policy/v1/PodDisruptionBudget": { plural: "poddisruptionbudgets", namespaced: true },
  "autoscaling/v2/HorizontalPodAutoscaler": { plural: "horizontalpodautoscalers", namespaced: true },
  "v1/Secret": { plural: "secrets", namespaced: true },
  "coordination.k8s.io/v1/Lease": { plural: "leases", namespaced: true },
};

/** A kind, and the namespace and name of one of its objects (none for its whole collection). */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name?: string;
}

/**
 * The path of an object or of a collection: /api/v1/… for the core group, /apis/<group>/<version>/…
 * otherwise; namespaced kinds under namespaces/<namespace> when a namespace is given (a
 * collection without one is across all namespaces). Segments are URL-encoded.
 */
export function resourcePath({ apiVersion, kind, namespace, name }: ObjectRef): string {
  const resource = RESOURCES[`${apiVersion}/${kind}`];
  if (!resource) throw new TypeError(`no resource path known for ${apiVersion} ${kind}`);
  const segments = [apiVersion.includes("/") ? "apis" : "api", ...apiVersion.split("/")];
  if (resource.namespaced && namespace) segments.push("namespaces", namespace);
  segments.push(resource.plural);
  if (name !== undefined) segments.push(name);
  return `/${segments.map(encodeURIComponent).join("/")}`;
}

/** The path of `object` (its apiVersion, kind and metadata's namespace and name). */
export function objectPath(object: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } }): string {
  return resourcePath({ apiVersion: object.apiVersion, kind: object.kind, namespace: object.metadata.namespace, name: object.metadata.name });
}

export interface DeleteOptions {
  propagationPolicy?: "Background" | "Foreground" | "Orphan";
  preconditions?: { uid?: string; resourceVersion?: string };
}

/** A request body and its media type. */
interface Body {
  contentType: string;
  text: string | Buffer;
}

/** Server-side apply's media type: JSON is YAML, so it takes a JSON body as it is. */
const APPLY_PATCH = "application/apply-patch+yaml";

/** The election's own objects: never fenced by it. */
const LEASES_PATH = "/apis/coordination.k8s.io/";

export class KubeClient {
  /** Every request's outcome, for metrics and the cluster's reachability. */
  readonly requests = new Listeners<RestRequest>();
  readonly connection: KubeConnection;
  /** A request without a byte either way for this long fails (KUBE_IDLE_TIMEOUT_MS says why). */
  readonly idleTimeoutMs: number;
  /**
   * With leader election: called right before every request that changes the cluster is sent
   * (each attempt, retries after a stale socket included); throws when this process may not
   * write now, else returns a signal that aborts when that permission ends, which aborts the
   * request. Lease requests (coordination.k8s.io) are the election's own and pass.
   */
  writeFence: (() => AbortSignal) | undefined;

  constructor(connection: KubeConnection, { idleTimeoutMs = KUBE_IDLE_TIMEOUT_MS }: { idleTimeoutMs?: number } = {}) {
    this.connection = connection;
    this.idleTimeoutMs = idleTimeoutMs;
  }

  get<T = ApiObject>(path: string, query?: Query): Promise<T> {
    return this.#json("GET", path, query);
  }

  /**
   * One page of a list (`limit` and `continue` in the query page it), its items handed to
   * `onItem` one by one as they arrive rather than parsed as one page (list-items.ts says why);
   * resolves with the page's metadata (its resourceVersion and continue token).
   */
  async list<T = ApiObject>(path: string, query: Query, onItem: (item: T) => void): Promise<ListMetadata> {
    const response = await this.#send("GET", path, query, undefined);
    if (response.statusCode !== 200) throw await apiError("GET", path, response);
    response.setEncoding("utf8");
    const splitter = new ListItemSplitter(onItem as (item: unknown) => void);
    try {
      for await (const chunk of response as AsyncIterable<string>) splitter.push(chunk);
      return (splitter.end() as { metadata?: ListMetadata }).metadata ?? {};
    } catch (error) {
      response.destroy();
      if (error instanceof SyntaxError) throw new Error(`GET ${path}: the answer is not a JSON list: ${error.message}`);
      throw error;
    }
  }

  create<T extends ApiObject>(path: string, object: T, query?: Query): Promise<T> {
    return this.#json("POST", path, query, jsonBody(object));
  }

  /** Server-side apply of `object` to its path. */
  apply<T extends ApiObject>(path: string, object: T, { fieldManager, force }: { fieldManager: string; force?: boolean }): Promise<T> {
    return this.#json("PATCH", path, { fieldManager, force }, { contentType: APPLY_PATCH, text: JSON.stringify(object) });
  }

  /**
   * Server-side apply of a JSON body the caller built as bytes (a Secret with its values:
   * secret-request.ts). The body is zeroed once the request is done, sent or not; the answer,
   * which echoes the values, is read as bytes and zeroed, never parsed: a failed apply throws its
   * status, a successful one resolves with nothing.
   */
  async applyBytes(path: string, body: Buffer, { fieldManager, force }: { fieldManager: string; force?: boolean }): Promise<void> {
    try {
      const response = await this.#send("PATCH", path, { fieldManager, force }, { contentType: APPLY_PATCH, text: body });
      if (response.statusCode === undefined || response.statusCode < 200 || response.statusCode > 299) throw await apiError("PATCH", path, response);
      for await (const chunk of response as AsyncIterable<Buffer>) chunk.fill(0);
    } finally {
      body.fill(0);
    }
  }

  replace<T extends ApiObject>(path: string, object: T): Promise<T> {
    return this.#json("PUT", path, undefined, jsonBody(object));
  }

  delete(path: string, options: DeleteOptions = {}): Promise<ApiObject> {
    return this.#json("DELETE", path, undefined, jsonBody({ apiVersion: "v1", kind: "DeleteOptions", ...options }));
  }

  /**
   * Watches `path` (a collection) from `query` (resourceVersion, labelSelector,
   * allowWatchBookmarks, timeoutSeconds…), calling `onEvent` for each event in order. Resolves
   * when the server ends the stream (its timeoutSeconds) or `signal` aborts; rejects with a
   * KubeApiError if the watch is refused (e.g. 410 Gone for a resourceVersion too old), with the
   * socket's error if the connection fails, or with what `onEvent` throws.
   */
  async watch(path: string, query: Query, onEvent: (event: WatchEvent) => void, signal: AbortSignal): Promise<void> {
    let response: IncomingMessage;
    try {
      response = await this.#send("GET", path, { ...query, watch: true }, undefined, signal);
    } catch (error) {
      if (signal.aborted) return;
      throw error;
    }
    try {
      if (response.statusCode !== 200) throw await apiError("watch", path, response);
      response.setEncoding("utf8");
      let pending = "";
      for await (const chunk of response as AsyncIterable<string>) {
        pending += chunk;
        let start = 0;
        for (let end = pending.indexOf("\n"); end !== -1; end = pending.indexOf("\n", start)) {
          const line = pending.slice(start, end);
          start = end + 1;
          if (line.trim() !== "") onEvent(parseEvent(line, path));
        }
        pending = pending.slice(start);
      }
      if (pending.trim() !== "" && !signal.aborted) onEvent(parseEvent(pending, path));
    } catch (error) {
      if (signal.aborted) return;
      throw error;
    } finally {
      response.destroy();
    }
  }

  async #json<T>(method: string, path: string, query: Query | undefined, body?: Body): Promise<T> {
    const response = await this.#send(method, path, query, body);
    if (response.statusCode === undefined || response.statusCode < 200 || response.statusCode > 299) throw await apiError(method, path, response);
    const text = await readText(response);
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new Error(`${method} ${path}: the answer is not JSON (HTTP ${response.statusCode})`);
    }
  }

  /**
   * Sends the request; resolves with the response once its headers arrive. A request that failed
   * on a reused keep-alive socket before any answer goes again, as long as that is how it failed
   * (Go's net/http does the same): each such failure takes one closed socket out of the pool, and
   * a server that closed its idle connections closed all of them (B7 saw the retry meet a second
   * closed socket), so this ends with the pool's idle sockets, on a new socket at the latest.
   */
  async #send(method: string, path: string, query: Query | undefined, body: Body | undefined, signal?: AbortSignal): Promise<IncomingMessage> {
    for (;;) {
      try {
        return await this.#sendOnce(method, path, query, body, signal);
      } catch (error) {
        if (!(error instanceof StaleSocketError) || signal?.aborted) throw error;
      }
    }
  }

  /** One attempt of #send(); a StaleSocketError if a reused keep-alive socket turned out closed. */
  async #sendOnce(method: string, path: string, query: Query | undefined, body: Body | undefined, callerSignal?: AbortSignal): Promise<IncomingMessage> {
    const { server } = this.connection;
    const { agent, headers, auth } = await this.connection.credentials();
    // Checked here, after the last await before the request goes out: no older than the request.
    const fence = method !== "GET" && !path.startsWith(LEASES_PATH) ? this.writeFence?.() : undefined;
    const signal = fence && callerSignal ? AbortSignal.any([callerSignal, fence]) : (fence ?? callerSignal);
    const url = new URL(server);
    url.pathname = `${server.pathname.replace(/\/$/, "")}${path}`;
    for (const [name, value] of Object.entries(query ?? {})) if (value !== undefined) url.searchParams.set(name, String(value));
    const host = url.host;
    const report = this.requests.emit;
    return new Promise((resolve, reject) => {
      const send = url.protocol === "https:" ? httpsRequest : httpRequest;
      const request = send(url, {
        method,
        agent,
        auth,
        headers: {
          ...headers,
          accept: "application/json",
          // client-go's form (<binary>/<version>): the API server's audit log and metrics name the client.
          "user-agent": USER_AGENT,
          ...(body ? { "content-type": body.contentType, "content-length": Buffer.byteLength(body.text) } : {}),
        },
      });
      let answer: IncomingMessage | undefined;
      // Not http.request's `signal`: that destroys the request with an error even after its
      // response has ended, when its keep-alive socket is on its way back to the pool and has no
      // error listener (an uncaught exception). A response in progress fails with "aborted".
      if (signal) {
        const abort = () => {
          if (answer?.complete) return;
          if (!answer) reject(new DOMException(`${method} ${path}: aborted`, "AbortError"));
          request.destroy();
        };
        if (signal.aborted) abort();
        signal.addEventListener("abort", abort, { once: true });
        request.once("close", () => signal.removeEventListener("abort", abort));
      }
      request.setTimeout(this.idleTimeoutMs, () => request.destroy(new Error(`${method} ${path}: no answer for ${this.idleTimeoutMs} ms`)));
      request.once("response", (response) => {
        answer = response;
        report({ method, host, code: String(response.statusCode) });
        response.on("error", (error) => {
          if (!signal?.aborted && error.name !== "AbortError") report({ method, host, code: "<error>", broken: true });
        });
        resolve(response);
      });
      request.on("error", (error: NodeJS.ErrnoException) => {
        if (!answer && request.reusedSocket && (error.code === "ECONNRESET" || error.message === "socket hang up")) {
          reject(new StaleSocketError(`${method} ${path}: ${error.message}`, { cause: error }));
          return;
        }
        if (!answer && !signal?.aborted) report({ method, host, code: "<error>" });
        reject(answer ? error : new Error(`${method} ${path}: ${error.message}`, { cause: error }));
      });
      request.end(body?.text);
    });
  }
}

/** A request that failed on a reused keep-alive socket before any answer: it is sent again. */
class StaleSocketError extends Error {}

function jsonBody(value: unknown): Body {
  return { contentType: "application/json", text: JSON.stringify(value) };
}

function parseEvent(line: string, path: string): WatchEvent {
  try {
    return JSON.parse(line) as WatchEvent;
  } catch {
    throw new Error(`watch ${path}: an event is not JSON: ${line.slice(0, 100)}`);
  }
}

async function readText(response: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of response) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function apiError(what: string, path: string, response: IncomingMessage): Promise<KubeApiError> {
  const retryAfter = response.headers["retry-after"];
  return new KubeApiError(`${what} ${path}`, response.statusCode ?? 0, await readText(response), Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
}
