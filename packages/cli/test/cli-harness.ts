// What the CLI's tests share: the CLI run as a user runs it (its own process, with the given
// environment and stdin), and tables made comparable with golden files.
import { spawn } from "node:child_process";

const CLI = new URL("../src/main.ts", import.meta.url).pathname;

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `flotilla args…` with `env` (nothing inherited) and `input` on stdin. */
export function runCli(env: NodeJS.ProcessEnv, args: string[], input = ""): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
    child.stdin.end(input);
  });
}

/** A table with its AGE column masked (it changes with time) and cells joined by " | " (cells are three spaces apart or more). */
export function maskedTable(text: string): string {
  const rows = text
    .trimEnd()
    .split("\n")
    .map((line) => line.split(/ {3,}/));
  const age = rows[0]!.indexOf("AGE");
  return `${rows.map((cells) => cells.map((c, i) => (i === age && c !== "AGE" ? "<age>" : c)).join(" | ")).join("\n")}\n`;
}
