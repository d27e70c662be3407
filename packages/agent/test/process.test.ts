// The agent as a process: JSON log lines (level, region, never the token), and SIGTERM with an
// apply in flight: the apply completes, then the process exits 0.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { KubernetesEmulator } from "@flotilla/k8s-emulator";
import { testDatabases } from "@flotilla/testkit/databases";
import { startTestCtrl } from "@flotilla/testkit/ctrl";
import { deploymentOf, waitFor } from "@flotilla/testkit/stack";

const MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url));
const [{ db }] = await testDatabases();

test("SIGTERM with an apply in flight: it completes, the agent exits 0; every log line is JSON with level and region, and no token", async () => {
  const t = await startTestCtrl(db);
  const emulator = await KubernetesEmulator.start();
  const dir = mkdtempSync(join(tmpdir(), "flotilla-agent-process-"));
  try {
    await t.store.regions.create("east");
    const { token } = await t.client(RegionService).createAgentToken({ region: "east" });
    writeFileSync(join(dir, "kubeconfig"), emulator.kubeconfigYaml());
    const args = [
      "--region",
      "east",
      "--ctrl-url",
      t.url,
      "--kubeconfig",
      join(dir, "kubeconfig"),
      "--listen",
      "127.0.0.1:0",
      "--log-format",
      "json",
      "--log-level",
      "debug",
    ];
    const child = spawn(process.execPath, [MAIN, ...args], { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, FLOTILLA_AGENT_TOKEN: token } });
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    try {
      const url = await waitFor(
        () => /health and metrics on (http:\/\/[\d.:]+)/.exec(stderr)?.[1],
        "the agent's health URL",
        20_000,
        () => stderr,
      );
      await waitFor(
        () => /first complete sync dispatched/.test(stderr),
        "the first sync",
        20_000,
        () => stderr,
      );
      // Each apply (Namespace, Deployment, Service) now takes a second and a half.
      emulator.faults.latencyMs("apply", 1500);
      await t
        .client(DeploymentService)
        .createDeployment({ deployment: { id: "web", namespace: "demo", image: "nginx:1.27", port: 80, regions: [{ region: "east", replicas: 1 }] } });
      // In flight: a key was handed to a worker, and no worker has finished one.
      await waitFor(async () => {
        const metrics = await (await fetch(`${url}/metrics`)).text();
        return /^workqueue_adds_total\{name="agent"\} [1-9]/m.test(metrics) && !/^workqueue_work_duration_seconds_count\{name="agent"\} [1-9]/m.test(metrics);
      }, "an apply in flight");
      assert.equal(deploymentOf(emulator, "demo", "web"), undefined, "not applied yet");
      child.kill("SIGTERM");
      assert.equal(await exited, 0, stderr);
      assert.ok(deploymentOf(emulator, "demo", "web"), "the apply in flight completed before the exit");
    } finally {
      child.kill("SIGKILL");
    }
    const lines = stderr
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    for (const line of lines) {
      assert.ok(["debug", "info", "warn", "error"].includes(line.level as string), JSON.stringify(line));
      assert.equal(line.region, "east", JSON.stringify(line));
      assert.equal(typeof line.msg, "string");
    }
    assert.ok(
      lines.some((line) => line.msg === "applied" && line.resource === "deployment/web" && typeof line.version === "number"),
      stderr,
    );
    assert.ok(lines.some((line) => line.msg === "SIGTERM, stopping") && lines.at(-1)!.msg === "stopped", stderr);
    assert.ok(!stderr.includes(token), "the token is never logged");
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await emulator.stop();
    await t.close();
  }
});
