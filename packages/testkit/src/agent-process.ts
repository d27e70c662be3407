// The agent as a separate OS process (its main.ts, exported as @flotilla/agent/main), for
// leader-election tests that kill (-9), pause (SIGSTOP) and resume (SIGCONT) agents.
import { fileURLToPath } from "node:url";
import { spawnNode, type NodeProcess } from "./node-process.ts";

const MAIN = fileURLToPath(import.meta.resolve("@flotilla/agent/main"));

/** The agent's process; `url` is the base URL of its /healthz, /readyz and /metrics. */
export interface AgentProcess extends NodeProcess {
  /** The value of one sample of its /metrics (`name{labels}` as exposed), or undefined. */
  metric(sample: string): Promise<number | undefined>;
  signal(signal: NodeJS.Signals): void;
}

/** Starts `flotilla-agent` with `args` (and Node's `nodeFlags`); the token goes in through the environment (never argv). */
export async function spawnAgent(token: string, args: string[], nodeFlags: readonly string[] = []): Promise<AgentProcess> {
  const agent = await spawnNode(
    "agent",
    MAIN,
    ["--listen", "127.0.0.1:0", ...args],
    { FLOTILLA_AGENT_TOKEN: token },
    /health and metrics on (http:\/\/\S+),/,
    nodeFlags,
  );
  return {
    ...agent,
    async metric(sample) {
      const text = await (await fetch(`${agent.url}/metrics`)).text();
      const line = text.split("\n").find((l) => l.startsWith(`${sample} `));
      return line === undefined ? undefined : Number(line.slice(sample.length + 1));
    },
    signal(signal) {
      agent.child.kill(signal);
    },
  };
}

/**
 * The flags of an agent of `region` electing a leader on a Lease in namespace default, with
 * short timings (renew deadline half the lease, retry every 300 ms) and fast reports.
 */
export function leaderElectingAgentArgs(ctrlUrl: string, region: string, kubeconfig: string, leaseSeconds: number, bookmarkMs: number): string[] {
  return [
    ...["--ctrl-url", ctrlUrl, "--region", region, "--kubeconfig", kubeconfig],
    ...["--leader-elect", "--leader-elect-lease-duration", `${leaseSeconds}s`, "--leader-elect-renew-deadline", `${leaseSeconds / 2}s`],
    ...["--leader-elect-retry-period", "300ms", "--leader-elect-resource-namespace", "default"],
    ...["--bookmark-interval", `${bookmarkMs}ms`, "--report-interval", "50ms", "--heartbeat-interval", "100ms", "--settle", "0"],
  ];
}
