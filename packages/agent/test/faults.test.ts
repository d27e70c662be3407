// Kubernetes API faults: random 500s on writes, 429 with Retry-After, dropped watches. The agent
// retries with backoff (honouring Retry-After) and converges.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import type { Agent } from "../src/agent.ts";
import { REGION, startStack, waitConverged, waitFor, type Stack } from "@flotilla/testkit/stack";

const deployment = (id: string, image: string) => ({ id, namespace: "faulty", image, port: 80, regions: [{ region: REGION, replicas: 2 }] });

for (const { db, skip } of await testDatabases()) {
  describe(`agent under Kubernetes API faults (${db.name})`, { skip }, () => {
    let stack: Stack;
    let agent: Agent;
    before(async () => {
      stack = await startStack(db);
      agent = await stack.agent({ retryBackoff: { minMs: 10, maxMs: 200 } });
      await agent.ready;
    });
    after(() => stack?.close());

    test("30% of writes fail with 500 and watches are dropped: converges", async () => {
      const { emulator } = stack;
      for (const verb of ["apply", "delete", "create", "update", "patch"] as const) emulator.faults.setErrorRate(verb, 0.3, 500);
      emulator.faults.setWatchDropIntervalMs(100);
      emulator.faults.dropWatches();
      const deployments = stack.t.client(DeploymentService);
      const policies = stack.t.client(NetworkPolicyService);
      for (let i = 0; i < 20; i++) await deployments.createDeployment({ deployment: deployment(`f${i}`, "app:1") });
      await policies.createNetworkPolicy({ networkPolicy: { id: "deny", region: REGION, namespace: "faulty", spec: { endpointSelector: {} } } });
      for (let i = 0; i < 20; i += 2) await deployments.updateDeployment({ deployment: deployment(`f${i}`, "app:2") });
      for (let i = 0; i < 20; i += 5) await deployments.deleteDeployment({ id: `f${i}` });
      await waitConverged(stack);
      const failed = emulator.requestLog.filter((e) => e.status === 500).length;
      assert.ok(failed > 5, `faults were injected (${failed})`);
      const retries = (await agent.metrics.retries.get()).values[0]?.value ?? 0;
      assert.ok(retries >= failed, `every failure was retried (${retries} retries, ${failed} failures)`);
      emulator.faults.clear();
      await waitFor(
        () => agent.table.counts().pending + agent.table.counts().error === 0,
        "table settled",
        10_000,
        () => agent.table.counts(),
      );
    });

    test("429 with Retry-After: the retry waits at least Retry-After", async () => {
      const { emulator } = stack;
      emulator.clearRequestLog();
      emulator.faults.tooManyRequests("apply", 2, 1);
      await stack.t.client(DeploymentService).createDeployment({ deployment: deployment("throttled", "app:1") });
      await waitConverged(stack);
      const applies = emulator.requestLog.filter((e) => e.verb === "apply");
      assert.deepEqual(
        applies.slice(0, 3).map((e) => e.status),
        [429, 429, 201],
        "two throttled, then the Deployment is created",
      );
      for (let i = 1; i < 3; i++) {
        const gap = Date.parse(applies[i]!.time) - Date.parse(applies[i - 1]!.time);
        assert.ok(gap >= 950, `apply ${i} came ${gap} ms after a 429 with Retry-After: 1`);
      }
    });
  });
}
