// Assembles a ctrl process: the services on one port, auth, metrics, health, shutdown.
import type { DescService } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import { compressionBrotli } from "@connectrpc/connect-node";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { HistoryService } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { OperatorService } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { ProjectService } from "@flotilla/proto/ctrl/v1/project_pb.js";
import { StatusService } from "@flotilla/proto/ctrl/v1/status_pb.js";
import { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { RolloutState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import { Health } from "@flotilla/proto/grpc/health/v1/health_pb.js";
import { ServerReflection } from "@flotilla/proto/grpc/reflection/v1/reflection_pb.js";
import { OPERATOR_TOKEN_PREFIX, Slots, type RetentionPolicy, type Store } from "@flotilla/store";
import { createLogger, healthEndpoints, serveHealth, type Logger } from "@flotilla/runtime";
import type http from "node:http";
import type { Http2ServerResponse } from "node:http2";
import { consoleHandler } from "@flotilla/console/assets";
import { AgentStreams } from "./agent-streams.ts";
import {
  actorOf,
  createAuthenticator,
  deniedCallsInterceptor,
  DEFAULT_TOKEN_CACHE_SIZE,
  DEFAULT_TOKEN_RECHECK_MS,
  projectCheckedInterceptor,
  type Principal,
} from "./auth.ts";
import { ProjectCatalog } from "./authorization/catalog.ts";
import { compressionGzipFast } from "./compression.ts";
import { compressionZstd } from "@flotilla/runtime/compression";
import { grpcServerStreaming } from "./grpc-server-streaming.ts";
import { connectErrors } from "./errors.ts";
import { authFailureLimit, DEFAULT_CONNECTION_BOUNDS, type ConnectionBounds } from "./connection-bounds.ts";
import { listenDual, type DualListener } from "./listener.ts";
import { DEFAULT_MEMORY_RELEASE_GROWTH_BYTES, DEFAULT_MEMORY_RELEASE_INTERVAL_MS, MemoryRelease } from "./memory-release.ts";
import { nodeAdapter } from "./node-adapter.ts";
import { CtrlMetrics } from "./metrics.ts";
import { clusterService, lostStreamError } from "./services/cluster-service.ts";
import { DEFAULT_STREAM_OPTIONS, type StreamOptions } from "./services/cluster/options.ts";
import { nodeRequestKey, resetTransport, type NodeServerRequest } from "./services/cluster/watch-deployment-changes.ts";
import { constants as h2constants } from "node:http2";
import type { ValidationOptions } from "./validate.ts";
import { deploymentService } from "./services/deployment-service.ts";
import { DEFAULT_STATUS_OPTIONS, type StatusOptions } from "./status/region-status.ts";
import { ChangePoller } from "./streaming/poller.ts";
import { healthService } from "./services/health.ts";
import { networkPolicyService } from "./services/network-policy-service.ts";
import { reflectionService } from "./services/reflection.ts";
import { rolloutService } from "./services/rollout-service.ts";
import { RolloutDriver } from "./rollouts/driver.ts";
import { SendTimeout } from "./send-timeout.ts";
import { DEFAULT_SEND_BUDGET_BYTES, DEFAULT_SEND_BUDGET_STALL_MS, SendBudget } from "./send-budget.ts";
import { requestGate } from "./request-gate.ts";
import { boundedConnectRequest, DECODE_OPTIONS, DEFAULT_DECODE_OPTIONS, requestBounds, type DecodeOptions } from "./request-body.ts";
import { earlyRefusal } from "./early-refusal.ts";
import { answerUnknownRpc } from "./unknown-rpc.ts";
import { regionService } from "./services/region-service.ts";
import { sentinelService } from "./services/sentinel-service.ts";
import { historyService } from "./services/history-service.ts";
import { operatorService } from "./services/operator-service.ts";
import { projectService } from "./services/project-service.ts";
import { notifierService } from "./services/notifier-service.ts";
import { NotificationDispatcher, type DispatcherOptions } from "./notifications/dispatcher.ts";
import { NotifierService } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { DEFAULT_WATCH_STATUS_OPTIONS, watchStatus } from "./services/status/watch-status.ts";
import { DEFAULT_STATUS_FEED_OPTIONS, StatusFeed } from "./streaming/status-feed.ts";
import { inFlightUnaryCalls } from "./in-flight.ts";
import { clientCertificateOf, tlsTransport, type TlsFiles } from "./tls.ts";
import { loginHandler } from "./oidc/login.ts";
import { DEFAULT_SESSION_MAX_AGE_MS, SessionCodec } from "./oidc/session.ts";
import { OidcVerifier, type OidcOptions } from "./oidc/verifier.ts";

/** Single sign-on (docs/guides/sso.md): ctrl verifies the issuer's ID tokens, and is the console's OIDC client. */
export interface SsoOptions extends Omit<OidcOptions, "audiences"> {
  /** The console's client id (ctrl is that client). */
  clientId: string;
  /** The console client's secret (read from a file). */
  clientSecret: string;
  /** The CLI's public client id (device authorization grant). */
  cliClientId: string;
  /** Audiences accepted; default the two client ids. */
  audiences?: readonly string[];
  /** ctrl's /auth/callback as the issuer knows it; default from the request's Host. */
  redirectUrl?: string;
  /** A console session lasts at most this long (never past its ID token). Default 8 h. */
  sessionMaxAgeMs?: number;
}

export interface CtrlOptions {
  store: Store;
  adminToken: string;
  host?: string;
  port?: number;
  /** Largest request message accepted (ReportObservedState's), in bytes. */
  readMaxBytes?: number;
  /** The other RPCs' message limits, the shape limits and the decode budget (request-body.ts). */
  decoding?: Partial<Omit<DecodeOptions, "readMaxBytes">>;
  /** How long shutdown waits for open requests before cutting them. */
  shutdownGraceMs?: number;
  /** How long the rollout driver's lease lasts unrenewed (DEFAULT_ROLLOUT_LEASE_MS). */
  rolloutLeaseMs?: number;
  /** Rollouts the driver looks at and writes per transaction (DEFAULT_ROLLOUT_BATCH_SIZE). */
  rolloutBatchSize?: number;
  /** Poll interval of the shared change poller: bounds latency of other replicas' writes. */
  pollIntervalMs?: number;
  stream?: Partial<StreamOptions>;
  /** A stream whose client reads nothing for this long is reset, freeing what it holds. */
  streamSendTimeoutMs?: number;
  /** Bytes of stream messages waiting for their clients, process-wide (send-budget.ts). Default 16 MiB. */
  sendBudgetBytes?: number;
  /** While the send budget is exhausted, a stream whose client has not taken its message for this long is reset. Default 1 s. */
  sendBudgetStallMs?: number;
  /** Agent-token lookups in the database at once (a spray of unknown tokens waits, unary calls do not). */
  tokenLookupConcurrency?: number;
  /** What one connection may cost (idle and request timeouts, stream, reset and ping caps). */
  bounds?: Partial<ConnectionBounds>;
  retention?: RetentionPolicy;
  /** Audit events older than this are deleted. Default 90 days. */
  auditMaxAgeMs?: number;
  /** Status events (what a resumed status stream catches up from) older than this are deleted. Default 1 h. */
  statusEventsMaxAgeMs?: number;
  /** How often the retention jobs (outbox, audit, status events) run. */
  retentionIntervalMs?: number;
  status?: Partial<StatusOptions>;
  /** System namespaces (kube-system, kube-public, kube-node-lease, default) resources may use anyway. Default none. */
  allowedSystemNamespaces?: readonly string[];
  /** Serve TLS with these files (re-read when they change); with a client CA, ClusterService requires mTLS. */
  tls?: TlsFiles;
  /** SPIFFE trust domain of agent certificates. Default "flotilla". */
  trustDomain?: string;
  /** Allow plaintext on a non-loopback address. */
  insecure?: boolean;
  /** Entries of each agent-token cache (known, unknown), at most. */
  tokenCacheSize?: number;
  /** A known agent token is looked up again, and open agent streams re-checked, this often. Default 500 ms. */
  tokenRecheckMs?: number;
  /** host:port of a separate /metrics, /healthz and /readyz listener; the public port then serves no /metrics. */
  metricsListen?: string;
  /** /readyz asks the database; it answers 503 when no answer came within this long. Default 2 s. */
  readinessTimeoutMs?: number;
  /** Serve the web console at / (default true). */
  console?: boolean;
  /** RSS growth after which ctrl returns freed memory to the system (memory-release.ts). Default 16 MiB; 0 turns it off. */
  memoryReleaseGrowthBytes?: number;
  /** The least time between two memory releases. Default 30 s. */
  memoryReleaseIntervalMs?: number;
  /** Notification delivery's bounds and address policy (notifications/dispatcher.ts); its agent.lost wait is status.staleAfterMs. */
  notifications?: Partial<Omit<DispatcherOptions, "agentLostAfterMs">>;
  /** Where ctrl logs. Default: text lines on stderr, level info. */
  log?: Logger;
  /** Single sign-on with an OIDC issuer; absent: static tokens only. */
  sso?: SsoOptions;
}

export const DEFAULT_POLL_INTERVAL_MS = 200;
/** How often the retention jobs run (CtrlOptions.retentionIntervalMs). */
export const DEFAULT_RETENTION_INTERVAL_MS = 60_000;
export const DEFAULT_RETENTION: RetentionPolicy = { maxAgeMs: 7 * 24 * 3600 * 1000, maxRows: 0 };
export const DEFAULT_AUDIT_MAX_AGE_MS = 90 * 24 * 3600 * 1000;
export const DEFAULT_STATUS_EVENTS_MAX_AGE_MS = 3600 * 1000;

export const DEFAULT_READ_MAX_BYTES = 4 * 1024 * 1024;
export const DEFAULT_READINESS_TIMEOUT_MS = 2000;
export const DEFAULT_STREAM_SEND_TIMEOUT_MS = 60_000;
export const DEFAULT_TOKEN_LOOKUP_CONCURRENCY = 2;

export interface Ctrl {
  url: string;
  /** Base URL of the --metrics-listen listener, if any. */
  metricsUrl: string | undefined;
  metrics: CtrlMetrics;
  /** Entries of the agent-token caches. */
  tokenCacheSize(): { known: number; unknown: number };
  /** Open streams of agent tokens, re-checked for revocation. */
  agentStreamCount(): number;
  /** Stops accepting, ends open streams cleanly, closes the listener (not the store). */
  shutdown(): Promise<void>;
}

const API_SERVICES: DescService[] = [
  ClusterService,
  DeploymentService,
  SentinelService,
  NetworkPolicyService,
  RegionService,
  OperatorService,
  HistoryService,
  StatusService,
  RolloutService,
  ProjectService,
  NotifierService,
];

export async function startCtrl(options: CtrlOptions): Promise<Ctrl> {
  const { store } = options;
  const listenHost = options.host ?? "127.0.0.1";
  // Checked before anything listens: the refusal must not expose the port even briefly.
  if (!options.tls && !options.insecure && !isLoopback(listenHost)) {
    throw new Error(
      `refusing to serve plaintext on ${listenHost}, which is not a loopback address: tokens would cross the network in the clear. ` +
        "Give --tls-cert and --tls-key, or --insecure if a TLS-terminating proxy is in front.",
    );
  }
  const log = options.log ?? createLogger({ fields: { process: "ctrl" } });
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
    log,
  );
  poller.start();
  const statusFeed = new StatusFeed(
    store.statusEvents,
    { ...DEFAULT_STATUS_FEED_OPTIONS, intervalMs: options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS },
    log,
  );
  await statusFeed.start();
  const rolloutDriver = new RolloutDriver(store, statusOptions, metrics, log, { leaseMs: options.rolloutLeaseMs, batchSize: options.rolloutBatchSize });
  rolloutDriver.start(statusFeed);
  metrics.countRolloutsWith(async () => new Map([...(await store.rollouts.countActive())].map(([state, n]) => [RolloutState[state] ?? String(state), n])));
  const dispatcher = new NotificationDispatcher(store, { ...options.notifications, agentLostAfterMs: statusOptions.staleAfterMs }, log, {
    delivered: (_notifier, outcome) => metrics.notificationDeliveries.inc({ outcome }),
    inFlight: (n) => metrics.notificationsInFlight.set(n),
  });
  dispatcher.start();
  // Rollout transitions and status reports of this replica may have written deliveries.
  const stopWakingDispatcher = store.onStatusEvents(() => dispatcher.wake());
  const stopWakingPoller = store.onCommit((regionIds, written) => poller.wake(regionIds, written));
  const stopWakingStatusFeed = store.onStatusEvents(() => statusFeed.wake());
  const memoryRelease = new MemoryRelease({
    growthBytes: options.memoryReleaseGrowthBytes ?? DEFAULT_MEMORY_RELEASE_GROWTH_BYTES,
    minIntervalMs: options.memoryReleaseIntervalMs ?? DEFAULT_MEMORY_RELEASE_INTERVAL_MS,
    log,
    onRelease: () => metrics.memoryReleases.inc(),
  });
  const retention = startRetention(
    store,
    {
      outbox: options.retention ?? DEFAULT_RETENTION,
      auditMaxAgeMs: options.auditMaxAgeMs ?? DEFAULT_AUDIT_MAX_AGE_MS,
      statusEventsMaxAgeMs: options.statusEventsMaxAgeMs ?? DEFAULT_STATUS_EVENTS_MAX_AGE_MS,
    },
    options.retentionIntervalMs ?? DEFAULT_RETENTION_INTERVAL_MS,
    log,
  );

  const sendBudget = new SendBudget(options.sendBudgetBytes ?? DEFAULT_SEND_BUDGET_BYTES, options.sendBudgetStallMs ?? DEFAULT_SEND_BUDGET_STALL_MS, () =>
    metrics.connectionBounds.inc({ reason: "send_budget" }),
  );
  metrics.countSendBudgetWith(() => sendBudget.used);
  const cluster = clusterService(store, poller, metrics, streamOptions, statusOptions, sendBudget, (ids) => void rolloutDriver.lookNow(ids));
  const tokenRecheckMs = options.tokenRecheckMs ?? DEFAULT_TOKEN_RECHECK_MS;
  // Project and role changes reach every replica's decisions as a revocation does.
  const catalog = new ProjectCatalog(store, tokenRecheckMs);
  const routes = (router: ConnectRouter) => {
    router.service(DeploymentService, deploymentService(store, statusOptions, validation));
    router.service(SentinelService, sentinelService(store, statusOptions, validation));
    router.service(NetworkPolicyService, networkPolicyService(store, validation));
    router.service(RegionService, regionService(store, statusOptions));
    router.service(ClusterService, cluster);
    router.service(OperatorService, operatorService(store, catalog));
    router.service(ProjectService, projectService(store, catalog));
    router.service(
      NotifierService,
      notifierService(store, dispatcher.options, () => dispatcher.wake()),
    );
    router.service(HistoryService, historyService(store, validation));
    router.service(StatusService, { watchStatus: watchStatus(store, statusFeed, statusOptions, DEFAULT_WATCH_STATUS_OPTIONS) });
    router.service(RolloutService, rolloutService(store, rolloutDriver, statusOptions));
    router.service(ServerReflection, reflectionService(served));
    router.service(Health, healthService(apiNames, draining.signal));
  };
  const readMaxBytes = options.readMaxBytes ?? DEFAULT_READ_MAX_BYTES;
  const decodeBounds = requestBounds(
    { ...DEFAULT_DECODE_OPTIONS, readMaxBytes, ...options.decoding },
    () => metrics.connectionBounds.inc({ reason: "decode_budget" }),
    memoryRelease,
  );
  const contextValues = (req: NodeServerRequest) => createContextValues().set(nodeRequestKey, req);
  const agentStreams = new AgentStreams((tokens) => stillValidTokens(store, tokens), tokenRecheckMs);
  // Token lookups draw from a bounded share of the database pool, as snapshots do.
  const tokenLookups = new Slots(options.tokenLookupConcurrency ?? DEFAULT_TOKEN_LOOKUP_CONCURRENCY);
  const tokenScreen = await store.agentTokens.screen(tokenRecheckMs);
  const operatorScreen = await store.operators.screen();
  const sso = options.sso;
  const oidc = sso && new OidcVerifier({ ...sso, audiences: sso.audiences ?? [sso.clientId, sso.cliClientId] });
  const sessions = sso && new SessionCodec(sso.clientSecret);
  const login =
    sso &&
    loginHandler({
      verifier: oidc!,
      sessions: sessions!,
      clientId: sso.clientId,
      clientSecret: sso.clientSecret,
      cliClientId: sso.cliClientId,
      redirectUrl: sso.redirectUrl,
      sessionMaxAgeMs: sso.sessionMaxAgeMs ?? DEFAULT_SESSION_MAX_AGE_MS,
      secure: Boolean(options.tls),
      log,
    });
  // Refused attempts are in the audit trail too.
  const recordDenied = (principal: Principal, rpc: string, project: string, error: ConnectError, object = { kind: "call", id: "" }) =>
    store.audit
      .record({
        author: { actor: actorOf(principal), message: error.rawMessage.slice(0, 1024), groups: principal.kind === "operator" ? principal.groups : undefined },
        action: rpc,
        objectKind: object.kind,
        objectId: object.id,
        revision: 0,
        project,
        decision: "denied",
      })
      .catch((e: unknown) => log.error(`audit: ${e instanceof Error ? e.message : String(e)}`));
  const auth = createAuthenticator({
    oidc,
    sessions,
    onDenied: recordDenied,
    adminToken: options.adminToken,
    mayBeAgentToken: (token) => tokenScreen.mayBeValid(token),
    authenticateAgent: (token) => tokenLookups.run(() => store.agentTokens.authenticate(token)),
    mayBeOperatorToken: operatorScreen,
    authenticateOperator: (token) => tokenLookups.run(() => store.operators.authenticate(token)),
    publicServices: new Set([ServerReflection.typeName, Health.typeName]),
    catalog,
    tokenCacheSize: options.tokenCacheSize ?? DEFAULT_TOKEN_CACHE_SIZE,
    knownTokenCacheMs: tokenRecheckMs,
    onTokenStream: (token, values, ended) => agentStreams.add(token, values.get(nodeRequestKey), ended),
    onExpiringStream: (expireTime, values, ended) => {
      const timer = setTimeout(
        () => resetTransport(values.get(nodeRequestKey), h2constants.NGHTTP2_CANCEL),
        Math.min(2 ** 31 - 1, Math.max(0, expireTime - Date.now())),
      );
      timer.unref();
      ended.addEventListener("abort", () => clearTimeout(timer), { once: true });
    },
    clientCertificate: options.tls?.clientCaFile ? (values) => clientCertificateOf(values.get(nodeRequestKey)) : undefined,
  });
  // connect's default list, with gzip at its fastest level, and zstd for the clients that
  // offer it (the agent). A response uses the first of the client's list that ctrl has.
  const acceptCompression = [compressionZstd, compressionGzipFast, compressionBrotli];
  const unaryCalls = inFlightUnaryCalls();
  const interceptors = [metrics.interceptor(connectErrors(log), log), unaryCalls.interceptor, deniedCallsInterceptor(recordDenied), projectCheckedInterceptor];
  const bounds = { ...DEFAULT_CONNECTION_BOUNDS, ...options.bounds };
  const onBound = (reason: string) => metrics.connectionBounds.inc({ reason });
  const authFailed = authFailureLimit(bounds.maxAuthFailuresPerConnection, onBound);
  // Authentication runs before a request's body is read.
  const gate = requestGate(
    [auth.interceptor],
    (ctx, error) => metrics.rejected(ctx.service.typeName, ctx.method.name, error),
    acceptCompression.map((c) => c.name),
    (ctx) => {
      const req = ctx.values.get(nodeRequestKey);
      if (req) authFailed(req, ctx.responseHeader);
    },
  );
  // gRPC watch and sync streams skip connect's per-message pipeline (the watch fan-out's hot
  // path), and send their headers at once.
  const servedDirectly = grpcServerStreaming({
    routes: [
      { method: ClusterService.method.watchDeploymentChanges, impl: cluster.watchDeploymentChanges },
      // Snapshot batches are large and few: worth compressing, as connect would.
      { method: ClusterService.method.syncDesiredState, impl: cluster.syncDesiredState, compressResponses: true },
    ],
    interceptors,
    requestGate: gate,
    requestBounds: decodeBounds,
    acceptCompression,
    shutdownSignal: draining.signal,
    contextValues,
  });
  const webConsole = options.console === false ? undefined : consoleHandler();
  const unhealthy = () => (draining.signal.aborted ? "draining" : undefined);
  const checks = { registry: metrics.registry, unhealthy, notReady: readiness(store, unhealthy, options.readinessTimeoutMs ?? DEFAULT_READINESS_TIMEOUT_MS) };
  // With --metrics-listen, /metrics is served there only (health on both).
  const health = healthEndpoints(options.metricsListen ? { ...checks, registry: undefined } : checks);
  const connectHandler = nodeAdapter({
    routes,
    readMaxBytes,
    acceptCompression,
    // A misspelt field must fail loudly, not be dropped silently.
    jsonOptions: { ignoreUnknownFields: false },
    binaryOptions: DECODE_OPTIONS,
    request: (method, request) => boundedConnectRequest(method, request, decodeBounds, acceptCompression),
    shutdownSignal: draining.signal,
    contextValues,
    interceptors,
    requestGate: gate,
    logError: (line) => log.error(line),
    async fallback(req, res) {
      if (answerUnknownRpc(req, res as http.ServerResponse | Http2ServerResponse)) return;
      if (login && (await login(req, res as http.ServerResponse | Http2ServerResponse))) return;
      if (webConsole?.(req, res as http.ServerResponse | Http2ServerResponse)) return;
      if (await health(req, res)) return;
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("not found\n");
    },
  });

  const sendTimeout = new SendTimeout(options.streamSendTimeoutMs ?? DEFAULT_STREAM_SEND_TIMEOUT_MS, () =>
    metrics.connectionBounds.inc({ reason: "send_timeout" }),
  );
  // Before anything else: a spray of missing or forged tokens costs ctrl little.
  const refused = earlyRefusal({
    services: API_SERVICES,
    refusal: auth.refusal,
    acceptEncodings: acceptCompression.map((c) => c.name),
    rejected: (service, method, error) => metrics.rejected(service, method, error),
    unauthenticated: authFailed,
  });
  const handler = (req: NodeServerRequest, res: http.ServerResponse | Http2ServerResponse) => {
    if (refused(req, res)) return;
    sendTimeout.watch(req, res);
    if ("stream" in req && servedDirectly(req)) return;
    connectHandler(req as never, res as never);
  };
  const secure =
    options.tls && tlsTransport({ ...options.tls, trustDomain: options.trustDomain ?? "flotilla", handshakeTimeoutMs: bounds.firstRequestTimeoutMs, log });
  const metricsListener = options.metricsListen ? await serveHealth(options.metricsListen, checks) : undefined;
  const listener: DualListener = await listenDual(listenHost, options.port ?? 7070, handler, bounds, onBound, secure);
  const { address, port } = listener.address;
  const host = address.includes(":") ? `[${address}]` : address;
  return {
    url: `${secure ? "https" : "http"}://${host}:${port}`,
    metricsUrl: metricsListener?.url,
    metrics,
    tokenCacheSize: auth.cacheSize,
    agentStreamCount: () => agentStreams.size,
    async shutdown() {
      if (draining.signal.aborted) return listener.closed;
      // Open streams end with UNAVAILABLE: clients reconnect (to another replica) and resume.
      draining.abort(new ConnectError("ctrl is shutting down; reconnect", Code.Unavailable));
      listener.drain();
      clearInterval(retention);
      memoryRelease.stop();
      agentStreams.stop();
      await rolloutDriver.stop();
      stopWakingDispatcher();
      await dispatcher.stop();
      stopWakingPoller();
      stopWakingStatusFeed();
      await Promise.all([poller.stop(), statusFeed.stop()]);
      const grace = new Promise<void>((resolve) => setTimeout(resolve, options.shutdownGraceMs ?? 5000).unref());
      // Handlers of calls whose clients left still run: the store must outlive their queries.
      await Promise.race([Promise.all([listener.closed, unaryCalls.idle()]), grace]);
      listener.destroy();
      await Promise.all([listener.closed, metricsListener?.close()]);
    },
  };
}

/**
 * /readyz: not while draining, nor while the database does not answer within `timeoutMs` or its
 * schema is behind. Probes arriving while a check runs share it (one query however many probe).
 */
function readiness(store: Store, unhealthy: () => string | undefined, timeoutMs: number): () => Promise<string | undefined> {
  let running: Promise<string | undefined> | undefined;
  return () => {
    const problem = unhealthy();
    if (problem) return Promise.resolve(problem);
    running ??= Promise.race([
      store.unavailable(),
      new Promise<string>((resolve) => setTimeout(resolve, timeoutMs, `database unreachable: no answer within ${timeoutMs} ms`).unref()),
    ]).finally(() => (running = undefined));
    return running;
  };
}

/** 127.0.0.0/8, ::1 and localhost: reachable from this host only. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^(::ffff:)?127\.\d+\.\d+\.\d+$/.test(host);
}

interface RetentionJobs {
  outbox: RetentionPolicy;
  auditMaxAgeMs: number;
  statusEventsMaxAgeMs: number;
}

function startRetention(store: Store, jobs: RetentionJobs, intervalMs: number, log: Logger): NodeJS.Timeout {
  let running = false;
  const timer = setInterval(async () => {
    if (running) return;
    running = true;
    const now = Date.now();
    try {
      await store.changes.prune(jobs.outbox, now);
      await store.audit.prune(jobs.auditMaxAgeMs, now);
      await store.observations.pruneTransitions(jobs.auditMaxAgeMs, now);
      // Analysis measurements are the record of why a rollout went on or back: kept as long.
      await store.analysis.prune(jobs.auditMaxAgeMs, now);
      await store.statusEvents.prune(jobs.statusEventsMaxAgeMs, now);
      // Notification events whose deliveries are done are a record, kept as long as the audit trail.
      await store.notifications.prune(jobs.auditMaxAgeMs, now);
    } catch (error) {
      log.error(`retention: ${error instanceof Error ? error.message : String(error)}`);
    } finally {
      running = false;
    }
  }, intervalMs);
  timer.unref();
  return timer;
}

/** Of the tokens of open streams, those still valid (agent tokens and operator tokens). */
async function stillValidTokens(store: Store, tokens: string[]): Promise<Set<string>> {
  const operatorTokens = tokens.filter((t) => t.startsWith(OPERATOR_TOKEN_PREFIX));
  const agentTokens = tokens.filter((t) => !t.startsWith(OPERATOR_TOKEN_PREFIX));
  const [agents, operators] = await Promise.all([store.agentTokens.stillValid(agentTokens), store.operators.stillValid(operatorTokens)]);
  return new Set([...agents, ...operators]);
}
