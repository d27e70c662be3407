// Restarts: the agent restarted while changes (including deletes) happen, and ctrl restarted
// mid-stream while writes go on. Both converge with nothing lost and nothing duplicated.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import { KubernetesObjectApi, PatchStrategy, type KubernetesObject } from "@kubernetes/client-node";
import { DeploymentDesiredStatus, DeploymentSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN } from "@flotilla/testkit/ctrl";
import { startCtrl } from "@flotilla/ctrl";
import { BOOKMARK_MS, deploymentOf, imageOf, REGION, startStack, waitConverged, waitFor, type Stack } from "@flotilla/testkit/stack";

const deployment = (id: string, image: string, replicas = 1) => ({ id, namespace: "apps", image, port: 8080, regions: [{ region: REGION, replicas }] });

for (const { db, skip } of await testDatabases()) {
  describe(`agent and ctrl restarts (${db.name})`, { skip }, () => {
    let stack: Stack;
    before(async () => {
      stack = await startStack(db);
    });
    after(() => stack?.close());

    test("agent restarted: changes made while it was down (updates, creates, stops, deletes) converge", async () => {
      const deployments = stack.t.client(DeploymentService);
      for (let i = 0; i < 8; i++) await deployments.createDeployment({ deployment: deployment(`r${i}`, "app:1") });
      const first = await stack.agent();
      await first.ready;
      await waitConverged(stack);
      await first.stop();

      await deployments.updateDeployment({ deployment: deployment("r0", "app:2", 3) });
      await deployments.deleteDeployment({ id: "r1" });
      await deployments.updateDeployment({ deployment: { ...deployment("r2", "app:1"), desiredStatus: DeploymentDesiredStatus.STOPPED } });
      await deployments.createDeployment({ deployment: deployment("r8", "app:1") });
      stack.emulator.clearRequestLog();

      const second = await stack.agent();
      await second.ready;
      await waitConverged(stack);
      assert.equal(imageOf(deploymentOf(stack.emulator, "apps", "r0")), "app:2");
      const pruned = (await second.metrics.pruned.get()).values[0]?.value;
      assert.equal(pruned, 4, "r1 and r2 (Deployment + Service each) were pruned");
      const creates = stack.emulator.requestLog.filter((e) => e.verb === "apply" && e.status === 201 && e.resource === "deployments");
      assert.deepEqual(
        creates.map((e) => e.name),
        ["r8"],
        "only the new deployment was created; nothing duplicated",
      );
      await second.stop();
    });

    test("agent restarted against a cluster that holds its state: writes nothing; an object edited while it was down is restored", async () => {
      const deployments = stack.t.client(DeploymentService);
      for (let i = 0; i < 6; i++) await deployments.createDeployment({ deployment: deployment(`s${i}`, "app:1") });
      const first = await stack.agent();
      await first.ready;
      await waitConverged(stack);
      await first.stop();
      await waitFor(() => (deploymentOf(stack.emulator, "apps", "s0")?.status as { readyReplicas?: number } | undefined)?.readyReplicas === 1, "s0 rolled out");

      stack.emulator.clearRequestLog();
      const second = await stack.agent();
      await second.ready;
      await waitConverged(stack);
      const writes = () => stack.emulator.requestLog.filter((e) => !["get", "list", "watch"].includes(e.verb ?? "") && e.resource !== "leases");
      await waitFor(() => second.table.counts().done === second.table.size, "every resource reconciled");
      assert.deepEqual(writes(), [], "the restart applied nothing: every object was seen to hold what it would apply");
      await second.stop();

      // Edited by someone else while no agent runs: the next restart finds it in its first list.
      const api = KubernetesObjectApi.makeApiClient(stack.kubeConfig);
      const edit = {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "s1", namespace: "apps" },
        spec: { template: { spec: { containers: [{ name: "app", image: "hacked:1" }] } } },
      };
      await api.patch(edit as KubernetesObject, undefined, undefined, "someone-else", true, PatchStrategy.ServerSideApply);
      assert.equal(imageOf(deploymentOf(stack.emulator, "apps", "s1")), "hacked:1");
      stack.emulator.clearRequestLog();
      const third = await stack.agent();
      await third.ready;
      await waitFor(() => imageOf(deploymentOf(stack.emulator, "apps", "s1")) === "app:1", "the edited image restored");
      await waitConverged(stack);
      // Successful applies: the rollout the edit started moves the resourceVersion, so the
      // restoring apply's precondition may meet a 409 and go again from a read.
      const applies = stack.emulator.requestLog.filter((e) => e.verb === "apply" && e.status < 300);
      assert.deepEqual(
        applies.map((e) => `${e.resource}/${e.name}`),
        ["deployments/s1"],
        "only the edited object was applied",
      );
      await third.stop();
    });

    test("ctrl restarted mid-stream while writes go on: the agent resumes and converges", async () => {
      const agent = await stack.agent();
      await agent.ready;
      let writing = true;
      let n = 0;
      // Writes go straight to the store, so they continue while ctrl is down.
      const writer = (async () => {
        while (writing) {
          const id = `m${n % 12}`;
          const message = create(DeploymentSchema, deployment(id, `app:${n}`, 1 + (n % 3)));
          if (n < 12) await stack.t.store.deployments.create(message);
          else if (n % 7 === 0) await stack.t.store.deployments.delete(id).catch(() => {});
          else await stack.t.store.deployments.update(message).catch(() => stack.t.store.deployments.create(message));
          n++;
          await sleep(5);
        }
      })();
      // Counted, not timed: a loaded machine only makes the test slower.
      const writesReach = async (k: number) => {
        while (n < k) await sleep(10);
      };
      await writesReach(20);
      const port = Number(new URL(stack.t.url).port);
      await stack.t.ctrl.shutdown();
      await writesReach(n + 10);
      await sleep(4 * BOOKMARK_MS);
      const ctrl = await startCtrl({ store: stack.t.store, adminToken: ADMIN_TOKEN, port, pollIntervalMs: 50, stream: { bookmarkIntervalMs: BOOKMARK_MS } });
      try {
        await writesReach(n + 15);
        writing = false;
        await writer;
        await waitConverged(stack);
        const reconnects = (await agent.metrics.reconnects.get()).values.reduce((sum, v) => sum + v.value, 0);
        assert.ok(reconnects >= 1, "the agent reconnected");
        const syncs = (await agent.metrics.fullSyncDuration.get()).values.find((v) => v.metricName?.endsWith("_count"))?.value;
        assert.equal(syncs, 1, "resumed the watch from its cursor, no resync");
        await agent.stop();
      } finally {
        await ctrl.shutdown();
      }
    });

    test("agent and ctrl both down while changes happen: both back, converged, nothing duplicated", async () => {
      // Its own ctrl on the stack's port (an earlier test may have replaced the stack's).
      const port = Number(new URL(stack.t.url).port);
      await stack.t.ctrl.shutdown();
      const before = await startCtrl({ store: stack.t.store, adminToken: ADMIN_TOKEN, port, pollIntervalMs: 50, stream: { bookmarkIntervalMs: BOOKMARK_MS } });
      const deployments = stack.t.client(DeploymentService);
      for (let i = 0; i < 6; i++) await deployments.createDeployment({ deployment: deployment(`b${i}`, "app:1") });
      const first = await stack.agent();
      await first.ready;
      await waitConverged(stack);
      await first.stop();
      await before.shutdown();

      // Straight to the store: nothing is serving.
      await stack.t.store.deployments.update(create(DeploymentSchema, deployment("b0", "app:2", 2)));
      await stack.t.store.deployments.delete("b1");
      await stack.t.store.deployments.create(create(DeploymentSchema, deployment("b6", "app:1")));
      stack.emulator.clearRequestLog();

      const ctrl = await startCtrl({ store: stack.t.store, adminToken: ADMIN_TOKEN, port, pollIntervalMs: 50, stream: { bookmarkIntervalMs: BOOKMARK_MS } });
      try {
        const second = await stack.agent();
        await second.ready;
        await waitConverged(stack);
        assert.equal(imageOf(deploymentOf(stack.emulator, "apps", "b0")), "app:2");
        assert.equal(deploymentOf(stack.emulator, "apps", "b1"), undefined);
        const creates = stack.emulator.requestLog.filter((e) => e.verb === "apply" && e.status === 201 && e.resource === "deployments");
        assert.deepEqual(
          creates.map((e) => e.name),
          ["b6"],
          "only the new deployment was created; nothing duplicated",
        );
        await second.stop();
      } finally {
        await ctrl.shutdown();
      }
    });
  });
}
