// The agent's configuration: one object, every field documented with its default, the defaults
// in one place (AGENT_DEFAULTS). startAgent() builds every part from it; the CLI (main.ts) maps
// flags and environment variables onto it.
import { createLogger, type Logger } from "@flotilla/runtime";
import type { BackoffOptions } from "./backoff.ts";
import type { CtrlTlsFiles } from "./ctrl-transport.ts";
import type { LeaderElectionOptions } from "./leader-election.ts";
import { DEFAULT_NAMESPACE_RULES, type NamespaceRules } from "./namespaces.ts";
import type { PruneOptions } from "./prune.ts";
import type { Target } from "./target.ts";

/** What an agent needs and cannot default: which region it serves, from where, into what. */
export interface AgentIdentity {
  /** ctrl's base URL (gRPC over HTTP/2; https:// for TLS). */
  ctrlUrl: string;
  /** With an https ctrlUrl: the CA to trust and a client certificate (mTLS); re-read when the files change. Default: the system's CAs, no client certificate. */
  tls?: CtrlTlsFiles;
  /** Region this agent serves. */
  region: string;
  /** Agent token of the region, sent as `Authorization: Bearer`. */
  token: string;
  /** Where desired state goes: a cluster (KubernetesTarget) or a directory (RenderTarget). */
  target: Target;
}

/** Everything else, each with a default in AGENT_DEFAULTS. */
export interface AgentTunables {
  /** Keys reconciled at once (the dispatch's p-limit). Default 8. */
  concurrency: number;
  /** Per-key retry backoff of failed reconciles. Default 100 ms .. 5 min. */
  retryBackoff: BackoffOptions;
  /** Longest wait after a key's last change while it is in a burst of changes. Default 1 s; 0 turns settling off. */
  settleMs: number;
  /** Longest a key in a burst of changes is held back in all. Default 5 s. */
  maxHoldMs: number;
  /** Keys changed within settleMs that put the region in a burst (a mass update). Default 50. */
  burstKeys: number;
  /** How long a key's first change waits while the region is in a burst. Default 250 ms; 0 never. */
  burstHoldMs: number;
  /** Reconnect backoff towards ctrl. Default 500 ms .. 30 s. */
  reconnectBackoff: BackoffOptions;
  /** Periodic full sync. Default 10 min (jittered ±10%). */
  fullSyncIntervalMs: number;
  /** ctrl's bookmark interval; 3× without any message means a dead stream. Default 5 s. */
  bookmarkIntervalMs: number;
  /** Status reports to ctrl: at most one call per this interval. Default 250 ms. */
  reportIntervalMs: number;
  /** A report (an empty heartbeat if nothing changed) at least this often. Default 5 s. */
  heartbeatIntervalMs: number;
  /** Deadline of a unary call to ctrl (a report, a fetch of secret values again). Default 10 s. */
  ctrlCallTimeoutMs: number;
  /** Rollout analysis: a call to ctrl (measurements taken, tasks to measure) at least this often. Default 5 s. */
  analysisPollIntervalMs: number;
  /** Rollout analysis: deadline of one query (Prometheus or web). Default 10 s. */
  analysisQueryTimeoutMs: number;
  /** Rollout analysis: measurements kept waiting for ctrl at most, the oldest dropped first. Default 1000. */
  analysisMaxPending: number;
  /** Observer (cluster targets only): the API server's watch bookmark interval; 3× silent restarts the watch. Default 60 s. */
  observerBookmarkIntervalMs: number;
  /** Observer: server-side timeout of each watch request. Default 300 s. */
  observerWatchTimeoutSeconds: number;
  /** Observer: backoff after failed lists and watches. Default 500 ms .. 30 s. */
  observerBackoff: BackoffOptions;
  /** Drift correction (cluster targets only): re-apply resources last applied longer ago than this. Default 30 min. */
  refreshIntervalMs: number;
  /** Drift correction: resources re-applied per second by the periodic refresh, at most. Default 20. */
  refreshPerSecond: number;
  /**
   * After a burst of at least this many reconciles (a full sync's drain), the agent returns the
   * garbage's memory to the system with one memory-reducing GC (memory-release.ts). Default 1,000; 0 turns it off.
   */
  memoryReleaseAfterReconciles: number;
  /** Quiet time (work queue empty, no reconcile) that ends such a burst. Default 2 s. */
  memoryReleaseIdleMs: number;
  /** Prune safety valve. Default: at most half of the managed objects at once, not forced. */
  prune: PruneOptions;
  /**
   * Leader election among the region's agents on a coordination.k8s.io/v1 Lease (cluster
   * targets only): only the leader applies, prunes and reports. Default false: one agent per
   * region, as a laptop or a single replica runs it; multi-replica deployments turn it on.
   */
  leaderElect: boolean;
  /** Leader election's timing and Lease. Default 15 s / 10 s / 2 s (client-go's), Lease `flotilla-agent-<region>` in the pod's namespace. */
  leaderElection: LeaderElectionOptions;
  /** Namespaces the agent may write into. Default: all but kube-system, kube-public, kube-node-lease and default. */
  namespaces: NamespaceRules;
  /** An ownership conflict (an existing object that is not the agent's) is checked again this often. Default 30 s. */
  ownershipRecheckMs: number;
  /** On stop: how long reconciles in flight may take to finish before the agent stops without them. Default 30 s. */
  shutdownTimeoutMs: number;
  /** host:port for /healthz, /readyz and /metrics (port 0 picks one). Default: none (no listener). */
  listen: string | undefined;
  /** Where the agent logs; every line carries the region. Default: text lines on stderr, level info. */
  log: Logger | undefined;
}

