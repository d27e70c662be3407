// Drift correction: objects deleted or edited behind the agent's back are restored, from watch
// events or, when events are lost, from the periodic refresh; fields of other field managers,
// other regions' objects and unmanaged objects are left alone.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { KubernetesObjectApi, PatchStrategy, type KubernetesObject } from "@kubernetes/client-node";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import type { Agent } from "../src/agent.ts";
import {
  deploymentOf,
  desiredVersion,
  imageOf,
  OTHER_REGION,
  REGION,
  replicasOf,
  serviceOf,
  startStack,
  waitConverged,
  waitFor,
  type Stack,
} from "@flotilla/testkit/stack";

const app = (id: string, image = "app:1") => ({ id, namespace: "drift", image, port: 80, regions: [{ region: REGION, replicas: 2 }] });

const corrections = async (agent: Agent, reason?: string) =>
  (await agent.metrics.driftCorrections.get()).values.filter((v) => reason === undefined || v.labels.reason === reason).reduce((sum, v) => sum + v.value, 0);

/** A Deployment as another region's agent or a person would create it directly. */
const foreignDeployment = (name: string, labels: Record<string, string>) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace: "drift", labels },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "app", image: "theirs:1" }] } },
  },
});

const [sqlite] = await testDatabases();

describe("drift correction from watch events", () => {
  let stack: Stack;
  let agent: Agent;
  before(async () => {
    stack = await startStack(sqlite!.db);
    agent = await stack.agent();
    await agent.ready;
    const deployments = stack.t.client(DeploymentService);
    for (const id of ["deleted", "edited"]) await deployments.createDeployment({ deployment: app(id) });
    await waitConverged(stack);
  });
  after(() => stack?.close());

  test("a managed Deployment deleted directly is recreated", async () => {
    const uid = deploymentOf(stack.emulator, "drift", "deleted")?.metadata.uid;
    assert.ok(stack.emulator.delete("apps/v1", "Deployment", "drift", "deleted"));
    const recreated = await waitFor(() => deploymentOf(stack.emulator, "drift", "deleted"), "Deployment recreated", 10_000);
    assert.notEqual(recreated.metadata.uid, uid);
    await waitConverged(stack);
    await waitFor(async () => (await corrections(agent, "deleted")) >= 1, "a correction counted as deleted");
  });

  test("image and replicas edited by another field manager are restored; a label it added survives", async () => {
    const api = KubernetesObjectApi.makeApiClient(stack.kubeConfig);
    const edit = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "edited", namespace: "drift", labels: { "team.example/owner": "payments" } },
      spec: { replicas: 5, template: { spec: { containers: [{ name: "app", image: "hacked:1" }] } } },
    };
    await api.patch(edit as KubernetesObject, undefined, undefined, "someone-else", true, PatchStrategy.ServerSideApply);
    await waitFor(
      () => {
        const live = deploymentOf(stack.emulator, "drift", "edited");
        return imageOf(live) === "app:1" && replicasOf(live) === 2;
      },
      "image and replicas restored",
      10_000,
    );
    const live = deploymentOf(stack.emulator, "drift", "edited");
    assert.equal(live?.metadata.labels?.["team.example/owner"], "payments", "the other manager's label survives");
    await waitFor(async () => (await corrections(agent, "modified")) >= 1, "a correction counted as modified");
  });

  test("a new version that changes only the image applies the Deployment, not the unchanged Service", async () => {
    const { emulator } = stack;
    const service = serviceOf(emulator, "drift", "edited")!;
    emulator.clearRequestLog();
    await stack.t.client(DeploymentService).updateDeployment({ deployment: app("edited", "app:2") });
    await waitConverged(stack);
    // Successful applies only: the rollout controller's status writes bump the Deployment's
    // resourceVersion, so the agent's precondition apply may get a 409 and be retried from a new
    // read. Dropping that precondition is not an option, as a relabel by another owner keeps the uid.
    const applied = (resource: string) =>
      emulator.requestLog.filter((e) => e.verb === "apply" && e.resource === resource && e.name === "edited" && e.status < 300).length;
    assert.equal(applied("deployments"), 1);
    assert.equal(applied("services"), 0);
    const unchanged = serviceOf(emulator, "drift", "edited")!;
    assert.equal(unchanged.metadata.resourceVersion, service.metadata.resourceVersion);
    assert.ok(desiredVersion(unchanged)! < desiredVersion(deploymentOf(emulator, "drift", "edited"))!, "it keeps the version it was applied from");
  });

  test("a Service left alone by an update is still restored when deleted or edited", async () => {
    const { emulator } = stack;
    const deployments = stack.t.client(DeploymentService);
    await deployments.updateDeployment({ deployment: app("edited", "app:3") });
    await waitConverged(stack);
    assert.ok(emulator.delete("v1", "Service", "drift", "edited"));
    await waitFor(() => serviceOf(emulator, "drift", "edited"), "Service recreated", 10_000);

    const api = KubernetesObjectApi.makeApiClient(stack.kubeConfig);
    const edit = {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "edited", namespace: "drift" },
      spec: { ports: [{ name: "http", port: 81, targetPort: 81, protocol: "TCP" }] },
    };
    await api.patch(edit as KubernetesObject, undefined, undefined, "someone-else", true, PatchStrategy.ServerSideApply);
    await waitFor(
      () => (serviceOf(emulator, "drift", "edited")?.spec as { ports: { port: number }[] } | undefined)?.ports[0]?.port === 80,
      "port restored",
      10_000,
    );

    // Deleted again right before an update: the update must not skip the missing Service.
    assert.ok(emulator.delete("v1", "Service", "drift", "edited"));
    await deployments.updateDeployment({ deployment: app("edited", "app:4") });
    await waitConverged(stack);
  });

  test("a managed object the desired manifests no longer include is deleted when observed; a foreign one of the same name is not", async () => {
    const { emulator } = stack;
    const deployments = stack.t.client(DeploymentService);
    for (const id of ["portless", "theirs"]) await deployments.createDeployment({ deployment: { ...app(id), port: 0 } });
    await waitConverged(stack);
    const service = (name: string, labels: Record<string, string>) => ({
      apiVersion: "v1",
      kind: "Service",
      metadata: { name, namespace: "drift", labels },
      spec: { selector: { app: name }, ports: [{ name: "http", port: 80, targetPort: 80, protocol: "TCP" }] },
    });
    // As a deposed writer would leave it: our marks, this region, this resource.
    const ours = {
      "app.kubernetes.io/managed-by": "flotilla",
      "flotilla.dev/region": REGION,
      "flotilla.dev/resource-type": "deployment",
      "flotilla.dev/resource-id": "portless",
    };
    const before = await corrections(agent, "orphan");
    emulator.put(service("portless", ours));
    emulator.put(service("theirs", { app: "theirs" }));
    await waitFor(() => serviceOf(emulator, "drift", "portless") === undefined, "the orphaned Service deleted", 10_000);
    assert.ok((await corrections(agent, "orphan")) > before, "counted as an orphan correction");
    await sleep(1000);
    assert.ok(serviceOf(emulator, "drift", "theirs"), "a Service that is not ours stays");
  });

  test("another region's managed objects and unmanaged objects are never touched", async () => {
    const { emulator } = stack;
    const before = await corrections(agent);
    const otherRegion = {
      "app.kubernetes.io/managed-by": "flotilla",
      "flotilla.dev/region": OTHER_REGION,
      "flotilla.dev/resource-type": "deployment",
      "flotilla.dev/resource-id": "edited",
    };
    emulator.put(foreignDeployment("west-app", otherRegion));
    emulator.put(foreignDeployment("unmanaged", { app: "unmanaged" }));
    emulator.put(foreignDeployment("doomed", { app: "doomed" }));
    await sleep(300);
    const edited = (name: string) => {
      const object = structuredClone(deploymentOf(emulator, "drift", name)!);
      (object.spec as any).template.spec.containers[0].image = "edited:2";
      emulator.put(object);
    };
    edited("west-app");
    edited("unmanaged");
    emulator.delete("apps/v1", "Deployment", "drift", "doomed");
    await sleep(1500);
    assert.equal(imageOf(deploymentOf(emulator, "drift", "west-app")), "edited:2");
    assert.equal(imageOf(deploymentOf(emulator, "drift", "unmanaged")), "edited:2");
    assert.equal(deploymentOf(emulator, "drift", "doomed"), undefined);
    assert.equal(await corrections(agent), before, "nothing was corrected");
  });
});

