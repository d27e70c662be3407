// Prune: orphans of this region go, unmanaged objects and other regions' objects stay, an
// incomplete snapshot prunes nothing, and the safety valve refuses mass deletion unless forced.
import { after, before, describe, test } from "node:test";
import { silentLogger } from "@flotilla/runtime";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import type { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { DesiredResourceSchema, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { Connection } from "../src/connection.ts";
import { DesiredTable } from "../src/desired-table.ts";
import { AgentMetrics } from "../src/metrics.ts";
import { deploymentOf, managedNames, OTHER_REGION, REGION, startStack, waitConverged, waitFor, type Stack } from "@flotilla/testkit/stack";

const deployment = (id: string) => ({ id, namespace: "apps", image: "app:1", port: 80, regions: [{ region: REGION, replicas: 1 }] });

function labelled(name: string, labels: Record<string, string>) {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: "apps", labels },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "c", image: "x:1" }] } },
    },
  };
}

const managedLabels = (region: string, id: string) => ({
  "app.kubernetes.io/managed-by": "flotilla",
  "flotilla.dev/region": region,
  "flotilla.dev/resource-type": "deployment",
  "flotilla.dev/resource-id": id,
});

for (const { db, skip } of await testDatabases()) {
  describe(`prune (${db.name})`, { skip }, () => {
    let stack: Stack;
    before(async () => {
      stack = await startStack(db);
    });
    after(() => stack?.close());

    test("removes this region's orphans only; unmanaged and other regions' objects survive", async () => {
      const deployments = stack.t.client(DeploymentService);
      for (const id of ["p1", "p2", "p3", "p4"]) await deployments.createDeployment({ deployment: deployment(id) });
      const first = await stack.agent();
      await waitConverged(stack);
      await first.stop();

      stack.emulator.put(labelled("orphan", managedLabels(REGION, "orphan")));
      stack.emulator.put(labelled("hand-made", { app: "hand-made" }));
      stack.emulator.put(labelled("west-app", managedLabels(OTHER_REGION, "west-app")));
      stack.emulator.clearRequestLog();
      const agent = await stack.agent();
      await agent.ready;
      await waitFor(() => !deploymentOf(stack.emulator, "apps", "orphan"), "orphan pruned");
      assert.ok(deploymentOf(stack.emulator, "apps", "hand-made"), "an unmanaged object survives");
      assert.ok(deploymentOf(stack.emulator, "apps", "west-app"), "another region's object survives");
      assert.equal((await agent.metrics.pruned.get()).values[0]?.value, 1);
      // The prune read the observer's cache: each kind was listed once, by the observer.
      const lists = stack.emulator.requestLog.filter((e) => e.verb === "list").map((e) => e.resource);
      assert.deepEqual(lists.sort(), ["ciliumnetworkpolicies", "deployments", "horizontalpodautoscalers", "poddisruptionbudgets", "services"]);
      await waitConverged(stack);
      await agent.stop();
    });

    test("the safety valve refuses to prune most managed objects unless forced", async () => {
      const deployments = stack.t.client(DeploymentService);
      // With the agent down, three of four deployments go: 6 of 8 managed objects are orphans.
      for (const id of ["p1", "p2", "p3"]) await deployments.deleteDeployment({ id });
      const agent = await stack.agent();
      await agent.ready;
      await sleep(300);
      assert.equal((await agent.metrics.pruneRefused.get()).values[0]?.value, 1);
      assert.deepEqual(managedNames(stack.emulator, "apps/v1", "Deployment"), ["apps/p1", "apps/p2", "apps/p3", "apps/p4"], "nothing pruned");
      await agent.stop();

      const forced = await stack.agent({ prune: { force: true } });
      await forced.ready;
      await waitConverged(stack);
      assert.deepEqual(managedNames(stack.emulator, "apps/v1", "Deployment"), ["apps/p4"]);
      assert.ok(deploymentOf(stack.emulator, "apps", "hand-made"));
      assert.ok(deploymentOf(stack.emulator, "apps", "west-app"));
      assert.equal((await forced.metrics.pruneRefused.get()).values[0]?.value ?? 0, 0);
      await forced.stop();
    });
  });
}

describe("prune and incomplete snapshots", () => {
  test("a snapshot cut before its complete marker leaves the table alone and prunes nothing", async () => {
    const resource = create(DesiredResourceSchema, { type: ResourceType.DEPLOYMENT, id: "a", version: 3n, namespace: "n" });
    let syncs = 0;
    // A ctrl whose snapshot stream always breaks after the first batch.
    const client = {
      async getSecretKeys() {
        return { keys: [] };
      },
      async *syncDesiredState() {
        syncs++;
        yield { message: { case: "batch", value: { resources: [resource] } } };
        throw new Error("connection reset");
      },
      watchDeploymentChanges() {
        throw new Error("must not watch without a complete snapshot");
      },
    } as unknown as Client<typeof ClusterService>;
    const changed: string[] = [];
    const table = new DesiredTable((key) => changed.push(key));
    let afterSnapshot = 0;
    const connection = new Connection({
      client,
      region: REGION,
      table,
      metrics: new AgentMetrics(),
      afterSnapshot: async () => void afterSnapshot++,
      fullSyncIntervalMs: 60_000,
      bookmarkIntervalMs: 1000,
      reconnectBackoff: { minMs: 5, maxMs: 10 },
      log: silentLogger,
    });
    const stop = new AbortController();
    const running = connection.run(stop.signal);
    await waitFor(() => syncs >= 3, "a few sync attempts");
    stop.abort();
    await running;
    assert.equal(afterSnapshot, 0, "no prune without the complete marker");
    assert.equal(table.size, 0, "the partial snapshot never reached the table");
    assert.deepEqual(changed, []);
  });
});
