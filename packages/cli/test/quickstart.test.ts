// The README's quick start, run as written: `pnpm start` (the real script, its processes and
// fixed ports) in a scratch directory that mirrors the repository, then each line of the
// README's CLI block in a shell there. diff is the one line that exits 1 (changes found).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { copyFileSync, cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { once } from "node:events";

const ROOT = new URL("../../../", import.meta.url).pathname;
const README = readFileSync(join(ROOT, "README.md"), "utf8");

/** The commands of the sh block under "## Quick start with the CLI", comments removed. */
function quickStartCommands(): string[] {
  const section = README.slice(README.indexOf("## Quick start with the CLI"));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block, "the README has a quick start block");
  return block
    .split("\n")
    .map((line) => line.replace(/\s+# .*$/, "").trim())
    .filter(Boolean);
}

const pnpmMissing = spawnSync("pnpm", ["--version"]).status !== 0;

let dir: string;
let start: ChildProcess | undefined;
let startOutput = "";

before(async () => {
  if (pnpmMissing) return;
  dir = mkdtempSync(join(tmpdir(), "flotilla-quickstart-"));
  for (const entry of ["packages", "node_modules", "scripts"]) symlinkSync(join(ROOT, entry), join(dir, entry));
  // A copy: the quick start copies and edits it.
  cpSync(join(ROOT, "examples"), join(dir, "examples"), { recursive: true });
  for (const file of ["package.json", "pnpm-workspace.yaml"]) copyFileSync(join(ROOT, file), join(dir, file));
  start = spawn(process.execPath, ["scripts/start.ts"], {
    cwd: dir,
    env: { ...process.env, FLOTILLA_CONFIG: join(dir, "config.yaml") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  start.stdout!.on("data", (d) => (startOutput += d));
  start.stderr!.on("data", (d) => (startOutput += d));
  const deadline = Date.now() + 60_000;
  while (!startOutput.includes("Ctrl-C stops everything")) {
    if (start.exitCode !== null || Date.now() > deadline) throw new Error(`pnpm start did not come up:\n${startOutput}`);
    await new Promise((r) => setTimeout(r, 100));
  }
});

after(async () => {
  if (start && start.exitCode === null) {
    start.kill("SIGINT");
    await once(start, "exit");
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("the README's quick start with the CLI, line by line", { skip: pnpmMissing && !process.env.CI ? "pnpm is not on PATH" : false, timeout: 240_000 }, () => {
  assert.match(startOutput, /pnpm flotilla apply -f examples\/ --wait/, "pnpm start points at the CLI");
  for (const command of quickStartCommands()) {
    const result = spawnSync("bash", ["-c", command], {
      cwd: dir,
      env: { ...process.env, FLOTILLA_CONFIG: join(dir, "config.yaml") },
      encoding: "utf8",
      timeout: 120_000,
    });
    const expected = command.includes("flotilla diff") ? 1 : 0;
    assert.equal(result.status, expected, `${command}\n${result.stdout}${result.stderr}`);
    if (command.includes("apply -f my-fleet/ --wait")) assert.match(result.stdout, /deployment\/web created\n[\s\S]*deployment\/web is RUNNING/);
    if (command.includes("get deployments")) assert.match(result.stdout, /^web +demo +nginx:1\.27 +1 +local:RUNNING 2\/2 /m);
    if (command.includes("history")) assert.match(result.stdout, /^2 +admin .* nginx:1\.28 +nginx 1\.28$/m);
    if (command.includes("describe")) assert.match(result.stdout, /^Image: +nginx:1\.27$/m);
  }
});
