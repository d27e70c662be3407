// One agent process of the benchmarks (bench/agent-child.ts from the agent's production bundle),
// run to the drained state: B7 and B13 measure it so, their own memory kept out of it.
import { fork } from "node:child_process";
import { join } from "node:path";
import { AGENT_ENVIRONMENT } from "@flotilla/agent/node-flags";
import { Store, type StoreOptions } from "@flotilla/store";
import type { AgentChildConfig, AgentChildReport } from "../agent-child.ts";
import { storeDecisions } from "@flotilla/ctrl/rollouts";

/** Runs one agent process to the drained state and returns its report. */
export async function runAgent(bundle: string, config: AgentChildConfig, nodeFlags: readonly string[], timeoutMs: number): Promise<AgentChildReport> {
  const child = fork(join(bundle, "agent-child.mjs"), [], {
    execArgv: ["--expose-gc", ...nodeFlags],
    env: { ...process.env, ...AGENT_ENVIRONMENT, FLOTILLA_BENCH_AGENT: JSON.stringify(config) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    return await new Promise<AgentChildReport>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`agent child did not drain within ${timeoutMs} ms`)), timeoutMs);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`agent child exited (${code}) before reporting`));
      });
      child.once("message", (message: { report: AgentChildReport }) => {
        clearTimeout(timer);
        resolve(message.report);
      });
    });
  } finally {
    if (child.exitCode === null) {
      child.send({ op: "shutdown" });
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
  }
}

/** Agent tokens of `region` and of a new empty region `emptyRegion` (the baseline of B7). */
export async function agentTokens(
  url: string,
  region: string,
  emptyRegion: string,
  options: StoreOptions = {},
): Promise<{ token: string; emptyToken: string }> {
  const [token, emptyToken] = await regionTokens(url, [region, emptyRegion], [emptyRegion], options);
  return { token: token!, emptyToken: emptyToken! };
}

/** An agent token of each of `regions`, in their order, creating those of `create` first. */
export async function regionTokens(url: string, regions: readonly string[], create: readonly string[] = [], options: StoreOptions = {}): Promise<string[]> {
  const store = await Store.open(url, { rollouts: storeDecisions, ...options });
  try {
    for (const region of create) await store.regions.create(region);
    const tokens: string[] = [];
    for (const region of regions) tokens.push((await store.agentTokens.create(region)).token);
    return tokens;
  } finally {
    await store.close();
  }
}
