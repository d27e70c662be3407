// A Node script as an OS process, started until a line of its stderr says it serves: what
// ctrl-process.ts and agent-process.ts share.
import { spawn, type ChildProcess } from "node:child_process";

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
