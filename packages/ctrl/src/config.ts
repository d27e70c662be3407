// Command-line flags of `pnpm ctrl`, each also an environment variable. This table is the
// single source of --help and of the README's configuration table.
import { parseArgs } from "node:util";
import { DEFAULT_DATABASE_URL } from "@flotilla/store";
import { SYSTEM_NAMESPACES } from "./validate.ts";

export interface OptionSpec {
  flag: string;
  env: string;
  default: string;
  description: string;
  /** A switch without a value (`--insecure`); its config value is "true" or "false". */
  boolean?: true;
}

export const CTRL_OPTIONS = [
  { flag: "database-url", env: "FLOTILLA_DATABASE_URL", default: DEFAULT_DATABASE_URL, description: "sqlite:<path> (embedded) or mysql://user:pass@host:port/db" },
  { flag: "listen", env: "FLOTILLA_LISTEN", default: "127.0.0.1:7070", description: "host:port for Connect, gRPC and gRPC-Web (TLS or h2c, and HTTP/1.1), /livez, /healthz, /readyz, /metrics" },
  { flag: "tls-cert", env: "FLOTILLA_TLS_CERT", default: "", description: "PEM certificate (chain) to serve TLS with; re-read when the file changes" },
  { flag: "tls-key", env: "FLOTILLA_TLS_KEY", default: "", description: "PEM private key of --tls-cert; re-read when the file changes" },
  { flag: "client-ca", env: "FLOTILLA_CLIENT_CA", default: "", description: "PEM CA(s): ClusterService calls must present a client certificate chaining to it and naming their region (needs TLS)" },
  { flag: "trust-domain", env: "FLOTILLA_TRUST_DOMAIN", default: "flotilla", description: "agent certificates name their region as URI SAN spiffe://<trust-domain>/region/<region>" },
  { flag: "insecure", env: "FLOTILLA_INSECURE", default: "", boolean: true, description: "allow plaintext on a non-loopback --listen address (e.g. behind a TLS-terminating proxy)" },
  { flag: "metrics-listen", env: "FLOTILLA_METRICS_LISTEN", default: "", description: "host:port serving /metrics and /healthz on their own; the public port then serves no /metrics" },
  { flag: "admin-token-file", env: "FLOTILLA_ADMIN_TOKEN_FILE", default: "", description: "file holding the operator bearer token" },
  { flag: "admin-token", env: "FLOTILLA_ADMIN_TOKEN", default: "", description: "operator bearer token (as a flag it shows in the process list: prefer the file or the env var); when neither is set one is generated into .flotilla/admin-token" },
  { flag: "token-recheck-ms", env: "FLOTILLA_TOKEN_RECHECK_MS", default: "500", description: "a known agent token is looked up again, and open agent streams re-checked, this often: revocations reach every replica within about twice this" },
  { flag: "token-cache-size", env: "FLOTILLA_TOKEN_CACHE_SIZE", default: "10000", description: "agent tokens cached per kind (known, unknown) at most, least recently used dropped first" },
  { flag: "readiness-timeout-ms", env: "FLOTILLA_READINESS_TIMEOUT_MS", default: "2000", description: "/readyz fails when the database has not answered within this long" },
  { flag: "read-max-bytes", env: "FLOTILLA_READ_MAX_BYTES", default: String(4 * 1024 * 1024), description: "largest request message accepted" },
  { flag: "poll-interval-ms", env: "FLOTILLA_POLL_INTERVAL_MS", default: "200", description: "change poller interval: latency bound for writes made by other ctrl replicas" },
  { flag: "bookmark-interval-ms", env: "FLOTILLA_BOOKMARK_INTERVAL_MS", default: "5000", description: "idle watch streams get a bookmark this often" },
  { flag: "watch-buffer-events", env: "FLOTILLA_WATCH_BUFFER_EVENTS", default: "10000", description: "events a watch stream may queue before it is ended with CONSUMER_TOO_SLOW" },
  { flag: "status-stale-after-ms", env: "FLOTILLA_STATUS_STALE_AFTER_MS", default: "30000", description: "statuses of a region whose agent has not reported for this long are marked stale" },
  { flag: "retention-max-age-s", env: "FLOTILLA_RETENTION_MAX_AGE_S", default: String(7 * 24 * 3600), description: "outbox rows older than this are pruned (0: keep)" },
  { flag: "log-format", env: "FLOTILLA_LOG_FORMAT", default: "text", description: "json (one object a line) | text" },
  { flag: "log-level", env: "FLOTILLA_LOG_LEVEL", default: "info", description: "debug | info | warn | error" },
  { flag: "allowed-system-namespaces", env: "FLOTILLA_ALLOWED_SYSTEM_NAMESPACES", default: "", description: "comma-separated system namespaces (kube-system, kube-public, kube-node-lease, default) resources may use anyway" },
  { flag: "retention-max-rows", env: "FLOTILLA_RETENTION_MAX_ROWS", default: "0", description: "outbox rows kept per region at most (0: no limit)" },
] as const satisfies readonly OptionSpec[];

export type Config<Specs extends readonly OptionSpec[]> = { [S in Specs[number] as S["flag"]]: string };

/** Flag, else environment variable, else default. Unknown flags are an error. */
export function parseConfig<const Specs extends readonly OptionSpec[]>(
  specs: Specs,
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): Config<Specs> | "help" {
  const { values } = parseArgs({
    args: argv,
    options: Object.fromEntries([["help", { type: "boolean" as const }], ...specs.map((s) => [s.flag, { type: (s.boolean ? "boolean" : "string") as "string" }])]),
    strict: true,
  });
  const given = values as Record<string, string | boolean | undefined>;
  if (given.help) return "help";
  const value = (s: OptionSpec) => {
    if (!s.boolean) return (given[s.flag] as string | undefined) ?? env[s.env] ?? s.default;
    const on = given[s.flag] ?? (env[s.env] !== undefined ? ["1", "true"].includes(env[s.env]!.toLowerCase()) : false);
    return String(on);
  };
  return Object.fromEntries(specs.map((s) => [s.flag, value(s)])) as Config<Specs>;
}

export function usage(command: string, specs: readonly OptionSpec[]): string {
  const rows = specs.map((s) => `  --${s.flag}${s.boolean ? "" : " <value>"}\n      ${s.description}\n      env ${s.env}${s.default ? `, default ${s.default}` : ""}`);
  return `usage: ${command} [options]\n\n${rows.join("\n")}\n  --help\n`;
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
  const names = value.split(",").map((name) => name.trim()).filter((name) => name !== "");
  const unknown = names.find((name) => !(SYSTEM_NAMESPACES as readonly string[]).includes(name));
  if (unknown !== undefined) throw new Error(`--${flag} ${JSON.stringify(unknown)}: expected some of ${SYSTEM_NAMESPACES.join(", ")}`);
  return names;
}
