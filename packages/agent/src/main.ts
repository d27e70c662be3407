// The agent CLI: maps flags onto an AgentConfig (config.ts) and runs startAgent() until
// SIGINT/SIGTERM. Every flag is also an environment variable FLOTILLA_AGENT_<FLAG>
// (--ctrl-url → FLOTILLA_AGENT_CTRL_URL); flags win. Defaults come from AGENT_DEFAULTS.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { startAgent } from "./agent.ts";
import { AGENT_DEFAULTS, type AgentConfig } from "./config.ts";
import { parseGlobList } from "./namespaces.ts";
import { RenderTarget } from "./targets/render.ts";
import type { Target } from "./target.ts";

const FLAGS = {
  "ctrl-url": { type: "string", default: "http://127.0.0.1:7070", help: "ctrl's URL (gRPC over HTTP/2; https:// for TLS)" },
  region: { type: "string", help: "region this agent serves (required)" },
  "token-file": { type: "string", help: "file holding the agent token (or set FLOTILLA_AGENT_TOKEN)" },
  token: { type: "string", help: "agent token; visible in the process list, prefer --token-file" },
  "ca-cert": { type: "string", help: "PEM CA(s) to verify ctrl's certificate (default: the system's)" },
  "client-cert": { type: "string", help: "PEM client certificate for mTLS (URI SAN spiffe://<trust-domain>/region/<region>); re-read when changed" },
  "client-key": { type: "string", help: "PEM private key of --client-cert; re-read when changed" },
  target: { type: "string", default: "kubernetes", help: "kubernetes | render" },
  kubeconfig: { type: "string", help: "kubeconfig path (default: in-cluster, else ~/.kube/config)" },
  "render-dir": { type: "string", help: "directory the render target writes manifests into" },
  concurrency: { type: "string", default: String(AGENT_DEFAULTS.concurrency), help: "resources reconciled at once" },
  settle: { type: "string", default: formatDuration(AGENT_DEFAULTS.settleMs), help: "a key changed again within this long waits until its burst of changes settles (0: never waits)" },
  "max-hold": { type: "string", default: formatDuration(AGENT_DEFAULTS.maxHoldMs), help: "longest a key in a burst of changes waits in all" },
  "full-sync-interval": { type: "string", default: formatDuration(AGENT_DEFAULTS.fullSyncIntervalMs), help: "periodic full sync, e.g. 600s, 10m (jittered ±10%)" },
  "refresh-interval": { type: "string", default: formatDuration(AGENT_DEFAULTS.refreshIntervalMs), help: "re-apply objects last applied longer ago than this (drift no event revealed)" },
  "refresh-per-second": { type: "string", default: String(AGENT_DEFAULTS.refreshPerSecond), help: "periodic refresh applies per second at most" },
  "bookmark-interval": { type: "string", default: formatDuration(AGENT_DEFAULTS.bookmarkIntervalMs), help: "ctrl's bookmark interval (its --bookmark-interval-ms): a stream silent for 3× this is dead" },
  "report-interval": { type: "string", default: formatDuration(AGENT_DEFAULTS.reportIntervalMs), help: "status reports to ctrl: at most one call per this interval" },
  "heartbeat-interval": { type: "string", default: formatDuration(AGENT_DEFAULTS.heartbeatIntervalMs), help: "how often the agent reports its applied version to ctrl" },
  "memory-release-after": { type: "string", default: String(AGENT_DEFAULTS.memoryReleaseAfterReconciles), help: "after a burst of this many reconciles, return freed memory to the system with one memory-reducing GC (0: never)" },
  "memory-release-idle": { type: "string", default: formatDuration(AGENT_DEFAULTS.memoryReleaseIdleMs), help: "quiet time (no reconcile, queue empty) that ends such a burst" },
  "prune-max-fraction": { type: "string", default: String(AGENT_DEFAULTS.prune.maxFraction), help: "prune refuses to delete more than this fraction of managed objects" },
  "force-prune": { type: "boolean", default: false, help: "prune even beyond --prune-max-fraction" },
  "leader-elect": { type: "boolean", default: AGENT_DEFAULTS.leaderElect, help: "elect one leader among the region's agents on a Lease; only it applies, prunes and reports (kubernetes target only)" },
  "leader-elect-lease-duration": { type: "string", default: formatDuration(AGENT_DEFAULTS.leaderElection.leaseDurationMs), help: "standbys take over a Lease not renewed for this long (whole seconds)" },
  "leader-elect-renew-deadline": { type: "string", default: formatDuration(AGENT_DEFAULTS.leaderElection.renewDeadlineMs), help: "a leader that could not renew for this long stops applying (< lease duration)" },
  "leader-elect-retry-period": { type: "string", default: formatDuration(AGENT_DEFAULTS.leaderElection.retryPeriodMs), help: "interval of acquire and renew attempts (renew deadline > 1.2× it)" },
  "leader-elect-resource-namespace": { type: "string", help: "namespace of the Lease (default: the pod's namespace, else default)" },
  "leader-elect-resource-name": { type: "string", help: "name of the Lease (default flotilla-agent-<region>)" },
  "allowed-namespaces": { type: "string", default: AGENT_DEFAULTS.namespaces.allowed.join(","), help: "comma-separated globs of the namespaces the agent may write into" },
  "denied-namespaces": { type: "string", default: AGENT_DEFAULTS.namespaces.denied.join(","), help: "comma-separated globs of namespaces refused even if allowed" },
  "ownership-recheck-interval": { type: "string", default: formatDuration(AGENT_DEFAULTS.ownershipRecheckMs), help: "how often an object that exists but is not the agent's is checked again" },
  listen: { type: "string", default: "127.0.0.1:7071", help: "host:port of /healthz, /readyz and /metrics" },
  help: { type: "boolean", default: false, help: "show this help" },
} as const;

