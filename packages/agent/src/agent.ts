// Wires one agent together: ctrl connection → desired table → work queue → target, plus prune
// after every complete snapshot, the observer and reporter (status to ctrl) and the
// health/metrics endpoint.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import type { BackoffOptions } from "./backoff.ts";
import { Connection } from "./connection.ts";
import { DesiredTable } from "./desired-table.ts";
import { AgentMetrics } from "./metrics.ts";
import { DEFAULT_REFRESH_INTERVAL_MS, DEFAULT_REFRESH_PER_SECOND, DriftCorrector } from "./drift.ts";
import { clusterObservations, tableObservations, type ObservationSource } from "./observation.ts";
import type { Observer } from "./observer.ts";
import { DEFAULT_PRUNE, prune, type PruneOptions } from "./prune.ts";
import { DEFAULT_CONCURRENCY, DEFAULT_RETRY_BACKOFF, WorkQueue } from "./queue.ts";
import { DEFAULT_NAMESPACE_RULES, type NamespaceRules } from "./namespaces.ts";
import { DEFAULT_OWNERSHIP_RECHECK_MS, reconciler } from "./reconciler.ts";
import { DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_REPORT_INTERVAL_MS, Reporter } from "./reporter.ts";
import type { Target } from "./target.ts";
import { APPLIED_KINDS } from "./watched-kinds.ts";

export interface AgentOptions {
  /** ctrl's base URL (gRPC over HTTP/2). */
  ctrlUrl: string;
  region: string;
  /** Agent token of the region, sent as `Authorization: Bearer`. */
  token: string;
  target: Target;
  /** Keys reconciled at once. Default 8. */
  concurrency?: number;
  /** Per-key retry backoff of failed reconciles. Default 100 ms .. 5 min. */
  retryBackoff?: BackoffOptions;
  /** Reconnect backoff towards ctrl. Default 500 ms .. 30 s. */
  reconnectBackoff?: BackoffOptions;
  /** Periodic full sync. Default 10 min (jittered ±10%). */
  fullSyncIntervalMs?: number;
  /** ctrl's bookmark interval; 3× without any message means a dead stream. Default 5 s. */
  bookmarkIntervalMs?: number;
  /** Status reports to ctrl: at most one call per this interval. Default 250 ms. */
  reportIntervalMs?: number;
  /** A report (an empty heartbeat if nothing changed) at least this often. Default 5 s. */
  heartbeatIntervalMs?: number;
  /** Observer (cluster targets only): the API server's watch bookmark interval; 3× silent restarts the watch. Default 60 s. */
  observerBookmarkIntervalMs?: number;
  /** Observer: server-side timeout of each watch request. Default 300 s. */
  observerWatchTimeoutSeconds?: number;
  /** Observer: backoff after failed lists and watches. Default 500 ms .. 30 s. */
  observerBackoff?: BackoffOptions;
  /** Drift correction (cluster targets only): re-apply resources last applied longer ago than this. Default 30 min. */
  refreshIntervalMs?: number;
  /** Drift correction: resources re-applied per second by the periodic refresh, at most. Default 20. */
  refreshPerSecond?: number;
  /** Namespaces the agent may write into. Default: all but kube-system, kube-public, kube-node-lease and default. */
  namespaces?: NamespaceRules;
  /** An ownership conflict (an existing object that is not the agent's) is checked again this often. Default 30 s. */
  ownershipRecheckMs?: number;
  /** Prune safety valve. Default: at most half of the managed objects at once, not forced. */
  prune?: Partial<PruneOptions>;
  /** host:port for /healthz, /readyz and /metrics (port 0 picks one); none if absent. */
  listen?: string;
  log?: (message: string) => void;
}

export interface Agent {
  /** Resolves once the first complete snapshot has been dispatched to the work queue. */
  ready: Promise<void>;
  metrics: AgentMetrics;
  table: DesiredTable;
  /** Base URL of the health/metrics listener, if `listen` was given. */
  url: string | undefined;
  /** Stops syncing and waits for the reconciles in flight. */
  stop(): Promise<void>;
}

export const DEFAULT_FULL_SYNC_INTERVAL_MS = 10 * 60_000;
export const DEFAULT_BOOKMARK_INTERVAL_MS = 5000;
export const DEFAULT_RECONNECT_BACKOFF: BackoffOptions = { minMs: 500, maxMs: 30_000 };

