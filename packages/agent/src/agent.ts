// One agent, built from its AgentConfig: ctrl connection → desired table → work queue →
// reconciler → target, plus prune after every complete snapshot, the observer and drift
// correction (cluster targets), the reporter (status to ctrl) and the health/metrics endpoints.
// With leader election (leadership.ts) every agent of a region syncs and observes, but only the
// leader dispatches to the target, prunes and reports.
//
// Every part is built from the config and the parts above it, in dependency order, so none refers
// to one built after it; notifications that run against that order (the table and the observer
// tell the reporter, which reads them) go through Listeners built first. The parts that run
// start in order and stop in reverse (lifecycle.ts).
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { serveHealth, type HealthServer } from "@flotilla/runtime";
import { resolveConfig, type AgentConfig, type ResolvedAgentConfig } from "./config.ts";
import { Connection, secretEnvSealFetch } from "./connection.ts";
import { ctrlTransport } from "./ctrl-transport.ts";
import { DesiredTable, desiredResource } from "./desired-table.ts";
import { resourcePath, type KubeClient } from "./kube-api.ts";
import { secretEnvName } from "./manifests.ts";
import { resourceKey } from "./keys.ts";
import { DriftCorrector } from "./drift.ts";
import { loop, startInOrder, type Runnable } from "./lifecycle.ts";
import { Leadership } from "./leadership.ts";
import { Listeners } from "./listeners.ts";
import { MemoryRelease } from "./memory-release.ts";
import { AgentMetrics } from "./metrics.ts";
import { clusterObservations, tableObservations } from "./observation.ts";
import type { ObjectChange, Observer } from "./observer.ts";
import { dispatch } from "./queue/dispatch.ts";
import { WorkQueue } from "./queue.ts";
import { newReconciler } from "./reconciler.ts";
import { Readiness } from "./readiness.ts";
import { resolvedBeforeAbort } from "./backoff.ts";
import { Reporter } from "./reporter.ts";
import { AnalysisRunner } from "./analysis.ts";
import { APPLIED_KINDS } from "./watched-kinds.ts";

export interface Agent {
  /** Resolves once the first complete snapshot has been dispatched to the work queue. */
  ready: Promise<void>;
  metrics: AgentMetrics;
  table: DesiredTable;
  /** Base URL of the health/metrics listener, if `listen` was given. */
  url: string | undefined;
  /** Stops the parts in reverse order of their start; waits for the reconciles in flight. */
  stop(): Promise<void>;
}

