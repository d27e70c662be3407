// Assembles a ctrl process: the services on one port, auth, metrics, health, shutdown.
import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import { compressionBrotli, connectNodeAdapter } from "@connectrpc/connect-node";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import { Health } from "@flotilla/proto/grpc/health/v1/health_pb.js";
import { ServerReflection } from "@flotilla/proto/grpc/reflection/v1/reflection_pb.js";
import type { RetentionPolicy, Store } from "@flotilla/store";
import { healthEndpoints } from "@flotilla/runtime";
import type http from "node:http";
import type { Http2ServerResponse } from "node:http2";
import { authInterceptor } from "./auth.ts";
import { compressionGzipFast } from "./compression.ts";
import { grpcServerStreaming } from "./grpc-server-streaming.ts";
import { toConnectError } from "./errors.ts";
import { listenDual, type DualListener } from "./listener.ts";
import { CtrlMetrics } from "./metrics.ts";
import { clusterService, lostStreamError } from "./services/cluster-service.ts";
import { DEFAULT_STREAM_OPTIONS, type StreamOptions } from "./services/cluster/options.ts";
import { nodeRequestKey, type NodeServerRequest } from "./services/cluster/watch-deployment-changes.ts";
import type { ValidationOptions } from "./validate.ts";
import { deploymentService } from "./services/deployment-service.ts";
import { DEFAULT_STATUS_OPTIONS, type StatusOptions } from "./status/region-status.ts";
import { ChangePoller } from "./streaming/poller.ts";
import { healthService } from "./services/health.ts";
import { networkPolicyService } from "./services/network-policy-service.ts";
import { reflectionService } from "./services/reflection.ts";
import { regionService } from "./services/region-service.ts";
import { sentinelService } from "./services/sentinel-service.ts";

export interface CtrlOptions {
  store: Store;
  adminToken: string;
  host?: string;
  port?: number;
  /** Largest request message accepted, in bytes. */
  readMaxBytes?: number;
  /** How long shutdown waits for open requests before cutting them. */
  shutdownGraceMs?: number;
  /** Poll interval of the shared change poller: bounds latency of other replicas' writes. */
  pollIntervalMs?: number;
  stream?: Partial<StreamOptions>;
  retention?: RetentionPolicy;
  /** How often the outbox retention job runs. */
  retentionIntervalMs?: number;
  status?: Partial<StatusOptions>;
  /** System namespaces (kube-system, kube-public, kube-node-lease, default) resources may use anyway. Default none. */
  allowedSystemNamespaces?: readonly string[];
}

export const DEFAULT_POLL_INTERVAL_MS = 200;
export const DEFAULT_RETENTION: RetentionPolicy = { maxAgeMs: 7 * 24 * 3600 * 1000, maxRows: 0 };

export const DEFAULT_READ_MAX_BYTES = 4 * 1024 * 1024;

export interface Ctrl {
  url: string;
  metrics: CtrlMetrics;
  /** Stops accepting, ends open streams cleanly, closes the listener (not the store). */
  shutdown(): Promise<void>;
}

const API_SERVICES: DescService[] = [ClusterService, DeploymentService, SentinelService, NetworkPolicyService, RegionService];