type Flag = keyof typeof FLAGS;

export function usage(): string {
  const width = Math.max(...Object.keys(FLAGS).map((name) => name.length));
  const lines = Object.entries(FLAGS).map(([name, flag]) => {
    const fallback = "default" in flag && flag.type === "string" ? ` (default ${flag.default})` : "";
    return `  --${name.padEnd(width)} ${flag.help}${fallback}\n  ${" ".repeat(width + 2)} env FLOTILLA_AGENT_${envName(name)}`;
  });
  return `Usage: flotilla-agent --region NAME [flags]\n\nKeeps a region's cluster equal to ctrl's desired state.\n\n${lines.join("\n")}\n`;
}

function envName(flag: string): string {
  return flag.toUpperCase().replaceAll("-", "_");
}

/** Flags from argv, falling back to FLOTILLA_AGENT_* variables, then to the defaults. */
function readFlags(argv: string[], env: NodeJS.ProcessEnv): Record<Flag, string | boolean | undefined> {
  const options = Object.fromEntries(Object.entries(FLAGS).map(([name, { type }]) => [name, { type }]));
  const { values } = parseArgs({ args: argv, options: options as Record<Flag, { type: "string" | "boolean" }>, strict: true, allowPositionals: false });
  const flags = {} as Record<Flag, string | boolean | undefined>;
  for (const [name, flag] of Object.entries(FLAGS) as [Flag, (typeof FLAGS)[Flag]][]) {
    const fromEnv = env[`FLOTILLA_AGENT_${envName(name)}`];
    const value = fromEnv === undefined ? undefined : flag.type === "boolean" ? fromEnv === "true" || fromEnv === "1" : fromEnv;
    flags[name] = values[name] ?? value ?? ("default" in flag ? flag.default : undefined);
  }
  return flags;
}