export async function startAgent(options: AgentConfig): Promise<Agent> {
  const config = resolveConfig(options);
  const { region, target, log } = config;
  // Notifications against the build order: keys whose status may have changed, (re)connects,
  // and reports sent (the memory release, built after the reporter, waits for them to end).
  const statusChanged = new Listeners<string>();
  const connected = new Listeners<void>();
  const reportSent = new Listeners<void>();

  const metrics = new AgentMetrics();
  const leadership = await leadershipOf(config, metrics);
  const queue = new WorkQueue({
    backoff: config.retryBackoff,
    settleMs: config.settleMs,
    maxHoldMs: config.maxHoldMs,
    burstKeys: config.burstKeys,
    burstHoldMs: config.burstHoldMs,
    onCoalesced: () => metrics.coalesced.inc(),
    metrics: metrics.queue,
  });
  const table = new DesiredTable((key) => {
    queue.add(key);
    statusChanged.emit(key);
  });
  const readiness = new Readiness();
  const client = ctrlClient(config);
  // With a cluster target, the observer watches what the cluster really runs (for status and
  // drift correction); a render target has nothing to watch.
  const observing = target.kubeClient ? await observe(config, table, metrics, statusChanged, readiness) : undefined;
  const observer = observing?.observer;
  const reconciler = newReconciler({
    table,
    queue,
    target,
    metrics,
    log,
    prune: config.prune,
    liveObjects: (key) => observer?.liveObjects(key),
    // The observer's first list runs beside the first prune, which waits for it instead of listing too.
    managedObjects: observer && (() => observer.firstListed.then(() => observer.managedObjects())),
    namespaces: config.namespaces,
    ownershipRecheckMs: config.ownershipRecheckMs,
    fetchSecretEnvSeals: secretEnvSealFetch(client, region, { timeoutMs: config.ctrlCallTimeoutMs }),
  });
  const ready = Promise.withResolvers<void>();
  // The table holds a complete snapshot (before the prune that ready waits for).
  const tableFilled = Promise.withResolvers<void>();
  let isReady = false;
  const prune = async (version: number) => {
    try {
      await reconciler.prune(version);
    } catch (error) {
      // The next full sync prunes again; the watch must not wait for the cluster.
      log.error(`prune failed: ${messageOf(error)}`, { version });
    }
  };
  const connection = new Connection({
    client,
    region,
    table,
    metrics,
    fullSyncIntervalMs: config.fullSyncIntervalMs,
    bookmarkIntervalMs: config.bookmarkIntervalMs,
    reconnectBackoff: config.reconnectBackoff,
    log,
    onConnected: connected.emit,
    async afterSnapshot(version) {
      tableFilled.resolve();
      if (leadership.isLeading()) await prune(version);
      isReady = true;
      ready.resolve();
    },
  });
  const reporter = new Reporter({
    client,
    region,
    source: observer ? clusterObservations(table, observer) : tableObservations(table),
    sent: table.attachment("reported"),
    cursor: () => connection.cursor,
    reportIntervalMs: config.reportIntervalMs,
    heartbeatIntervalMs: config.heartbeatIntervalMs,
    callTimeoutMs: config.ctrlCallTimeoutMs,
    metrics,
    log,
    leader: config.leaderElect ? () => leadership.leader() : undefined,
    onFenced(message) {
      log.warn(`ctrl refused a report, another agent leads: ${message}`);
      leadership.stepDown("fenced by ctrl");
    },
    onSent: () => reportSent.emit(),
  });
  const analysis = new AnalysisRunner({
    client,
    region,
    appliedRevision: (deploymentId) => appliedRevision(table, deploymentId),
    ...(target.kubeClient ? { secretEnvValue: secretEnvReader(table, target.kubeClient) } : {}),
    pollIntervalMs: config.analysisPollIntervalMs,
    queryTimeoutMs: config.analysisQueryTimeoutMs,
    callTimeoutMs: config.ctrlCallTimeoutMs,
    maxPending: config.analysisMaxPending,
    metrics,
    log,
  });
  const memoryRelease = new MemoryRelease({
    afterReconciles: config.memoryReleaseAfterReconciles,
    idleMs: config.memoryReleaseIdleMs,
    waiting: () => queue.length + reporter.backlog,
  });
  reportSent.add(() => memoryRelease.reported());
  void ready.promise.then(() => memoryRelease.started());
  metrics.collectFrom({
    queueDepth: () => queue.length,
    desiredCounts: () => table.counts(),
    readiness: () => readiness.conditions(),
    reportBacklog: () => reporter.backlog,
  });
  statusChanged.add((key) => reporter.touch(key));
  readiness
    .add("connected", () => (connection.connected ? undefined : "no open watch stream to ctrl"))
    .add("synced", () => (isReady ? undefined : "waiting for the first complete sync"));
  connected.add(() => reporter.requestFullSet());
  // A new leader applies everything again (a standby dispatched nothing, and a former leader may
  // have missed what another applied meanwhile), and prunes what its complete table lacks.
  leadership.started.add(() => {
    for (const entry of table.entries()) queue.add(entry.key);
    if (isReady) void prune(connection.cursor);
  });

  let health: HealthServer | undefined;
  const parts: Runnable[] = [
    {
      name: "health",
      async start() {
        if (config.listen === undefined) return;
        health = await serveHealth(config.listen, {
          registry: metrics.registry,
          notReady: () => readiness.notReady(),
        });
      },
      stop: () => health?.close(),
    },
    ...leadership.parts(),
    // Before the workers, so that it stops after them (their last reconciles may schedule a release).
    { name: "memory release", start() {}, stop: () => memoryRelease.stop() },
    // With an observer, the workers wait for its first list (which waits for the first snapshot):
    // what is already in the cluster is then known to hold what would be applied, and a restart
    // applies only what changed.
    workers(config, queue, observer?.firstListed, async (key) => {
      try {
        // A standby (or a leader past its renew deadline) leaves the key: every key is queued
        // again when a term begins.
        if (leadership.isLeading()) await reconciler.reconcile(key);
      } finally {
        reporter.touch(key);
        memoryRelease.reconciled();
      }
    }),
    // Nothing is worth reporting before the first snapshot: the cursor would be 0.
    loop("reporter", async (signal) => {
      if (!(await resolvedBeforeAbort(ready.promise, signal))) return;
      // Only a leader reports; each term starts with the full set.
      await leadership.eachTerm(signal, (term) => {
        reporter.requestFullSet();
        return reporter.run(term);
      });
    }),
    // Analyses measure the pods the desired table says run: after the first snapshot, by the leader.
    loop("analysis", async (signal) => {
      if (!(await resolvedBeforeAbort(ready.promise, signal))) return;
      await leadership.eachTerm(signal, (term) => analysis.run(term));
    }),
    ...(observing
      ? [
          // Listed once the table holds the first snapshot, so that every listed object is checked
          // against what the agent would apply to it (DriftCorrector.held); the first prune waits for it.
          loop("observer", async (signal) => {
            if (await resolvedBeforeAbort(tableFilled.promise, signal)) await observing.observer.run(signal);
          }),
          loop("drift refresh", (signal) => observing.drift.runRefresh(signal)),
        ]
      : []),
    loop("connection", (signal) => connection.run(signal)),
  ];
  const stop = await startInOrder(parts);
  return { ready: ready.promise, metrics, table, url: health?.url, stop };
}

