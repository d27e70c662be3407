// A taken --listen port is one clear line and exit code 1, not a stack trace.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url));

test("the agent reports a taken --listen port in one line", async (t) => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
  t.after(() => taken.close());
  const address = `127.0.0.1:${(taken.address() as { port: number }).port}`;
  const dir = mkdtempSync(join(tmpdir(), "flotilla-agent-listen-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const args = [MAIN, "--region", "east", "--target", "render", "--render-dir", dir, "--ctrl-url", "http://127.0.0.1:9", "--listen", address];
  const { code, stderr } = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = execFile(
      process.execPath,
      args,
      { env: { PATH: process.env.PATH ?? "", FLOTILLA_AGENT_TOKEN: "x" }, timeout: 20_000 },
      (_error, _stdout, stderr) => resolve({ code: child.exitCode, stderr }),
    );
  });
  assert.equal(code, 1);
  const lines = stderr.trim().split("\n");
  assert.equal(lines.length, 1, stderr);
  // A log line like every other (--log-format decides its shape).
  assert.match(lines[0]!, new RegExp(`^\\S+ ERROR --listen ${address}: address already in use process=agent region=east$`));
});