export async function startCtrl(options: CtrlOptions): Promise<Ctrl> {
  const { store } = options;
  const metrics = new CtrlMetrics();
  const draining = new AbortController();
  const served = [...API_SERVICES, ServerReflection, Health];
  const apiNames = new Set(API_SERVICES.map((s) => s.typeName));
  const streamOptions = { ...DEFAULT_STREAM_OPTIONS, ...options.stream };
  const statusOptions = { ...DEFAULT_STATUS_OPTIONS, ...options.status };
  const validation: ValidationOptions = { allowedSystemNamespaces: new Set(options.allowedSystemNamespaces ?? []) };
  const poller = new ChangePoller(
    store.changes,
    { intervalMs: options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS, readLimit: 1000 },
    metrics,
    lostStreamError,
  );
  poller.start();
  const stopWaking = store.onCommit(() => poller.wake());
  const retention = startRetention(store, options.retention ?? DEFAULT_RETENTION, options.retentionIntervalMs ?? 60_000);

  const cluster = clusterService(store, poller, metrics, streamOptions, statusOptions);
  const routes = (router: ConnectRouter) => {
    router.service(DeploymentService, deploymentService(store, statusOptions, validation));
    router.service(SentinelService, sentinelService(store, statusOptions, validation));
    router.service(NetworkPolicyService, networkPolicyService(store, validation));
    router.service(RegionService, regionService(store, statusOptions));
    router.service(ClusterService, cluster);
    router.service(ServerReflection, reflectionService(served));
    router.service(Health, healthService(apiNames, draining.signal));
  };
  const readMaxBytes = options.readMaxBytes ?? DEFAULT_READ_MAX_BYTES;
  const contextValues = (req: NodeServerRequest) => createContextValues().set(nodeRequestKey, req);
  const interceptors = [
    metrics.interceptor(toConnectError),
    authInterceptor({
      adminToken: options.adminToken,
      agentRegion: (token) => store.agentTokens.regionOf(token),
      publicServices: new Set([ServerReflection.typeName, Health.typeName]),
    }),
  ];
  // The watch fan-out's hot path: gRPC watch streams skip connect's per-message pipeline.
  // connect's default list, with gzip at its fastest level.
  const acceptCompression = [compressionGzipFast, compressionBrotli];
  const servedDirectly = grpcServerStreaming({
    routes: [{ method: ClusterService.method.watchDeploymentChanges, impl: cluster.watchDeploymentChanges }],
    interceptors,
    readMaxBytes,
    acceptCompression,
    shutdownSignal: draining.signal,
    contextValues,
  });
  const health = healthEndpoints({ registry: metrics.registry, unhealthy: () => (draining.signal.aborted ? "draining" : undefined) });
  const connectHandler = connectNodeAdapter({
    routes,
    readMaxBytes,
    acceptCompression,
    // A misspelt field must fail loudly, not be dropped silently.
    jsonOptions: { ignoreUnknownFields: false },
    shutdownSignal: draining.signal,
    contextValues,
    interceptors,
    async fallback(req, res) {
      if (await health(req, res)) return;
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("not found\n");
    },
  });

  const handler = (req: NodeServerRequest, res: http.ServerResponse | Http2ServerResponse) => {
    if ("stream" in req && servedDirectly(req)) return;
    connectHandler(req as never, res as never);
  };
  const listener: DualListener = await listenDual(options.host ?? "127.0.0.1", options.port ?? 7070, handler);
  const { address, port } = listener.address;
  const host = address.includes(":") ? `[${address}]` : address;
  return {
    url: `http://${host}:${port}`,
    metrics,
    async shutdown() {
      if (draining.signal.aborted) return listener.closed;
      // Open streams end with UNAVAILABLE: clients reconnect (to another replica) and resume.
      draining.abort(new ConnectError("ctrl is shutting down; reconnect", Code.Unavailable));
      listener.drain();
      clearInterval(retention);
      stopWaking();
      await poller.stop();
      const grace = new Promise<void>((resolve) => setTimeout(resolve, options.shutdownGraceMs ?? 5000).unref());
      await Promise.race([listener.closed, grace]);
      listener.destroy();
      await listener.closed;
    },
  };
}

function startRetention(store: Store, policy: RetentionPolicy, intervalMs: number): NodeJS.Timeout {
  let running = false;
  const timer = setInterval(async () => {
    if (running) return;
    running = true;
    try {
      await store.changes.prune(policy, Date.now());
    } catch (error) {
      console.error(`ctrl: outbox retention: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      running = false;
    }
  }, intervalMs);
  timer.unref();
  return timer;
}
