// The admin token never reaches ctrl's logs: a generated one is kept in its file only; one
// given by file is read from there.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url));

/** Runs ctrl in `cwd` until it serves, then stops it; returns everything it logged. */
function runCtrl(cwd: string, args: string[]): Promise<string> {
  const env = { ...process.env };
  delete env.FLOTILLA_CTRL_ADMIN_TOKEN;
  const child = spawn(process.execPath, [MAIN, "--database-url", "sqlite:db", "--listen", "127.0.0.1:0", ...args], {
    cwd,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let log = "";
  for (const stream of [child.stdout, child.stderr]) {
    stream.on("data", (chunk) => {
      log += chunk;
      if (/serving on/.test(log)) child.kill("SIGTERM");
    });
  }
  return new Promise((resolve) => child.once("exit", () => resolve(log)));
}

test("a generated admin token is written to its file (mode 600), not to the log", async () => {
  const dir = mkdtempSync(join(tmpdir(), "flotilla-admin-"));
  try {
    const log = await runCtrl(dir, []);
    const token = readFileSync(join(dir, ".flotilla/admin-token"), "utf8").trim();
    assert.match(token, /^flt_admin_/);
    assert.equal(statSync(join(dir, ".flotilla/admin-token")).mode & 0o777, 0o600);
    assert.match(log, /kept in \.flotilla\/admin-token/);
    assert.ok(!log.includes(token), log);
    // Reused on the next start, still unlogged.
    assert.ok(!(await runCtrl(dir, [])).includes(token));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("--admin-token-file is read; --admin-token warns that it shows in the process list", async () => {
  const dir = mkdtempSync(join(tmpdir(), "flotilla-admin-"));
  try {
    writeFileSync(join(dir, "token"), "file-token-secret\n");
    const fromFile = await runCtrl(dir, ["--admin-token-file", "token"]);
    assert.match(fromFile, /serving on/);
    assert.ok(!fromFile.includes("file-token-secret"));
    const fromFlag = await runCtrl(dir, ["--admin-token", "flag-token-secret"]);
    assert.match(fromFlag, / WARN --admin-token shows the token/);
    assert.ok(!fromFlag.includes("flag-token-secret"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
