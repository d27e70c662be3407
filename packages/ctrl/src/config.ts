// Command-line flags of `pnpm ctrl`, each also an environment variable FLOTILLA_CTRL_<FLAG>
// (the conventions are in @flotilla/runtime's flags.ts). This table is the single source of
// --help and of the reference's flag table (scripts/docs-reference.ts).
import { markdownTable, parseDuration, parseFlags, usage, type LegacyName, type OptionSpec } from "@flotilla/runtime";
import { DEFAULT_DATABASE_URL, DEFAULT_PAGE_BYTES } from "@flotilla/store";
import { SYSTEM_NAMESPACES } from "./validate.ts";

export const CTRL_ENV_PREFIX = "FLOTILLA_CTRL_";

// Before the common scheme ctrl's variables were FLOTILLA_<FLAG>: still read, with a warning.
const was = (env: string, old?: Omit<LegacyName, "env">): { was: LegacyName } => ({ was: { env: `FLOTILLA_${env}`, ...old } });

export const CTRL_OPTIONS = [
  {
    flag: "database-url",
    default: DEFAULT_DATABASE_URL,
    description: "sqlite:<path> (embedded) or mysql://user:pass@host:port/db (with a password, prefer the file or the env var)",
    ...was("DATABASE_URL"),
  },
  { flag: "database-url-file", default: "", description: "file whose first line is the database URL (keeps its password out of the process list)" },
  {
    flag: "listen",
    default: "127.0.0.1:7070",
    description: "host:port for Connect, gRPC and gRPC-Web (TLS or h2c, and HTTP/1.1), /livez, /healthz, /readyz, /metrics",
    ...was("LISTEN"),
  },
  { flag: "tls-cert", default: "", description: "PEM certificate (chain) to serve TLS with; re-read when the file changes", ...was("TLS_CERT") },
  { flag: "tls-key", default: "", description: "PEM private key of --tls-cert; re-read when the file changes", ...was("TLS_KEY") },
  {
    flag: "client-ca",
    default: "",
    description: "PEM CA(s): ClusterService calls must present a client certificate chaining to it and naming their region (needs TLS)",
    ...was("CLIENT_CA"),
  },
  {
    flag: "trust-domain",
    default: "flotilla",
    description: "agent certificates name their region as URI SAN spiffe://<trust-domain>/region/<region>",
    ...was("TRUST_DOMAIN"),
  },
  {
    flag: "insecure",
    default: "",
    boolean: true,
    description: "allow plaintext on a non-loopback --listen address (e.g. behind a TLS-terminating proxy)",
    ...was("INSECURE"),
  },
  {
    flag: "metrics-listen",
    default: "",
    description: "host:port serving /metrics, /livez, /healthz and /readyz on their own; the public port then serves no /metrics",
    ...was("METRICS_LISTEN"),
  },
  { flag: "admin-token-file", default: "", description: "file holding the operator bearer token", ...was("ADMIN_TOKEN_FILE") },
  {
    flag: "admin-token",
    default: "",
    description:
      "operator bearer token (as a flag it shows in the process list: prefer the file or the env var); when neither is set one is generated into .flotilla/admin-token",
    ...was("ADMIN_TOKEN"),
  },
  {
    flag: "token-recheck-interval",
    default: "500ms",
    description:
      "a known agent token is looked up again, and open agent streams re-checked, this often: revocations reach every replica within about twice this; an unknown token of the format before MACs reloads those tokens at most this often",
    ...was("TOKEN_RECHECK_MS", { flag: "token-recheck-ms", unit: "ms" }),
  },
  {
    flag: "token-cache-size",
    default: "10000",
    description: "agent tokens cached per kind (known, unknown) at most, least recently used dropped first",
    ...was("TOKEN_CACHE_SIZE"),
  },
  { flag: "readiness-timeout", default: "2s", description: "/readyz fails when the database has not answered within this long" },
  {
    flag: "read-max-bytes",
    default: String(4 * 1024 * 1024),
    description: "largest request message accepted: ReportObservedState's (an agent's batch of observations), and the cap of every other limit",
    ...was("READ_MAX_BYTES"),
  },
  {
    flag: "write-max-bytes",
    default: String(1024 * 1024),
    description: "largest request message of an operator write (Create…, Update…, Rollback)",
  },
  {
    flag: "query-max-bytes",
    default: String(64 * 1024),
    description: "largest request message of every other RPC (reads, deletes, revocations, the streams' requests)",
  },
  {
    flag: "max-nesting-depth",
    default: "64",
    description: "nested messages, JSON objects and arrays one request may hold (deeper: INVALID_ARGUMENT naming the field)",
  },
  {
    flag: "max-repeated-elements",
    default: "10000",
    description:
      "elements of one repeated field or map, or members of one JSON array or object, in a request, across all their parents (more: INVALID_ARGUMENT naming the field)",
  },
  {
    flag: "decode-budget-bytes",
    default: String(16 * 1024 * 1024),
    description: "bytes of requests being read and decoded at once, process-wide; the next requests wait for their share",
  },
  {
    flag: "collect-after-request-bytes",
    default: String(16 * 1024 * 1024),
    description:
      "bytes of large request bodies freed (once decoded) after which ctrl asks V8 for a full GC, which collects the rest of their garbage; 0: never",
  },
  {
    flag: "decode-memory-headroom-bytes",
    default: String(40 * 1024 * 1024),
    description:
      "once RSS is this far above what ctrl's last memory release left, a request of 64 KiB or more waits while another is being decoded (and ctrl asks V8 for a GC); 0: never",
  },
  {
    flag: "decode-wait",
    default: "1s",
    description: "a request that waited this long for its share of --decode-budget-bytes is refused (RESOURCE_EXHAUSTED with a RetryInfo)",
  },
  {
    flag: "poll-interval",
    default: "200ms",
    description: "change poller interval: latency bound for writes made by other ctrl replicas",
    ...was("POLL_INTERVAL_MS", { flag: "poll-interval-ms", unit: "ms" }),
  },
  {
    flag: "bookmark-interval",
    default: "5s",
    description: "idle watch streams get a bookmark this often",
    ...was("BOOKMARK_INTERVAL_MS", { flag: "bookmark-interval-ms", unit: "ms" }),
  },
  {
    flag: "watch-buffer-events",
    default: "10000",
    description: "events a watch stream may queue before it is ended with CONSUMER_TOO_SLOW",
    ...was("WATCH_BUFFER_EVENTS"),
  },
  {
    flag: "secret-seals-max",
    default: "500",
    description: "deployments whose secret values one GetSecretEnvSeals answer carries at most (the agent asks again for the rest)",
  },
  {
    flag: "status-stale-after",
    default: "30s",
    description: "statuses of a region whose agent has not reported for this long are marked stale",
    ...was("STATUS_STALE_AFTER_MS", { flag: "status-stale-after-ms", unit: "ms" }),
  },
  {
    flag: "retention-max-age",
    default: "168h",
    description: "outbox rows older than this are pruned (0: keep)",
    ...was("RETENTION_MAX_AGE_S", { flag: "retention-max-age-s", unit: "s" }),
  },
  { flag: "retention-max-rows", default: "0", description: "outbox rows kept per region at most (0: no limit)", ...was("RETENTION_MAX_ROWS") },
  { flag: "console", default: "true", description: "serve the web console at / on --listen (false: off)" },
  {
    flag: "list-page-bytes",
    default: String(DEFAULT_PAGE_BYTES),
    description:
      "stored bytes one page of a List or of a history carries at most (at least one object): a page ends early, with a next page token, rather than past it",
  },
  {
    flag: "revision-history-limit",
    default: "50",
    description: "revisions kept per deployment, sentinel and network policy (history, rollback); older ones are pruned",
  },
  {
    flag: "rollout-lease-duration",
    default: "5s",
    description: "one replica drives rollouts, holding a database lease this long unrenewed: the longest rollouts wait when it dies",
  },
  {
    flag: "rollout-batch-size",
    default: "100",
    description: "rollouts the driver looks at and moves on per database transaction (many waves ending at once take each region's version once per batch)",
  },
  {
    flag: "default-rollout-strategy",
    default: "",
    description:
      'the rollout strategy of deployments without one, as proto3 JSON (e.g. {"waves":[{"name":"canary","selector":"tier=canary","bake":"300s"}]}); empty: their changes reach every region at once',
  },
  // Notifications (notifications/dispatcher.ts, docs/guides/notifications.md).
  { flag: "notifier-timeout", default: "10s", description: "one delivery attempt (connect, send, answer) is given up after this" },
  {
    flag: "notifier-max-attempts",
    default: "12",
    description: "attempts of a delivery in all before it is dead-lettered (DEAD, kept for `flotilla get deliveries`)",
  },
  { flag: "notifier-backoff-min", default: "1s", description: "delay before a delivery's second attempt; each next one doubles, with jitter" },
  {
    flag: "notifier-backoff-max",
    default: "10m",
    description: "longest delay between two attempts of a delivery (a longer Retry-After is honoured, up to 1h)",
  },
  { flag: "notifier-batch-size", default: "100", description: "deliveries one replica claims per database round, at most" },
  { flag: "notifier-concurrency", default: "32", description: "delivery attempts in flight per ctrl replica, at most" },
  {
    flag: "notifier-per-receiver-concurrency",
    default: "4",
    description: "delivery attempts in flight to one notifier per ctrl replica, at most: a slow or dead receiver holds only these",
  },
  { flag: "notifier-poll-interval", default: "1s", description: "due deliveries written by other replicas (and retries) are looked for this often" },
  {
    flag: "notifier-allow-private-addresses",
    default: "",
    boolean: true,
    description: "notifiers may send to private, loopback and link-local addresses (the cloud metadata address stays refused)",
  },
  {
    flag: "secrets-key-file",
    default: "",
    description:
      "the data keys secret env values are sealed under (JSON, made by `pnpm pki secrets-key`): new values under the last, stored ones under any; empty: a write carrying a secret value is refused",
  },
  {
    flag: "audit-max-age",
    default: "2160h",
    description: "audit events (who did what, when), status transitions and rollout analysis measurements older than this are pruned",
  },
  {
    flag: "status-events-max-age",
    default: "1h",
    description: "status changes older than this are pruned: a status stream resumed from an older cursor starts again with a snapshot",
  },
  {
    flag: "allowed-system-namespaces",
    default: "",
    description: "comma-separated system namespaces (kube-system, kube-public, kube-node-lease, default) resources may use anyway",
    ...was("ALLOWED_SYSTEM_NAMESPACES"),
  },
  // Bounds: no client can stall the others (see connection-bounds.ts, send-timeout.ts).
  {
    flag: "stream-send-timeout",
    default: "1m",
    description: "a stream whose client reads nothing for this long is reset (gRPC: RESOURCE_EXHAUSTED)",
    ...was("STREAM_SEND_TIMEOUT_MS", { flag: "stream-send-timeout-ms", unit: "ms" }),
  },
  {
    flag: "send-budget-bytes",
    default: String(16 * 1024 * 1024),
    description:
      "bytes of stream messages (SyncDesiredState pages, WatchDeploymentChanges batches) waiting for their clients, process-wide; the next messages wait for their share",
  },
  {
    flag: "send-budget-stall",
    default: "1s",
    description:
      "while --send-budget-bytes is exhausted, a stream whose client has not taken its message for this long is reset to make room, oldest first (gRPC: RESOURCE_EXHAUSTED)",
  },
  {
    flag: "snapshot-concurrency",
    default: "6",
    description: "SyncDesiredState page queries running at once (keep below the MySQL pool of 10)",
    ...was("SNAPSHOT_CONCURRENCY"),
  },
  {
    flag: "snapshot-read-ahead-bytes",
    default: String(16 * 1024 * 1024),
    description: "bytes of pages all SyncDesiredState snapshots together fetch before their clients ask for them",
    ...was("SNAPSHOT_READ_AHEAD_BYTES"),
  },
  {
    flag: "memory-release-growth-bytes",
    default: String(16 * 1024 * 1024),
    description:
      "once RSS grew this much since the last release, ctrl returns freed memory to the system (a memory-reducing GC and malloc_trim, checked every 5 s); 0 turns it off",
  },
  {
    flag: "memory-release-interval",
    default: "30s",
    description: "the least time between two memory releases (during a sustained burst, at most one per interval)",
  },
  {
    flag: "token-lookup-concurrency",
    default: "2",
    description: "agent-token lookups in the database at once (the rest wait; keeps pool connections for other calls)",
    ...was("TOKEN_LOOKUP_CONCURRENCY"),
  },
  {
    flag: "first-request-timeout",
    default: "10s",
    description: "a new connection must send its first request (HTTP/2: preface and a stream; TLS: finish its handshake) within this",
    ...was("FIRST_REQUEST_TIMEOUT_MS", { flag: "first-request-timeout-ms", unit: "ms" }),
  },
  {
    flag: "idle-timeout",
    default: "5m",
    description: "an HTTP/2 connection with no open stream for this long gets GOAWAY",
    ...was("IDLE_TIMEOUT_MS", { flag: "idle-timeout-ms", unit: "ms" }),
  },
  { flag: "max-concurrent-streams", default: "1000", description: "concurrent streams per HTTP/2 connection", ...was("MAX_CONCURRENT_STREAMS") },
  {
    flag: "max-resets-per-second",
    default: "100",
    description: "stream resets a client may send per second before its connection ends (GOAWAY ENHANCE_YOUR_CALM)",
    ...was("MAX_RESETS_PER_SECOND"),
  },
  {
    flag: "max-pings-per-second",
    default: "10",
    description: "HTTP/2 pings a client may send per second before its connection ends (GOAWAY ENHANCE_YOUR_CALM)",
    ...was("MAX_PINGS_PER_SECOND"),
  },
  {
    flag: "max-auth-failures-per-connection",
    default: "32",
    description: "failed authentications answered on one connection; the next one also ends it (GOAWAY ENHANCE_YOUR_CALM, HTTP/1.1: close)",
  },
  {
    flag: "http1-headers-timeout",
    default: "10s",
    description: "HTTP/1.1: time to receive a request's headers",
    ...was("HTTP1_HEADERS_TIMEOUT_MS", { flag: "http1-headers-timeout-ms", unit: "ms" }),
  },
  {
    flag: "http1-request-timeout",
    default: "1m",
    description: "HTTP/1.1: time to receive a whole request (at least the headers timeout)",
    ...was("HTTP1_REQUEST_TIMEOUT_MS", { flag: "http1-request-timeout-ms", unit: "ms" }),
  },
  {
    flag: "http1-keep-alive-timeout",
    default: "5s",
    description: "HTTP/1.1: an idle kept-alive connection is closed after this (its Keep-Alive header says so)",
  },
  { flag: "oidc-issuer", default: "", description: "single sign-on: the OpenID issuer URL whose ID tokens ctrl accepts (empty: static tokens only)" },
  { flag: "oidc-client-id", default: "flotilla-console", description: "single sign-on: the console's client id (ctrl is that client)" },
  { flag: "oidc-client-secret-file", default: "", description: "single sign-on: file holding the console client's secret (required with --oidc-issuer)" },
  { flag: "oidc-cli-client-id", default: "flotilla-cli", description: "single sign-on: the CLI's public client id (device authorization grant)" },
  { flag: "oidc-audience", default: "", description: "single sign-on: comma-separated audiences a token may have (default: the two client ids)" },
  { flag: "oidc-groups-claim", default: "groups", description: "single sign-on: the ID token claim listing the person's groups" },
  {
    flag: "oidc-redirect-url",
    default: "",
    description: "single sign-on: ctrl's /auth/callback URL as registered at the issuer (default: from the request's Host)",
  },
  {
    flag: "oidc-jwks-cache",
    default: "10m",
    description: "single sign-on: the issuer's keys are fetched again after this long (and at once for an unknown key id)",
  },
  { flag: "oidc-clock-skew", default: "30s", description: "single sign-on: tolerance on a token's exp, nbf and iat" },
  { flag: "session-max-age", default: "8h", description: "single sign-on: a console session lasts at most this long (never past its ID token)" },
  { flag: "log-format", default: "text", description: "json (one object a line) | text" },
  { flag: "log-level", default: "info", description: "debug | info | warn | error" },
] as const satisfies readonly OptionSpec[];