/** The revision a deployment's applied desired state was written from (its pods' flotilla.dev/revision); undefined while none is applied. */
function appliedRevision(table: DesiredTable, deploymentId: string): number | undefined {
  const entry = table.get(resourceKey(ResourceType.DEPLOYMENT, deploymentId));
  if (!entry || entry.status !== "done") return undefined;
  const desired = entry.desired;
  if (desired.kind !== "upsert") return undefined;
  const resource = desiredResource(desired);
  return resource.spec.case === "deployment" ? Number(resource.spec.value.revision) : undefined;
}

/**
 * Reads a deployment's secret env variable from its Secret in the cluster (the one the agent
 * applied), for a web analysis' secret header. The agent keeps no value once applied; the
 * value is a string from the read to the request, which a header must be.
 */
function secretEnvReader(table: DesiredTable, kubeClient: KubeClient) {
  return async (deploymentId: string, variable: string): Promise<string> => {
    const entry = table.get(resourceKey(ResourceType.DEPLOYMENT, deploymentId));
    if (!entry || entry.desired.kind !== "upsert") throw new Error(`secret env ${variable}: deployment ${deploymentId} is not desired here`);
    const { namespace } = desiredResource(entry.desired);
    const name = secretEnvName(deploymentId);
    const secret = await kubeClient.get<{ data?: Record<string, string> }>(resourcePath({ apiVersion: "v1", kind: "Secret", namespace, name }));
    const value = secret.data?.[variable];
    if (value === undefined) throw new Error(`secret env ${variable}: not in Secret ${namespace}/${name}`);
    return Buffer.from(value, "base64").toString("utf8");
  };
}

/**
 * Who leads: this agent alone without leader election; else the elector's Lease holder. The
 * Lease lives in the cluster the agent applies to, so a render target cannot elect.
 */
async function leadershipOf(config: ResolvedAgentConfig, metrics: AgentMetrics): Promise<Leadership> {
  if (!config.leaderElect) return new Leadership(metrics);
  const kubeClient = config.target.kubeClient;
  if (!kubeClient) throw new Error("leader election needs the kubernetes target: its Lease lives in the cluster the agent applies to");
  const { LeaderElector, defaultIdentity, podNamespace } = await import("./leader-election.ts");
  const options = config.leaderElection;
  const name = options.name ?? `flotilla-agent-${config.region}`;
  const namespace = options.namespace ?? podNamespace() ?? "default";
  const identity = options.identity ?? defaultIdentity();
  const leadership = new Leadership(
    metrics,
    (callbacks) => new LeaderElector({ ...options, ...callbacks, kubeClient, name, namespace, identity, log: config.log }),
    name,
  );
  // Every write to the cluster checks leadership as it goes out, and is aborted when the term ends.
  kubeClient.writeFence = () => leadership.writeFence();
  return leadership;
}