describe("drift correction by the periodic refresh", () => {
  const REFRESH_MS = 2000;
  const PER_SECOND = 5;
  const COUNT = 6;
  let stack: Stack;
  let agent: Agent;
  before(async () => {
    stack = await startStack(sqlite!.db);
    // The watch watchdog must not relist during these tests: only the refresh may find drift.
    agent = await stack.agent({ refreshIntervalMs: REFRESH_MS, refreshPerSecond: PER_SECOND, observerBookmarkIntervalMs: 60_000 });
    await agent.ready;
    const deployments = stack.t.client(DeploymentService);
    for (let i = 0; i < COUNT; i++) await deployments.createDeployment({ deployment: app(`r${i}`) });
    await waitConverged(stack);
  });
  after(() => stack?.close());

  test("steady state: refreshes re-apply without changing anything, no drift corrections counted", async () => {
    const applies = async () => (await agent.metrics.reconciles.get()).values.filter((v) => v.labels.op === "apply").reduce((sum, v) => sum + v.value, 0);
    const before = await applies();
    await waitFor(async () => (await applies()) >= before + COUNT, "a refresh round", 3 * REFRESH_MS + (COUNT / PER_SECOND) * 1000 * 3);
    assert.equal(await corrections(agent), 0);
  });

  test("with watch events suppressed, drift is corrected by the refresh at the configured rate", async () => {
    const { emulator } = stack;
    emulator.faults.suppressWatchEvents(true);
    const start = Date.now();
    for (let i = 0; i < COUNT; i++) {
      const object = structuredClone(deploymentOf(emulator, "drift", `r${i}`)!);
      (object.spec as any).template.spec.containers[0].image = "drifted:1";
      emulator.put(object);
    }
    emulator.clearRequestLog();
    await waitConverged(stack, REFRESH_MS * 3 + 20_000);
    emulator.faults.clear();
    const restored = emulator.requestLog.filter((e) => e.verb === "apply" && e.resource === "deployments").map((e) => Date.parse(e.time));
    assert.ok(restored.length >= COUNT, `every Deployment was re-applied (${restored.length})`);
    // Any PER_SECOND + 1 consecutive applies span about a second or more.
    const minSpan = (1000 / PER_SECOND) * PER_SECOND * 0.8;
    for (let i = PER_SECOND; i < restored.length; i++) {
      assert.ok(restored[i]! - restored[i - PER_SECOND]! >= minSpan, `applies ${i - PER_SECOND}..${i} within ${restored[i]! - restored[i - PER_SECOND]!} ms`);
    }
    await waitFor(async () => (await corrections(agent, "refresh")) >= COUNT, "corrections counted as refresh");
    assert.ok(Date.now() - start < 60_000);
  });
});
