// ctrl as a separate OS process (its main.ts, exported as @flotilla/ctrl/main), for
// multi-replica and kill tests.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(import.meta.resolve("@flotilla/ctrl/main"));

export interface CtrlProcess {
  url: string;
  child: ChildProcess;
  /** Everything the process wrote to stderr. */
  log(): string;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

export async function spawnCtrl(databaseUrl: string, adminToken: string, extraArgs: string[] = []): Promise<CtrlProcess> {
  // The token by environment, as documented: a flag would show it in the process list.
  const child = spawn(process.execPath, [MAIN, "--database-url", databaseUrl, "--listen", "127.0.0.1:0", ...extraArgs], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, FLOTILLA_CTRL_ADMIN_TOKEN: adminToken },
  });
  let stderr = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`ctrl did not start:\n${stderr}`)), 20_000);
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = /serving on (http:\/\/\S+)/.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    child.once("exit", (code) => reject(new Error(`ctrl exited with ${code}:\n${stderr}`)));
  });
  return {
    url,
    child,
    log: () => stderr,
    kill(signal = "SIGTERM") {
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
      return new Promise((resolve) => {
        child.once("exit", (code) => resolve(code));
        child.kill(signal);
      });
    },
  };
}