/** ctrl's ClusterService over gRPC, authenticated with the agent token. */
function ctrlClient({ ctrlUrl, token, tls, log }: ResolvedAgentConfig): Client<typeof ClusterService> {
  const auth: Interceptor = (next) => (request) => {
    request.header.set("authorization", `Bearer ${token}`);
    return next(request);
  };
  return createClient(ClusterService, ctrlTransport({ baseUrl: ctrlUrl, interceptors: [auth], tls, log }));
}

/** The observer and the drift corrector it feeds. The observer module is loaded only here. */
async function observe(
  config: ResolvedAgentConfig,
  table: DesiredTable,
  metrics: AgentMetrics,
  statusChanged: Listeners<string>,
  readiness: Readiness,
): Promise<{ observer: Observer; drift: DriftCorrector }> {
  const { Observer } = await import("./observer.ts");
  // Every request is counted, and the last one says whether the cluster answers.
  const kubeClient = config.target.kubeClient!;
  let unreachable: string | undefined = "no answer from the Kubernetes API yet";
  kubeClient.requests.add(({ method, code, host, broken }) => {
    if (!broken) metrics.restClientRequests.inc({ code, method, host });
    unreachable = code === "<error>" ? `the Kubernetes API at ${host} does not answer` : undefined;
  });
  readiness.add("cluster", () => unreachable);
  const drift = new DriftCorrector({
    table,
    region: config.region,
    metrics,
    refreshIntervalMs: config.refreshIntervalMs,
    refreshPerSecond: config.refreshPerSecond,
  });
  const observer = new Observer({
    kubeClient,
    region: config.region,
    kinds: APPLIED_KINDS,
    bookmarkIntervalMs: config.observerBookmarkIntervalMs,
    watchTimeoutSeconds: config.observerWatchTimeoutSeconds,
    backoff: config.observerBackoff,
    onChange: (change: ObjectChange) => {
      if (change.key !== undefined) statusChanged.emit(change.key);
      drift.onChange(change);
    },
    held: (object, key, previous) => drift.held(object, key, previous),
    // One record per resource: the cached objects live in the key's table entry.
    records: table.attachment("observed"),
    onRestart: (reason) => metrics.observerRestarts.inc({ reason }),
    log: config.log,
  });
  return { observer, drift };
}

/**
 * The work queue's workers: `handle` for every key, `concurrency` at once, from when `after` (if
 * given) resolves until the queue shuts down.
 */
function workers(config: ResolvedAgentConfig, queue: WorkQueue, after: Promise<void> | undefined, handle: (key: string) => Promise<void>): Runnable {
  const stopping = new AbortController();
  let working: Promise<void> | undefined;
  return {
    name: "workers",
    start() {
      const run = () =>
        dispatch(queue, handle, {
          concurrency: config.concurrency,
          onHandlerError: (key, error) => config.log.error(`reconcile failed: ${messageOf(error)}`, { resource: key }),
        });
      working = after === undefined ? run() : resolvedBeforeAbort(after, stopping.signal).then((started) => (started ? run() : undefined));
    },
    async stop() {
      stopping.abort();
      queue.shutDown();
      // Applies in flight finish (a half-applied resource would wait for the next agent), within a deadline.
      const deadline = Promise.withResolvers<"deadline">();
      const timer = setTimeout(() => deadline.resolve("deadline"), config.shutdownTimeoutMs);
      if ((await Promise.race([working, deadline.promise])) === "deadline") {
        config.log.warn(`stopping with reconciles still in flight after ${config.shutdownTimeoutMs} ms`);
      }
      clearTimeout(timer);
    },
  };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
