// The local stacks the documentation's runnable blocks name, started as `pnpm start` starts
// them (the real script, its processes and fixed ports) in a scratch directory that mirrors
// the repository, and a shell to run a block's commands in.
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, cpSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { once } from "node:events";

export const ROOT = new URL("../../../", import.meta.url).pathname;

const pnpmMissing = spawnSync("pnpm", ["--version"]).status !== 0;

/** A `pnpm start` (the real script) in a scratch directory that mirrors the repository. */
export async function startStack(args: string[] = [], readyTimeoutMs = 60_000): Promise<{ dir: string; output: () => string; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "flotilla-quickstart-"));
  for (const entry of ["packages", "node_modules", "scripts"]) symlinkSync(join(ROOT, entry), join(dir, entry));
  // A copy: the quick start copies and edits it.
  cpSync(join(ROOT, "examples"), join(dir, "examples"), { recursive: true });
  for (const file of ["package.json", "pnpm-workspace.yaml"]) copyFileSync(join(ROOT, file), join(dir, file));
  const start = spawn(process.execPath, ["scripts/start.ts", ...args], {
    cwd: dir,
    env: { ...process.env, FLOTILLA_CONFIG: join(dir, "config.yaml") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  start.stdout!.on("data", (d) => (output += d));
  start.stderr!.on("data", (d) => (output += d));
  const stop = async () => {
    if (start.exitCode === null && start.signalCode === null) {
      start.kill("SIGINT");
      await once(start, "exit");
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + readyTimeoutMs;
  while (!output.includes("Ctrl-C stops everything")) {
    if (start.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`pnpm start did not come up:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { dir, output: () => output, stop };
}

/** Runs `command` in bash in the stack's directory, with its CLI context. */
export function shell(dir: string, command: string, env: Record<string, string> = {}) {
  return spawnSync("bash", ["-c", command], {
    cwd: dir,
    env: { ...process.env, FLOTILLA_CONFIG: join(dir, "config.yaml"), ...env },
    encoding: "utf8",
    timeout: 120_000,
  });
}

export const skip = pnpmMissing && !process.env.CI ? "pnpm is not on PATH" : false;