export async function startAgent(options: AgentOptions): Promise<Agent> {
  const log = options.log ?? ((message: string) => console.error(`agent[${options.region}]: ${message}`));
  const metrics: AgentMetrics = new AgentMetrics({ queueDepth: () => queue.length, desiredCounts: () => table.counts() });
  const queue = new WorkQueue({
    concurrency: options.concurrency ?? DEFAULT_CONCURRENCY,
    backoff: options.retryBackoff ?? DEFAULT_RETRY_BACKOFF,
    onCoalesced: () => metrics.coalesced.inc(),
    onHandlerError: (key, error) => log(`reconcile ${key}: ${error instanceof Error ? error.message : String(error)}`),
  });
  const table = new DesiredTable((key) => {
    queue.add(key);
    reporter.touch(key);
  });
  const { target } = options;
  const reconcile = reconciler({
    table,
    queue,
    target,
    metrics,
    log,
    liveVersions: (key) => observer?.liveVersions(key) ?? new Map(),
    namespaces: options.namespaces ?? DEFAULT_NAMESPACE_RULES,
    ownershipRecheckMs: options.ownershipRecheckMs ?? DEFAULT_OWNERSHIP_RECHECK_MS,
  });
  const working = queue.run(async (key) => {
    try {
      await reconcile(key);
    } finally {
      reporter.touch(key);
    }
  });

  const auth: Interceptor = (next) => (request) => {
    request.header.set("authorization", `Bearer ${options.token}`);
    return next(request);
  };
  const client = createClient(ClusterService, createGrpcTransport({ baseUrl: options.ctrlUrl, interceptors: [auth] }));
  const pruneOptions = { ...DEFAULT_PRUNE, ...options.prune };
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  let isReady = false;
  // With a cluster target, the observer watches what the cluster really runs (for status and
  // drift correction); a render target has nothing to watch, so its observations come from the
  // desired table alone. The observer module (and with it @kubernetes/client-node, some 80 MB of
  // RSS) is loaded only then.
  const { kubeConfig } = target;
  let drift: DriftCorrector | undefined;
  let observer: Observer | undefined;
  if (kubeConfig) {
    const { Observer, DEFAULT_OBSERVER_BACKOFF, DEFAULT_OBSERVER_BOOKMARK_INTERVAL_MS, DEFAULT_WATCH_TIMEOUT_SECONDS } = await import("./observer.ts");
    const corrector = new DriftCorrector({
      table,
      region: options.region,
      metrics,
      refreshIntervalMs: options.refreshIntervalMs ?? DEFAULT_REFRESH_INTERVAL_MS,
      refreshPerSecond: options.refreshPerSecond ?? DEFAULT_REFRESH_PER_SECOND,
    });
    drift = corrector;
    observer = new Observer({
      kubeConfig,
      region: options.region,
      kinds: APPLIED_KINDS,
      bookmarkIntervalMs: options.observerBookmarkIntervalMs ?? DEFAULT_OBSERVER_BOOKMARK_INTERVAL_MS,
      watchTimeoutSeconds: options.observerWatchTimeoutSeconds ?? DEFAULT_WATCH_TIMEOUT_SECONDS,
      backoff: options.observerBackoff ?? DEFAULT_OBSERVER_BACKOFF,
      onChange: (change) => {
        if (change.key !== undefined) reporter.touch(change.key);
        corrector.onChange(change);
      },
      onRestart: (reason) => metrics.observerRestarts.inc({ reason }),
      log,
    });
  }
  const source: ObservationSource = observer ? clusterObservations(table, observer) : tableObservations(table);
  const reporter: Reporter = new Reporter({
    client,
    region: options.region,
    source,
    cursor: () => connection.cursor,
    reportIntervalMs: options.reportIntervalMs ?? DEFAULT_REPORT_INTERVAL_MS,
    heartbeatIntervalMs: options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS,
    metrics,
    log,
  });
  const connection: Connection = new Connection({
    client,
    region: options.region,
    table,
    metrics,
    fullSyncIntervalMs: options.fullSyncIntervalMs ?? DEFAULT_FULL_SYNC_INTERVAL_MS,
    bookmarkIntervalMs: options.bookmarkIntervalMs ?? DEFAULT_BOOKMARK_INTERVAL_MS,
    reconnectBackoff: options.reconnectBackoff ?? DEFAULT_RECONNECT_BACKOFF,
    log,
    onConnected: () => reporter.requestFullSet(),
    async afterSnapshot(version) {
      try {
        await prune({ table, target, metrics, log }, version, pruneOptions);
      } catch (error) {
        // The next full sync prunes again; the watch must not wait for the cluster.
        log(`prune failed: ${error instanceof Error ? error.message : String(error)}`);
      }
      isReady = true;
      markReady();
    },
  });
  const stopping = new AbortController();
  const connected = connection.run(stopping.signal);
  const watching = observer?.run(stopping.signal);
  const refreshing = drift?.runRefresh(stopping.signal);
  // Nothing is worth reporting before the first snapshot: the cursor would be 0.
  const readyOrStopped = new Promise<void>((resolve) => {
    void ready.then(resolve);
    stopping.signal.addEventListener("abort", () => resolve(), { once: true });
  });
  const reporting = readyOrStopped.then(() => reporter.run(stopping.signal));

  const server = options.listen === undefined ? undefined : await listen(options.listen, metrics, () => isReady);
  return {
    ready,
    metrics,
    table,
    url: server && urlOf(server),
    async stop() {
      stopping.abort();
      await Promise.all([connected, watching, refreshing, reporting]);
      queue.shutDown();
      await working;
      if (server) {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await closed;
      }
    },
  };
}

/** /healthz (alive), /readyz (first complete sync dispatched) and /metrics. */
async function listen(address: string, metrics: AgentMetrics, isReady: () => boolean): Promise<Server> {
  const separator = address.lastIndexOf(":");
  const host = address.slice(0, separator).replace(/^\[(.*)\]$/, "$1") || "127.0.0.1";
  const port = Number(address.slice(separator + 1));
  if (separator < 0 || !Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`listen address must be host:port, got ${JSON.stringify(address)}`);
  const server = createServer(async (req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method === "GET" && path === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
    } else if (req.method === "GET" && path === "/readyz") {
      const ready = isReady();
      res.writeHead(ready ? 200 : 503, { "content-type": "text/plain" }).end(ready ? "ok\n" : "waiting for the first complete sync\n");
    } else if (req.method === "GET" && path === "/metrics") {
      res.writeHead(200, { "content-type": metrics.registry.contentType }).end(await metrics.registry.metrics());
    } else {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return server;
}

function urlOf(server: Server): string {
  const { address, port } = server.address() as AddressInfo;
  return `http://${address.includes(":") ? `[${address}]` : address}:${port}`;
}
