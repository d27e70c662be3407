// A Node script as an OS process, started until a line of its stderr says it serves: what
// ctrl-process.ts and agent-process.ts share.
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

export interface NodeProcess {
  child: ChildProcess;
  /** The first capture group of `ready` in its stderr. */
  url: string;
  /** Everything the process wrote to stderr. */
  log(): string;
  /** Sends `signal` (unless it has exited) and resolves with the exit code once it exited. */
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Runs `script` with `args`, Node's `nodeFlags` and `env` added to this process's environment
 * (secrets go there, never into argv), and resolves once its stderr matches `ready`; rejects if
 * it exits first or takes longer than 20 s. `what` names it in errors.
 */
export async function spawnNode(
  what: string,
  script: string,
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
  nodeFlags: readonly string[] = [],
): Promise<NodeProcess> {
  const child = spawn(process.execPath, [...nodeFlags, script, ...args], { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, ...env } });
  let stderr = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start:\n${stderr}`)), 20_000);
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = ready.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    child.once("exit", (code) => reject(new Error(`${what} exited with ${code}:\n${stderr}`)));
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    child,
    url,
    log: () => stderr,
    kill(signal = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/**
 * Asks `child` (started with Node's --heapsnapshot-signal=SIGUSR2 and --diagnostic-dir=`dir`)
 * for a heap snapshot and returns its text once written whole.
 */
export async function heapSnapshot(child: ChildProcess, dir: string): Promise<string> {
  const before = new Set(readdirSync(dir));
  child.kill("SIGUSR2");
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(100)) {
    const file = readdirSync(dir).find((name) => name.endsWith(".heapsnapshot") && !before.has(name));
    if (file === undefined) continue;
    const text = readFileSync(join(dir, file), "utf8");
    try {
      JSON.parse(text);
      return text;
    } catch {
      // still being written
    }
  }
  throw new Error("no heap snapshot written within 60 s");
}
