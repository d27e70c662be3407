// ctrl's memory holds secret values only while a write needs them: a heap snapshot of a running
// ctrl process taken after `flotilla secret set` wrote a value (sealed, fingerprinted, sealed
// again for the region's agent) contains neither the value nor its base64 form. As the agent's
// test does (packages/agent/test/secret-memory.test.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { generateKeyFile } from "@flotilla/store";
import { ADMIN_TOKEN } from "@flotilla/testkit/ctrl";
import { spawnCtrl } from "@flotilla/testkit/ctrl-process";
import { heapSnapshot } from "@flotilla/testkit/node-process";

const CLI = fileURLToPath(import.meta.resolve("@flotilla/cli/main"));

/** `flotilla args…` with `input` on stdin and the context in `env`; its exit code and output. */
function flotilla(env: NodeJS.ProcessEnv, args: string[], input: string): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ["pipe", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  child.stdin.end(input);
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, output })));
}

test("a running ctrl's heap holds no secret value after flotilla secret set, in plain or base64 form", async () => {
  const dir = mkdtempSync(join(tmpdir(), "flotilla-ctrl-secret-memory-"));
  const keyFile = join(dir, "secrets-key.json");
  writeFileSync(keyFile, generateKeyFile("k1"), { mode: 0o600 });
  const id = `vault-${randomBytes(4).toString("hex")}`;
  const value = `s3cret-${randomBytes(16).toString("hex")}`;
  const ctrl = await spawnCtrl(
    `sqlite:${join(dir, "ctrl.db")}`,
    ADMIN_TOKEN,
    ["--secrets-key-file", keyFile],
    ["--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${dir}`],
  );
  try {
    const transport = createConnectTransport({
      baseUrl: ctrl.url,
      httpVersion: "1.1",
      interceptors: [
        (next) => (req) => {
          req.header.set("authorization", `Bearer ${ADMIN_TOKEN}`);
          return next(req);
        },
      ],
    });
    await createClient(RegionService, transport).createRegion({ region: { name: "east" } });
    await createClient(DeploymentService, transport).createDeployment({
      deployment: { id, namespace: "demo", image: "api:1", regions: [{ region: "east", replicas: 1 }] },
    });
    writeFileSync(join(dir, "admin.token"), `${ADMIN_TOKEN}\n`);
    const env = { PATH: process.env.PATH, FLOTILLA_CONFIG: join(dir, "config.yaml") };
    assert.equal((await flotilla(env, ["context", "set", "test", "--server", ctrl.url, "--token-file", join(dir, "admin.token")], "")).code, 0);
    const set = await flotilla(env, ["secret", "set", `deployment/${id}`, "DB_PASSWORD"], value);
    assert.equal(set.code, 0, set.output);
    assert.ok(!set.output.includes(value));
    const snapshot = await heapSnapshot(ctrl.child, dir);
    // A whole snapshot of a live heap (ctrl keeps no string of ours for sure: its size says it is one).
    const { snapshot: meta } = JSON.parse(snapshot) as { snapshot: { node_count: number } };
    assert.ok(meta.node_count > 10_000, `a heap snapshot of ctrl (${meta.node_count} nodes)`);
    assert.ok(!snapshot.includes(value), "no plain value in ctrl's heap");
    assert.ok(!snapshot.includes(Buffer.from(value).toString("base64")), "no base64 value in ctrl's heap");
  } finally {
    await ctrl.kill();
    rmSync(dir, { recursive: true, force: true });
  }
});
