// The agent's command-line flags, each also an environment variable FLOTILLA_AGENT_<FLAG>
// (the conventions are in @flotilla/runtime's flags.ts); defaults come from AGENT_DEFAULTS.
// This table is the single source of --help and of the reference's flag table
// (scripts/docs-reference.ts, docs/reference/agent.md).
import { formatDuration, markdownTable, usage, type OptionSpec } from "@flotilla/runtime";
import { AGENT_DEFAULTS } from "./config.ts";
import { KUBE_CREDENTIALS_RECHECK_MS, KUBE_IDLE_TIMEOUT_MS, KUBE_MAX_CONNECTIONS } from "./kube-limits.ts";

export const AGENT_ENV_PREFIX = "FLOTILLA_AGENT_";

export const AGENT_OPTIONS = [
  { flag: "ctrl-url", default: "http://127.0.0.1:7070", description: "ctrl's URL (gRPC over HTTP/2; https:// for TLS)" },
  { flag: "region", default: "", description: "region this agent serves (required)" },
  { flag: "token-file", default: "", description: "file holding the agent token (or set FLOTILLA_AGENT_TOKEN)" },
  { flag: "token", default: "", description: "agent token; visible in the process list, prefer --token-file" },
  { flag: "ca-cert", default: "", description: "PEM CA(s) to verify ctrl's certificate (default: the system's)" },
  { flag: "client-cert", default: "", description: "PEM client certificate for mTLS (URI SAN spiffe://<trust-domain>/region/<region>); re-read when changed" },
  { flag: "client-key", default: "", description: "PEM private key of --client-cert; re-read when changed" },
  { flag: "target", default: "kubernetes", description: "kubernetes | render" },
  { flag: "kubeconfig", default: "", description: "kubeconfig path (default: in-cluster, else $KUBECONFIG, else ~/.kube/config)" },
  {
    flag: "kube-max-connections",
    default: String(KUBE_MAX_CONNECTIONS),
    description: "connections to the Kubernetes API server at most (each watch holds one)",
  },
  {
    flag: "kube-credentials-recheck",
    default: formatDuration(KUBE_CREDENTIALS_RECHECK_MS),
    description: "the kubeconfig's credential files (token, CA, client certificate and key) are read again at most this often: a rotation is used within it",
  },
  {
    flag: "kube-idle-timeout",
    default: formatDuration(KUBE_IDLE_TIMEOUT_MS),
    description: "a Kubernetes API request without a byte either way for this long fails",
  },
  { flag: "render-dir", default: "", description: "directory the render target writes manifests into" },
  { flag: "concurrency", default: String(AGENT_DEFAULTS.concurrency), description: "resources reconciled at once" },
  {
    flag: "settle",
    default: formatDuration(AGENT_DEFAULTS.settleMs),
    description: "a key changed again within this long waits until its burst of changes settles (0: never waits)",
  },
  { flag: "max-hold", default: formatDuration(AGENT_DEFAULTS.maxHoldMs), description: "longest a key in a burst of changes waits in all" },
  {
    flag: "burst-keys",
    default: String(AGENT_DEFAULTS.burstKeys),
    description: "this many resources changed within --settle put the region in a burst (a mass update)",
  },
  {
    flag: "burst-hold",
    default: formatDuration(AGENT_DEFAULTS.burstHoldMs),
    description: "in a region-wide burst, a resource's first change waits this long for the next round (0: never waits)",
  },
  { flag: "full-sync-interval", default: formatDuration(AGENT_DEFAULTS.fullSyncIntervalMs), description: "periodic full sync (jittered ±10%)" },
  {
    flag: "refresh-interval",
    default: formatDuration(AGENT_DEFAULTS.refreshIntervalMs),
    description: "re-apply objects last applied longer ago than this (drift no event revealed)",
  },
  { flag: "refresh-per-second", default: String(AGENT_DEFAULTS.refreshPerSecond), description: "periodic refresh applies per second at most" },
  {
    flag: "bookmark-interval",
    default: formatDuration(AGENT_DEFAULTS.bookmarkIntervalMs),
    description: "ctrl's bookmark interval (its --bookmark-interval): a stream silent for 3× this is dead",
  },
  {
    flag: "report-interval",
    default: formatDuration(AGENT_DEFAULTS.reportIntervalMs),
    description: "status reports to ctrl: at most one call per this interval",
  },
  {
    flag: "ctrl-call-timeout",
    default: formatDuration(AGENT_DEFAULTS.ctrlCallTimeoutMs),
    description: "deadline of a unary call to ctrl (a status report, a fetch of secret values again)",
  },
  {
    flag: "analysis-poll-interval",
    default: formatDuration(AGENT_DEFAULTS.analysisPollIntervalMs),
    description: "rollout analysis: report measurements to ctrl and learn what to measure at least this often",
  },
  {
    flag: "analysis-query-timeout",
    default: formatDuration(AGENT_DEFAULTS.analysisQueryTimeoutMs),
    description: "rollout analysis: deadline of one query (Prometheus or web); past it the measurement is an error",
  },
  {
    flag: "analysis-max-pending",
    default: String(AGENT_DEFAULTS.analysisMaxPending),
    description: "rollout analysis: measurements kept waiting for ctrl at most (the oldest dropped first)",
  },
  {
    flag: "heartbeat-interval",
    default: formatDuration(AGENT_DEFAULTS.heartbeatIntervalMs),
    description: "how often the agent reports its applied version to ctrl",
  },
  {
    flag: "memory-release-after",
    default: String(AGENT_DEFAULTS.memoryReleaseAfterReconciles),
    description: "after a burst of this many reconciles, return freed memory to the system with one memory-reducing GC (0: never)",
  },
  {
    flag: "memory-release-idle",
    default: formatDuration(AGENT_DEFAULTS.memoryReleaseIdleMs),
    description: "quiet time (no reconcile, queue empty) that ends such a burst",
  },
  {
    flag: "prune-max-fraction",
    default: String(AGENT_DEFAULTS.prune.maxFraction),
    description: "prune refuses to delete more than this fraction of managed objects",
  },
  { flag: "force-prune", default: "", boolean: true, description: "prune even beyond --prune-max-fraction" },
  {
    flag: "leader-elect",
    default: "",
    boolean: true,
    description: "elect one leader among the region's agents on a Lease; only it applies, prunes and reports (kubernetes target only)",
  },
  {
    flag: "leader-elect-lease-duration",
    default: formatDuration(AGENT_DEFAULTS.leaderElection.leaseDurationMs),
    description: "standbys take over a Lease not renewed for this long (whole seconds)",
  },
  {
    flag: "leader-elect-renew-deadline",
    default: formatDuration(AGENT_DEFAULTS.leaderElection.renewDeadlineMs),
    description: "a leader that could not renew for this long stops applying (< lease duration)",
  },
  {
    flag: "leader-elect-retry-period",
    default: formatDuration(AGENT_DEFAULTS.leaderElection.retryPeriodMs),
    description: "interval of acquire and renew attempts (renew deadline > 1.2× it)",
  },
  { flag: "leader-elect-resource-namespace", default: "", description: "namespace of the Lease (default: the pod's namespace, else default)" },
  { flag: "leader-elect-resource-name", default: "", description: "name of the Lease (default flotilla-agent-<region>)" },
  {
    flag: "allowed-namespaces",
    default: AGENT_DEFAULTS.namespaces.allowed.join(","),
    description: "comma-separated globs of the namespaces the agent may write into",
  },
  {
    flag: "denied-namespaces",
    default: AGENT_DEFAULTS.namespaces.denied.join(","),
    description: "comma-separated globs of namespaces refused even if allowed",
  },
  {
    flag: "ownership-recheck-interval",
    default: formatDuration(AGENT_DEFAULTS.ownershipRecheckMs),
    description: "how often an object that exists but is not the agent's is checked again",
  },
  {
    flag: "shutdown-timeout",
    default: formatDuration(AGENT_DEFAULTS.shutdownTimeoutMs),
    description: "on SIGTERM: how long applies in flight may take to finish",
  },
  { flag: "listen", default: "127.0.0.1:7071", description: "host:port of /livez, /healthz, /readyz and /metrics" },
  { flag: "log-format", default: "text", description: "json (one object a line) | text" },
  { flag: "log-level", default: "info", description: "debug | info | warn | error" },
] as const satisfies readonly OptionSpec[];

export function agentUsage(): string {
  return usage("flotilla-agent --region NAME [flags]", AGENT_OPTIONS, AGENT_ENV_PREFIX);
}

/** The reference's table of the agent's flags (docs/reference/agent.md). */
export function agentFlagTable(): string {
  return markdownTable(AGENT_OPTIONS, AGENT_ENV_PREFIX);
}