/** An agent's configuration as given: the identity, and any tunables to override. */
export type AgentConfig = AgentIdentity &
  Partial<Omit<AgentTunables, "prune" | "leaderElection">> & { prune?: Partial<PruneOptions>; leaderElection?: Partial<LeaderElectionOptions> };

/** An agent's configuration with every default filled in. */
export type ResolvedAgentConfig = AgentIdentity & AgentTunables & { log: Logger };

export const AGENT_DEFAULTS: Readonly<AgentTunables> = Object.freeze({
  concurrency: 8,
  retryBackoff: { minMs: 100, maxMs: 5 * 60_000 },
  settleMs: 1000,
  maxHoldMs: 5000,
  burstKeys: 50,
  burstHoldMs: 250,
  reconnectBackoff: { minMs: 500, maxMs: 30_000 },
  fullSyncIntervalMs: 10 * 60_000,
  bookmarkIntervalMs: 5000,
  reportIntervalMs: 250,
  heartbeatIntervalMs: 5000,
  ctrlCallTimeoutMs: 10_000,
  analysisPollIntervalMs: 5000,
  analysisQueryTimeoutMs: 10_000,
  analysisMaxPending: 1000,
  observerBookmarkIntervalMs: 60_000,
  observerWatchTimeoutSeconds: 300,
  observerBackoff: { minMs: 500, maxMs: 30_000 },
  refreshIntervalMs: 30 * 60_000,
  refreshPerSecond: 20,
  memoryReleaseAfterReconciles: 1000,
  memoryReleaseIdleMs: 2000,
  prune: { maxFraction: 0.5, force: false },
  leaderElect: false,
  leaderElection: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2000, namespace: undefined, name: undefined, identity: undefined },
  namespaces: DEFAULT_NAMESPACE_RULES,
  ownershipRecheckMs: 30_000,
  shutdownTimeoutMs: 30_000,
  listen: undefined,
  log: undefined,
});

/** `config` with every absent field set to its default. */
export function resolveConfig(config: AgentConfig): ResolvedAgentConfig {
  const given = withoutUndefined(config);
  const log = (config.log ?? createLogger({ fields: { process: "agent" } })).child({ region: config.region });
  const leaderElection = { ...AGENT_DEFAULTS.leaderElection, ...withoutUndefined(config.leaderElection ?? {}) };
  return { ...AGENT_DEFAULTS, ...given, prune: { ...AGENT_DEFAULTS.prune, ...config.prune }, leaderElection, log } as ResolvedAgentConfig;
}

function withoutUndefined<T extends object>(object: T): Partial<T> {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined)) as Partial<T>;
}
