// The agent CLI: maps flags (flags.ts) onto an AgentConfig (config.ts) and runs startAgent()
// until SIGINT/SIGTERM.
import { readFileSync } from "node:fs";
import { createLogger, logOptions, parseDuration, parseFlags } from "@flotilla/runtime";
import { startAgent } from "./agent.ts";
import type { AgentConfig } from "./config.ts";
import { AGENT_ENV_PREFIX, AGENT_OPTIONS, agentUsage } from "./flags.ts";
import { parseGlobList } from "./namespaces.ts";
import { RenderTarget } from "./targets/render.ts";
import type { Target } from "./target.ts";

/**
 * The AgentConfig the flags (else FLOTILLA_AGENT_* variables, else defaults) describe, or "help".
 * A flag with an invalid value throws an Error naming it.
 */
export async function agentConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<AgentConfig | "help"> {
  const { values, help } = parseFlags(AGENT_OPTIONS, AGENT_ENV_PREFIX, argv, env);
  if (help) return "help";
  const text = (flag: (typeof AGENT_OPTIONS)[number]["flag"]) => values[flag] || undefined;
  const duration = (flag: (typeof AGENT_OPTIONS)[number]["flag"]) => parseDuration(values[flag]!, flag);
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
  const burstKeys = Number(text("burst-keys"));
  if (!Number.isInteger(burstKeys) || burstKeys < 1) throw new Error("--burst-keys must be a positive integer");
  const refreshPerSecond = Number(text("refresh-per-second"));
  if (!(refreshPerSecond > 0)) throw new Error("--refresh-per-second must be a positive number");
  const namespaces = { allowed: parseGlobList(text("allowed-namespaces")!), denied: parseGlobList(text("denied-namespaces")!) };
  const ownershipRecheckMs = duration("ownership-recheck-interval");
  if (!(ownershipRecheckMs > 0)) throw new Error("--ownership-recheck-interval must be positive");
  const ctrlCallTimeoutMs = duration("ctrl-call-timeout");
  if (!(ctrlCallTimeoutMs > 0)) throw new Error("--ctrl-call-timeout must be positive");
  const [analysisPollIntervalMs, analysisQueryTimeoutMs] = (["analysis-poll-interval", "analysis-query-timeout"] as const).map((name) => {
    const ms = duration(name);
    if (!(ms > 0)) throw new Error(`--${name} must be positive`);
    return ms;
  });
  const analysisMaxPending = Number(text("analysis-max-pending"));
  if (!Number.isInteger(analysisMaxPending) || analysisMaxPending < 1) throw new Error("--analysis-max-pending must be a positive integer");

  const memoryReleaseAfterReconciles = Number(text("memory-release-after"));
  if (!Number.isInteger(memoryReleaseAfterReconciles) || memoryReleaseAfterReconciles < 0)
    throw new Error("--memory-release-after must be a non-negative integer");
  const leaderElect = values["leader-elect"] === "true";
  const leaderElection = {
    leaseDurationMs: duration("leader-elect-lease-duration"),
    renewDeadlineMs: duration("leader-elect-renew-deadline"),
    retryPeriodMs: duration("leader-elect-retry-period"),
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

  const log = createLogger({ ...logOptions(text("log-format")!, text("log-level")!), fields: { process: "agent" } });
  let target: Target;
  if (text("target") === "kubernetes") {
    const maxConnections = Number(text("kube-max-connections"));
    if (!Number.isInteger(maxConnections) || maxConnections < 1) throw new Error("--kube-max-connections must be a positive integer");
    const idleTimeoutMs = duration("kube-idle-timeout");
    if (!(idleTimeoutMs > 0)) throw new Error("--kube-idle-timeout must be positive");
    // Loaded only for this target.
    const { KubernetesTarget, KubeClient, loadKubeConnection } = await import("./kubernetes.ts");
    const credentialsRecheckMs = duration("kube-credentials-recheck");
    const connection = await loadKubeConnection({ kubeconfig: text("kubeconfig"), maxConnections, log, credentialsRecheckMs });
    target = new KubernetesTarget({ kubeClient: new KubeClient(connection, { idleTimeoutMs }), region });
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
    settleMs: duration("settle"),
    maxHoldMs: duration("max-hold"),
    burstKeys,
    burstHoldMs: duration("burst-hold"),
    fullSyncIntervalMs: duration("full-sync-interval"),
    refreshIntervalMs: duration("refresh-interval"),
    refreshPerSecond,
    bookmarkIntervalMs: duration("bookmark-interval"),
    reportIntervalMs: duration("report-interval"),
    heartbeatIntervalMs: duration("heartbeat-interval"),
    ctrlCallTimeoutMs,
    analysisPollIntervalMs,
    analysisQueryTimeoutMs,
    analysisMaxPending,
    memoryReleaseAfterReconciles,
    memoryReleaseIdleMs: duration("memory-release-idle"),
    prune: { maxFraction, force: values["force-prune"] === "true" },
    leaderElect,
    leaderElection,
    namespaces,
    ownershipRecheckMs,
    shutdownTimeoutMs: duration("shutdown-timeout"),
    listen: text("listen")!,
    log,
  };
}

async function main(): Promise<void> {
  let config: AgentConfig | "help";
  if (process.argv.slice(2).some((arg) => arg === "--token" || arg.startsWith("--token="))) {
    process.stderr.write(
      "flotilla-agent: warning: --token shows the token to every user of this host (process list); use --token-file or FLOTILLA_AGENT_TOKEN\n",
    );
  }
  try {
    config = await agentConfig(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`flotilla-agent: ${(error as Error).message}\n\n${agentUsage()}`);
    process.exit(2);
  }
  if (config === "help") {
    process.stdout.write(agentUsage());
    return;
  }
  const { region, ctrlUrl } = config;
  const log = config.log!.child({ region });
  const agent = await startAgent(config).catch((error: Error) => {
    log.error(error.message);
    process.exit(1);
  });
  const shutdown = async (signal: string) => {
    log.info(`${signal}, stopping`);
    await agent.stop();
    log.info("stopped");
    process.exit(0);
  };
  process.once("SIGINT", () => void shutdown("SIGINT"));
  process.once("SIGTERM", () => void shutdown("SIGTERM"));
  // Announced only once the signal handlers are in place: whoever waits for these lines may stop us at once.
  log.info(`health and metrics on ${agent.url}, syncing from ${ctrlUrl}`);
  void agent.ready.then(() => log.info("first complete sync dispatched, ready"));
}

if (import.meta.main) await main();
