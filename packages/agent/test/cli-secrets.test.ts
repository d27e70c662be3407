// The agent's token stays out of the process list: --token-file and FLOTILLA_AGENT_TOKEN
// work without a word; --token works but warns.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url));

/** Runs the agent CLI until it stops at an invalid --target (after reading its token). */
function agentStderr(args: string[], env: Record<string, string> = {}): string {
  const run = spawnSync(process.execPath, [MAIN, "--region", "east", "--target", "none", ...args], { encoding: "utf8", env: { ...process.env, ...env } });
  assert.equal(run.status, 2);
  assert.match(run.stderr, /--target must be kubernetes or render/, "the token was read and accepted");
  return run.stderr;
}

test("--token warns; --token-file and the environment do not", () => {
  assert.match(agentStderr(["--token", "secret-a"]), /warning: --token shows the token to every user of this host/);
  const dir = mkdtempSync(join(tmpdir(), "flotilla-agent-token-"));
  try {
    writeFileSync(join(dir, "token"), "secret-b\n");
    assert.doesNotMatch(agentStderr(["--token-file", join(dir, "token")]), /warning/);
    assert.doesNotMatch(agentStderr([], { FLOTILLA_AGENT_TOKEN: "secret-c" }), /warning/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("without any token: a clear error naming the file and environment options", () => {
  const env = { ...process.env };
  delete env.FLOTILLA_AGENT_TOKEN;
  const run = spawnSync(process.execPath, [MAIN, "--region", "east"], { encoding: "utf8", env });
  assert.equal(run.status, 2);
  assert.match(run.stderr, /--token-file or FLOTILLA_AGENT_TOKEN is required/);
});
