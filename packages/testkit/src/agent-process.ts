// The agent as a separate OS process (its main.ts, exported as @flotilla/agent/main), for
// leader-election tests that kill (-9), pause (SIGSTOP) and resume (SIGCONT) agents.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(import.meta.resolve("@flotilla/agent/main"));

export interface AgentProcess {
  /** Base URL of its /healthz, /readyz and /metrics. */
  url: string;
  child: ChildProcess;
  /** Everything the process wrote to stderr. */
  log(): string;
  /** The value of one sample of its /metrics (`name{labels}` as exposed), or undefined. */
  metric(sample: string): Promise<number | undefined>;
  signal(signal: NodeJS.Signals): void;
  /** Sends `signal` and resolves with the exit code once the process exited. */
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `flotilla-agent` with `args`; the token goes in through the environment (never argv). */
export async function spawnAgent(token: string, args: string[]): Promise<AgentProcess> {
  const child = spawn(process.execPath, [MAIN, "--listen", "127.0.0.1:0", ...args], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, FLOTILLA_AGENT_TOKEN: token },
  });
  let stderr = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`agent did not start:\n${stderr}`)), 20_000);
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = /health and metrics on (http:\/\/\S+),/.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    child.once("exit", (code) => reject(new Error(`agent exited with ${code}:\n${stderr}`)));
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    url,
    child,
    log: () => stderr,
    async metric(sample) {
      const text = await (await fetch(`${url}/metrics`)).text();
      const line = text.split("\n").find((l) => l.startsWith(`${sample} `));
      return line === undefined ? undefined : Number(line.slice(sample.length + 1));
    },
    signal(signal) {
      child.kill(signal);
    },
    kill(signal = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
