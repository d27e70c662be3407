// The agent's memory holds secret env values sealed: a heap snapshot of a running agent process
// (its first sync applied the Secret, opening the value; no apply in flight, and again with the
// Secret's apply in flight) contains neither the value nor its base64 form, while it does contain what the agent keeps of the same
// deployment in plain form (its resource key). Secrets are not
// watched (that would need list on every Secret of the cluster): a hand edit is undone by the
// periodic refresh.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { SecretEnvVarSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { KubernetesEmulator } from "@flotilla/k8s-emulator";
import { spawnAgent, type AgentProcess } from "@flotilla/testkit/agent-process";
import { startTestCtrl, testSecretKeyRing } from "@flotilla/testkit/ctrl";
import { testDatabases } from "@flotilla/testkit/databases";
import { waitFor } from "@flotilla/testkit/stack";
import { heapSnapshot } from "@flotilla/testkit/node-process";

const [{ db }] = await testDatabases();

/** The Secret's value of `key`, decoded, or undefined. */
function secretValue(emulator: KubernetesEmulator, name: string, key: string): string | undefined {
  const data = (emulator.get("v1", "Secret", "demo", name) as { data?: Record<string, string> } | undefined)?.data?.[key];
  return data === undefined ? undefined : Buffer.from(data, "base64").toString("utf8");
}

test("a running agent's heap holds no secret value, in plain or base64 form; the refresh undoes a hand-edited Secret", async () => {
  const t = await startTestCtrl(db, {}, { secrets: testSecretKeyRing() });
  const emulator = await KubernetesEmulator.start();
  const dir = mkdtempSync(join(tmpdir(), "flotilla-secret-memory-"));
  const id = `vault-${randomBytes(4).toString("hex")}`;
  const value = `s3cret-${randomBytes(16).toString("hex")}`;
  let agent: AgentProcess | undefined;
  try {
    await t.store.regions.create("east");
    const { token } = await t.client(RegionService).createAgentToken({ region: "east" });
    writeFileSync(join(dir, "kubeconfig"), emulator.kubeconfigYaml());
    const args = ["--ctrl-url", t.url, "--region", "east", "--kubeconfig", join(dir, "kubeconfig"), "--settle", "0"];
    // An agent refreshing every 2 s: a hand edit of the Secret is undone.
    agent = await spawnAgent(token, [...args, "--refresh-interval", "2s"]);
    await t.client(DeploymentService).createDeployment({
      deployment: { id, namespace: "demo", image: "api:1", regions: [{ region: "east", replicas: 1 }], secretEnv: [{ name: "DB_PASSWORD", value }] },
    });
    await waitFor(() => secretValue(emulator, `${id}-env`, "DB_PASSWORD") === value, "the value in its Secret", 20_000, agent.log);
    const secret = emulator.get("v1", "Secret", "demo", `${id}-env`)!;
    emulator.put({ ...secret, data: { DB_PASSWORD: Buffer.from("edited by hand").toString("base64") } });
    assert.equal(secretValue(emulator, `${id}-env`, "DB_PASSWORD"), "edited by hand");
    await waitFor(() => secretValue(emulator, `${id}-env`, "DB_PASSWORD") === value, "the refresh to restore the value", 30_000, agent.log);
    await agent.kill();

    // An agent with the default refresh, after its first sync applied the Secret: no apply is in
    // flight (one in flight holds the value in its request, as long as the apply needs).
    emulator.put({ ...secret, data: { DB_PASSWORD: Buffer.from("edited by hand").toString("base64") } });
    agent = await spawnAgent(token, args, ["--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${dir}`]);
    await waitFor(() => secretValue(emulator, `${id}-env`, "DB_PASSWORD") === value, "the value applied again", 20_000, agent.log);
    await waitFor(
      async () =>
        (await agent!.metric('workqueue_depth{name="agent"}')) === 0 && (await agent!.metric('workqueue_work_duration_seconds_count{name="agent"}'))! >= 1,
      "the queue drained",
    );
    const snapshot = await heapSnapshot(agent.child, dir);
    assert.ok(snapshot.includes(`deployment/${id}`), "the snapshot holds the agent's strings (the resource key)");
    assert.ok(!snapshot.includes(value), "no plain value in the agent's heap");
    assert.ok(!snapshot.includes(Buffer.from(value).toString("base64")), "no base64 value in the agent's heap");

    // A Secret's apply in flight, its body read by the API server and its answer held back:
    // the request carries the values as bytes outside the heap (secret-request.ts), so the
    // snapshot holds none of them either.
    const next = `s3cret-${randomBytes(16).toString("hex")}`;
    const release = emulator.faults.hold("apply");
    try {
      const { deployment } = await t.client(DeploymentService).getDeployment({ id });
      deployment!.secretEnv = [create(SecretEnvVarSchema, { name: "DB_PASSWORD", value: next })];
      await t.client(DeploymentService).updateDeployment({ deployment });
      await waitFor(() => emulator.faults.held > 0, "the Secret's apply in flight", 20_000, agent.log);
      const inFlight = await heapSnapshot(agent.child, dir);
      assert.ok(inFlight.includes(`deployment/${id}`), "the snapshot holds the agent's strings (the resource key)");
      assert.ok(!inFlight.includes(next), "no plain value in the agent's heap while the apply is in flight");
      assert.ok(!inFlight.includes(Buffer.from(next).toString("base64")), "no base64 value in the agent's heap while the apply is in flight");
    } finally {
      release();
    }
    await waitFor(() => secretValue(emulator, `${id}-env`, "DB_PASSWORD") === next, "the new value applied", 20_000, agent.log);
  } finally {
    await agent?.kill();
    await emulator.stop();
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