/** Milliseconds from "250ms", "30s", "10m", "1h" or a bare number of seconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!match) throw new Error(`invalid duration ${JSON.stringify(text)} (e.g. 30s, 10m)`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[match[2] ?? "s"]!;
  return Number(match[1]) * unit;
}

/** The shortest of "10m", "30s", "250ms" that is exactly `ms`. */
function formatDuration(ms: number): string {
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

/**
 * The AgentConfig the flags (else FLOTILLA_AGENT_* variables, else defaults) describe, or "help".
 * A flag with an invalid value throws an Error naming it.
 */
export async function agentConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<AgentConfig | "help"> {
  const flags = readFlags(argv, env);
  if (flags.help) return "help";
  const text = (flag: Flag) => (typeof flags[flag] === "string" ? (flags[flag] as string) : undefined);
  const required = (what: string): never => {
    throw new Error(`${what} is required`);
  };
  const region = text("region") ?? required("--region");
  const tokenFile = text("token-file");
  const token = text("token") ?? (tokenFile ? readFileSync(tokenFile, "utf8").trim() : required("--token-file or FLOTILLA_AGENT_TOKEN"));
  const concurrency = Number(text("concurrency"));
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new Error("--concurrency must be a positive integer");
  const maxFraction = Number(text("prune-max-fraction"));
  if (!(maxFraction >= 0 && maxFraction <= 1)) throw new Error("--prune-max-fraction must be within 0..1");
  const refreshPerSecond = Number(text("refresh-per-second"));
  if (!(refreshPerSecond > 0)) throw new Error("--refresh-per-second must be a positive number");
  const namespaces = { allowed: parseGlobList(text("allowed-namespaces")!), denied: parseGlobList(text("denied-namespaces")!) };
  const ownershipRecheckMs = parseDuration(text("ownership-recheck-interval")!);
  if (!(ownershipRecheckMs > 0)) throw new Error("--ownership-recheck-interval must be positive");

  const memoryReleaseAfterReconciles = Number(text("memory-release-after"));
  if (!Number.isInteger(memoryReleaseAfterReconciles) || memoryReleaseAfterReconciles < 0) throw new Error("--memory-release-after must be a non-negative integer");
  const leaderElect = flags["leader-elect"] === true;
  const leaderElection = {
    leaseDurationMs: parseDuration(text("leader-elect-lease-duration")!),
    renewDeadlineMs: parseDuration(text("leader-elect-renew-deadline")!),
    retryPeriodMs: parseDuration(text("leader-elect-retry-period")!),
    namespace: text("leader-elect-resource-namespace"),
    name: text("leader-elect-resource-name"),
  };
  if (leaderElect) {
    if (text("target") !== "kubernetes") throw new Error("--leader-elect needs --target kubernetes: the Lease lives in the cluster the agent applies to");
    const { validateTimings } = await import("./leader-election.ts");
    try {
      validateTimings(leaderElection);
    } catch (error) {
      throw new Error(`--leader-elect-*: ${(error as Error).message}`);
    }
  }

  let target: Target;
  if (text("target") === "kubernetes") {
    // Loaded only for this target: @kubernetes/client-node costs some 80 MB of RSS.
    const { KubernetesTarget, loadKubeConfig } = await import("./targets/kubernetes.ts");
    target = new KubernetesTarget({ kubeConfig: loadKubeConfig(text("kubeconfig")), region });
  } else if (text("target") === "render") {
    target = new RenderTarget({ dir: text("render-dir") ?? required("--render-dir (with --target render)"), region });
  } else {
    throw new Error(`--target must be kubernetes or render, got ${JSON.stringify(text("target"))}`);
  }
  return {
    ctrlUrl: text("ctrl-url")!,
    tls: { caFile: text("ca-cert"), certFile: text("client-cert"), keyFile: text("client-key") },
    region,
    token,
    target,
    concurrency,
    settleMs: parseDuration(text("settle")!),
    maxHoldMs: parseDuration(text("max-hold")!),
    fullSyncIntervalMs: parseDuration(text("full-sync-interval")!),
    refreshIntervalMs: parseDuration(text("refresh-interval")!),
    refreshPerSecond,
    bookmarkIntervalMs: parseDuration(text("bookmark-interval")!),
    reportIntervalMs: parseDuration(text("report-interval")!),
    heartbeatIntervalMs: parseDuration(text("heartbeat-interval")!),
    memoryReleaseAfterReconciles,
    memoryReleaseIdleMs: parseDuration(text("memory-release-idle")!),
    prune: { maxFraction, force: flags["force-prune"] === true },
    leaderElect,
    leaderElection,
    namespaces,
    ownershipRecheckMs,
    listen: text("listen")!,
  };
}

async function main(): Promise<void> {
  let config: AgentConfig | "help";
  if (process.argv.slice(2).some((arg) => arg === "--token" || arg.startsWith("--token="))) {
    process.stderr.write("flotilla-agent: warning: --token shows the token to every user of this host (process list); use --token-file or FLOTILLA_AGENT_TOKEN\n");
  }
  try {
    config = await agentConfig(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`flotilla-agent: ${(error as Error).message}\n\n${usage()}`);
    process.exit(2);
  }
  if (config === "help") {
    process.stdout.write(usage());
    return;
  }
  const { region, ctrlUrl } = config;
  const agent = await startAgent(config).catch((error: Error) => {
    process.stderr.write(`flotilla-agent: ${error.message}\n`);
    process.exit(1);
  });
  console.error(`agent[${region}]: health and metrics on ${agent.url}, syncing from ${ctrlUrl}`);
  void agent.ready.then(() => console.error(`agent[${region}]: first complete sync dispatched, ready`));
  const shutdown = async (signal: string) => {
    console.error(`agent[${region}]: ${signal}, stopping`);
    await agent.stop();
    process.exit(0);
  };
  process.once("SIGINT", () => void shutdown("SIGINT"));
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
}

if (import.meta.main) await main();
