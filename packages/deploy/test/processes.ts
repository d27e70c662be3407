// Processes of the deployment tests: started like a container or compose service would start
// them (a command and an environment), stopped with SIGTERM, their output kept for failures.
import { spawn, type ChildProcess } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";

export const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** The main.ts of a workspace package (its `./main` export): ctrl, agent, k8s-emulator. */
export const mainOf = (name: "ctrl" | "agent" | "k8s-emulator"): string => fileURLToPath(import.meta.resolve(`@flotilla/${name}/main`));

export interface RunningProcess {
  child: ChildProcess;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** Resolves with the first match of `pattern` in the output. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  stop(): Promise<void>;
}

/** Starts `command` (argv[0] `node` means this Node binary) with exactly `env` plus PATH. */
export function startProcess(command: readonly string[], options: { env: Record<string, string>; cwd: string }): RunningProcess {
  const [program, ...args] = command;
  const child = spawn(program === "node" ? process.execPath : program!, args, {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? "", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    child,
    output: () => output,
    async waitFor(pattern, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const match = pattern.exec(output);
        if (match) return match;
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Error(`${command.join(" ")} exited (${child.exitCode ?? child.signalCode}) before printing ${pattern}:\n${output}`);
        if (Date.now() > deadline) throw new Error(`${command.join(" ")} did not print ${pattern} within ${timeoutMs} ms:\n${output}`);
        await sleep(50);
      }
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** Polls `check` until it returns a truthy value. */
export async function eventually<T>(check: () => T | Promise<T>, what: string, timeoutMs = 60_000): Promise<Exclude<T, false | null | undefined | "" | 0>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as Exclude<T, false | null | undefined | "" | 0>;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`);
    await sleep(100);
  }
}

/** Operator clients of a ctrl at `url`. */
export function operatorClients(
  url: string,
  adminToken: string,
): { regions: Client<typeof RegionService>; deployments: Client<typeof DeploymentService>; networkPolicies: Client<typeof NetworkPolicyService> } {
  const transport = createConnectTransport({
    baseUrl: url,
    httpVersion: "2",
    interceptors: [
      (next) => (request) => {
        request.header.set("authorization", `Bearer ${adminToken}`);
        return next(request);
      },
    ],
  });
  return {
    regions: createClient(RegionService, transport),
    deployments: createClient(DeploymentService, transport),
    networkPolicies: createClient(NetworkPolicyService, transport),
  };
}