export type CtrlConfig = { [S in (typeof CTRL_OPTIONS)[number] as S["flag"]]: string };

/** Flag, else environment variable, else default; "help" for --help. Unknown flags are an error. */
export function parseConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): { config: CtrlConfig; deprecations: string[] } | "help" {
  const { values, help, deprecations } = parseFlags(CTRL_OPTIONS, CTRL_ENV_PREFIX, argv, env);
  return help ? "help" : { config: values as CtrlConfig, deprecations };
}

export function ctrlUsage(): string {
  return usage("pnpm ctrl [flags]", CTRL_OPTIONS, CTRL_ENV_PREFIX);
}

/** The reference's table of ctrl's flags (docs/reference/ctrl.md). */
export function ctrlFlagTable(): string {
  return markdownTable(CTRL_OPTIONS, CTRL_ENV_PREFIX);
}

/** A duration flag's value in milliseconds, at least 1 ms. */
/** The checked readers of one configuration, each naming its flag once (the message names it too). */
export function flagReader(config: CtrlConfig) {
  return {
    positiveDuration: (flag: keyof CtrlConfig) => positiveDuration(flag, config[flag]),
    positiveInt: (flag: keyof CtrlConfig) => positiveInt(flag, config[flag]),
    nonNegativeInt: (flag: keyof CtrlConfig) => nonNegativeInt(flag, config[flag]),
  };
}

