// Rotating the data key of secret values as the docs say, through the real commands, with ctrl
// and the agent as processes: `pnpm pki secrets-key --add`, ctrl restarted on both keys,
// `pnpm secrets rotate`, the old key removed and ctrl restarted on the new one alone. A ctrl on
// the old key alone, or without a key file, refuses to start, naming the key. A new agent,
// its cluster's Secrets deleted, gets every value again from ctrl on the new key, including
// one written before the rotation; a value written afterwards reaches its Secret too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { KubernetesEmulator } from "@flotilla/k8s-emulator";
import { spawnAgent, type AgentProcess } from "@flotilla/testkit/agent-process";
import { ADMIN_TOKEN } from "@flotilla/testkit/ctrl";
import { spawnCtrl, type CtrlProcess } from "@flotilla/testkit/ctrl-process";
import { testDatabases } from "@flotilla/testkit/databases";
import { waitFor } from "@flotilla/testkit/stack";

const PKI_CLI = fileURLToPath(import.meta.resolve("@flotilla/ctrl/pki-cli"));
const SECRETS_CLI = fileURLToPath(import.meta.resolve("@flotilla/ctrl/secrets-cli"));

/** Runs a ctrl command line tool; its stdout, after checking it exited 0. */
function run(script: string, args: string[]): string {
  const result = spawnSync(process.execPath, [script, ...args], { encoding: "utf8" });
  assert.equal(result.status, 0, result.stderr);
  return result.stdout;
}

function secretValue(emulator: KubernetesEmulator, name: string): string | undefined {
  const data = (emulator.get("v1", "Secret", "demo", `${name}-env`) as { data?: Record<string, string> } | undefined)?.data?.DB_PASSWORD;
  return data === undefined ? undefined : Buffer.from(data, "base64").toString("utf8");
}

for (const { db, skip } of await testDatabases()) {
  test(`key rotation with the documented commands: every value still delivered, a wrong or missing key a clear startup error (${db.name})`, {
    skip,
  }, async () => {
    const { url: databaseUrl, drop } = await db.create();
    const emulator = await KubernetesEmulator.start({ rolloutDelayMs: 20 });
    const dir = mkdtempSync(join(tmpdir(), "flotilla-secret-rotation-"));
    const keyFile = join(dir, "secrets-key.json");
    let ctrl: CtrlProcess | undefined;
    let agent: AgentProcess | undefined;
    let port = "0";
    const startCtrl = async (file = keyFile) => {
      await ctrl?.kill();
      ctrl = await spawnCtrl(databaseUrl, ADMIN_TOKEN, ["--listen", `127.0.0.1:${port}`, "--secrets-key-file", file]);
      port = new URL(ctrl.url).port;
    };
    const client = <S extends DescService>(service: S): Client<S> =>
      createClient(
        service,
        createConnectTransport({
          baseUrl: ctrl!.url,
          httpVersion: "1.1",
          interceptors: [
            (next) => (req) => {
              req.header.set("authorization", `Bearer ${ADMIN_TOKEN}`);
              return next(req);
            },
          ],
        }),
      );
    const setSecret = (id: string, value: string) =>
      client(DeploymentService).createDeployment({
        deployment: { id, namespace: "demo", image: "api:1", regions: [{ region: "east", replicas: 1 }], secretEnv: [{ name: "DB_PASSWORD", value }] },
      });
    const values = new Map([
      ["before", `b3fore-${randomBytes(12).toString("hex")}`],
      ["between", `b3tween-${randomBytes(12).toString("hex")}`],
      ["after", `aft3r-${randomBytes(12).toString("hex")}`],
    ]);
    const delivered = (ids: string[]) =>
      waitFor(
        () => ids.every((id) => secretValue(emulator, id) === values.get(id)),
        `the values of ${ids.join(", ")} in their Secrets`,
        30_000,
        () => [ctrl?.log(), agent?.log()].join("\n"),
      );
    try {
      run(PKI_CLI, ["secrets-key", "--file", keyFile]);
      const firstKeyOnly = readFileSync(keyFile, "utf8");
      await startCtrl();
      await client(RegionService).createRegion({ region: { name: "east" } });
      const { token } = await client(RegionService).createAgentToken({ region: "east" });
      writeFileSync(join(dir, "kubeconfig"), emulator.kubeconfigYaml());
      const startAgent = () => spawnAgent(token, ["--ctrl-url", ctrl!.url, "--region", "east", "--kubeconfig", join(dir, "kubeconfig"), "--settle", "0"]);
      agent = await startAgent();
      await setSecret("before", values.get("before")!);
      await delivered(["before"]);

      // 1–2: a new newest key; ctrl restarted on both seals new values under it.
      run(PKI_CLI, ["secrets-key", "--file", keyFile, "--add"]);
      await startCtrl();
      await setSecret("between", values.get("between")!);
      await delivered(["before", "between"]);

      // 3: every stored value re-sealed under the newest key, ctrl running.
      const rotated = run(SECRETS_CLI, ["rotate", "--secrets-key-file", keyFile, "--database-url", databaseUrl]);
      assert.match(rotated, /[1-9]\d* sealed values moved to key/);
      assert.match(rotated, /a scan of every table found no value under an older key: older keys may now leave the file/);

      // 4: the old key leaves the file. ctrl on the old key alone, or without a key file, refuses to start.
      const { keys } = JSON.parse(readFileSync(keyFile, "utf8")) as { keys: { id: string }[] };
      writeFileSync(keyFile, JSON.stringify({ keys: keys.slice(-1) }), { mode: 0o600 });
      const oldKeyFile = join(dir, "old-key.json");
      writeFileSync(oldKeyFile, firstKeyOnly, { mode: 0o600 });
      await ctrl!.kill();
      await assert.rejects(spawnCtrl(databaseUrl, ADMIN_TOKEN, ["--secrets-key-file", oldKeyFile]), /which the secrets key file does not hold/);
      await assert.rejects(spawnCtrl(databaseUrl, ADMIN_TOKEN), /start with --secrets-key-file holding them/);
      ctrl = undefined;
      await startCtrl();

      // A new agent over a cluster without the Secrets: every value comes from ctrl on the new key
      // alone, in its snapshot's pages (it holds none: it asks for them there).
      await agent.kill();
      for (const id of ["before", "between"]) emulator.delete("v1", "Secret", "demo", `${id}-env`);
      assert.equal(secretValue(emulator, "before"), undefined);
      agent = await startAgent();
      await delivered(["before", "between"]);
      await setSecret("after", values.get("after")!);
      await delivered(["before", "between", "after"]);
    } finally {
      await agent?.kill();
      await ctrl?.kill();
      await emulator.stop();
      await drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
