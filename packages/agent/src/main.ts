// The agent CLI. Every flag is also an environment variable FLOTILLA_AGENT_<FLAG>
// (--ctrl-url → FLOTILLA_AGENT_CTRL_URL); flags win.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { startAgent } from "./agent.ts";
import { parseGlobList, SYSTEM_NAMESPACES } from "./namespaces.ts";
import { RenderTarget } from "./targets/render.ts";
import type { Target } from "./target.ts";

const FLAGS = {
  "ctrl-url": { type: "string", default: "http://127.0.0.1:7070", help: "ctrl's URL (gRPC over HTTP/2)" },
  region: { type: "string", help: "region this agent serves (required)" },
  token: { type: "string", help: "agent token of the region" },
  "token-file": { type: "string", help: "file holding the agent token (instead of --token)" },
  target: { type: "string", default: "kubernetes", help: "kubernetes | render" },
  kubeconfig: { type: "string", help: "kubeconfig path (default: in-cluster, else ~/.kube/config)" },
  "render-dir": { type: "string", help: "directory the render target writes manifests into" },
  concurrency: { type: "string", default: "8", help: "resources reconciled at once" },
  "full-sync-interval": { type: "string", default: "10m", help: "periodic full sync, e.g. 600s, 10m (jittered ±10%)" },
  "refresh-interval": { type: "string", default: "30m", help: "re-apply objects last applied longer ago than this (drift no event revealed)" },
  "refresh-per-second": { type: "string", default: "20", help: "periodic refresh applies per second at most" },
  "heartbeat-interval": { type: "string", default: "5s", help: "how often the agent reports its applied version to ctrl" },
  "prune-max-fraction": { type: "string", default: "0.5", help: "prune refuses to delete more than this fraction of managed objects" },
  "force-prune": { type: "boolean", default: false, help: "prune even beyond --prune-max-fraction" },
  "allowed-namespaces": { type: "string", default: "*", help: "comma-separated globs of the namespaces the agent may write into" },
  "denied-namespaces": { type: "string", default: SYSTEM_NAMESPACES.join(","), help: "comma-separated globs of namespaces refused even if allowed" },
  "ownership-recheck-interval": { type: "string", default: "30s", help: "how often an object that exists but is not the agent's is checked again" },
  listen: { type: "string", default: "127.0.0.1:7071", help: "host:port of /healthz, /readyz and /metrics" },
  help: { type: "boolean", default: false, help: "show this help" },
} as const;

type Flag = keyof typeof FLAGS;

function usage(): string {
  const lines = Object.entries(FLAGS).map(([name, flag]) => {
    const fallback = "default" in flag && flag.type === "string" ? ` (default ${flag.default})` : "";
    return `  --${name.padEnd(20)} ${flag.help}${fallback}\n  ${" ".repeat(22)} env FLOTILLA_AGENT_${envName(name)}`;
  });
  return `Usage: flotilla-agent --region NAME [flags]\n\nKeeps a region's cluster equal to ctrl's desired state.\n\n${lines.join("\n")}\n`;
}

function envName(flag: string): string {
  return flag.toUpperCase().replaceAll("-", "_");
}

/** Flags from argv, falling back to FLOTILLA_AGENT_* variables, then to the defaults. */
function readConfig(argv: string[]): Record<Flag, string | boolean | undefined> {
  const options = Object.fromEntries(Object.entries(FLAGS).map(([name, { type }]) => [name, { type }]));
  const { values } = parseArgs({ args: argv, options: options as Record<Flag, { type: "string" | "boolean" }>, strict: true, allowPositionals: false });
  const config = {} as Record<Flag, string | boolean | undefined>;
  for (const [name, flag] of Object.entries(FLAGS) as [Flag, (typeof FLAGS)[Flag]][]) {
    const env = process.env[`FLOTILLA_AGENT_${envName(name)}`];
    const fromEnv = env === undefined ? undefined : flag.type === "boolean" ? env === "true" || env === "1" : env;
    config[name] = values[name] ?? fromEnv ?? ("default" in flag ? flag.default : undefined);
  }
  return config;
}

/** Milliseconds from "250ms", "30s", "10m", "1h" or a bare number of seconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (!match) throw new Error(`invalid duration ${JSON.stringify(text)} (e.g. 30s, 10m)`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[match[2] ?? "s"]!;
  return Number(match[1]) * unit;
}

function fail(message: string): never {
  process.stderr.write(`flotilla-agent: ${message}\n`);
  process.exit(2);
}

async function main(): Promise<void> {
  let config;
  try {
    config = readConfig(process.argv.slice(2));
  } catch (error) {
    fail(`${(error as Error).message}\n\n${usage()}`);
  }
  if (config.help) {
    process.stdout.write(usage());
    return;
  }
  const text = (flag: Flag) => (typeof config[flag] === "string" ? (config[flag] as string) : undefined);
  const region = text("region") ?? fail("--region is required");
  const tokenFile = text("token-file");
  const token = text("token") ?? (tokenFile ? readFileSync(tokenFile, "utf8").trim() : fail("--token, --token-file or FLOTILLA_AGENT_TOKEN is required"));
  const concurrency = Number(text("concurrency"));
  if (!Number.isInteger(concurrency) || concurrency < 1) fail("--concurrency must be a positive integer");
  const maxFraction = Number(text("prune-max-fraction"));
  if (!(maxFraction >= 0 && maxFraction <= 1)) fail("--prune-max-fraction must be within 0..1");
  const refreshPerSecond = Number(text("refresh-per-second"));
  if (!(refreshPerSecond > 0)) fail("--refresh-per-second must be a positive number");
  const namespaces = { allowed: parseGlobList(text("allowed-namespaces")!), denied: parseGlobList(text("denied-namespaces")!) };
  let fullSyncIntervalMs: number;
  let refreshIntervalMs: number;
  let heartbeatIntervalMs: number;
  let ownershipRecheckMs: number;
  try {
    fullSyncIntervalMs = parseDuration(text("full-sync-interval")!);
    refreshIntervalMs = parseDuration(text("refresh-interval")!);
    heartbeatIntervalMs = parseDuration(text("heartbeat-interval")!);
    ownershipRecheckMs = parseDuration(text("ownership-recheck-interval")!);
    if (!(ownershipRecheckMs > 0)) throw new Error("--ownership-recheck-interval must be positive");
  } catch (error) {
    fail((error as Error).message);
  }

  let target: Target;
  if (text("target") === "kubernetes") {
    // Loaded only for this target: @kubernetes/client-node costs some 80 MB of RSS.
    const { KubernetesTarget, loadKubeConfig } = await import("./targets/kubernetes.ts");
    target = new KubernetesTarget({ kubeConfig: loadKubeConfig(text("kubeconfig")), region });
  } else if (text("target") === "render") {
    target = new RenderTarget({ dir: text("render-dir") ?? fail("--render-dir is required with --target render"), region });
  } else {
    fail(`--target must be kubernetes or render, got ${JSON.stringify(text("target"))}`);
  }

  const agent = await startAgent({
    ctrlUrl: text("ctrl-url")!,
    region,
    token,
    target,
    concurrency,
    fullSyncIntervalMs,
    refreshIntervalMs,
    refreshPerSecond,
    heartbeatIntervalMs,
    prune: { maxFraction, force: config["force-prune"] === true },
    namespaces,
    ownershipRecheckMs,
    listen: text("listen")!,
  });
  console.error(`agent[${region}]: health and metrics on ${agent.url}, syncing from ${text("ctrl-url")}`);
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