export function positiveDuration(flag: string, value: string): number {
  const ms = parseDuration(value, flag);
  if (!(ms >= 1)) throw new Error(`--${flag} ${JSON.stringify(value)}: expected a positive duration such as 250ms, 30s`);
  return ms;
}

export function positiveInt(flag: string, value: string): number {
  const n = nonNegativeInt(flag, value);
  if (n === 0) throw new Error(`--${flag} ${JSON.stringify(value)}: expected a positive integer`);
  return n;
}

export function nonNegativeInt(flag: string, value: string): number {
  const n = Number(value);
  if (value.trim() === "" || !Number.isSafeInteger(n) || n < 0) throw new Error(`--${flag} ${JSON.stringify(value)}: expected a non-negative integer`);
  return n;
}

/** A comma-separated list of system namespaces ("" is none); anything else is a mistake worth an error. */
export function systemNamespaceList(flag: string, value: string): string[] {
  const names = value
    .split(",")
    .map((name) => name.trim())
    .filter((name) => name !== "");
  const unknown = names.find((name) => !(SYSTEM_NAMESPACES as readonly string[]).includes(name));
  if (unknown !== undefined) throw new Error(`--${flag} ${JSON.stringify(unknown)}: expected some of ${SYSTEM_NAMESPACES.join(", ")}`);
  return names;
}
