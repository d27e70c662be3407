// A deployment's autoscaler through ctrl and a real agent against the emulator: the
// HorizontalPodAutoscaler carries the ownership marks and owns the Deployment's replicas (the
// agent's apply leaves spec.replicas out); the HPA scales to 5 (the emulator's utilization
// hook), a new image keeps the 5 replicas with no drift correction; the status reports the
// HPA's replicas; autoscaling off sets the placement's replicas again and prunes the HPA; a
// foreign HPA of the same name is a conflict, never written; a region's env values reach its
// Deployment (that they reach no other region's: packages/store/test/kinds.test.ts).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import type { Agent } from "@flotilla/agent";
import { testDatabases } from "@flotilla/testkit/databases";
import { OTHER_REGION, REGION, startStack, waitFor, waitForPhase, type Stack } from "@flotilla/testkit/stack";

const [sqlite] = await testDatabases();

const NS = "scaled";
type Live = {
  spec?: Record<string, any>;
  status?: Record<string, any>;
  metadata: { labels?: Record<string, string>; managedFields?: { manager: string; fieldsV1: unknown }[] };
};
const hpaOf = (stack: Stack, name: string) => stack.emulator.get("autoscaling/v2", "HorizontalPodAutoscaler", NS, name) as Live | undefined;
const deploymentOf = (stack: Stack, name: string, namespace = NS) => stack.emulator.get("apps/v1", "Deployment", namespace, name) as Live | undefined;
const autoscaling = { minReplicas: 2, maxReplicas: 5, targetCpuUtilizationPercent: 70 };
const app = (id: string, image: string, placement: object) => ({
  id,
  namespace: NS,
  image,
  cpuMillicores: 100,
  regions: [{ region: REGION, replicas: 3, ...placement }],
});
/** Whether `manager`'s managedFields entries of the object own spec.replicas. */
const ownsReplicas = (object: Live | undefined, manager: string) =>
  (object?.metadata.managedFields ?? []).some((e) => e.manager === manager && JSON.stringify(e.fieldsV1).includes('"f:replicas"'));
const corrections = async (agent: Agent) => (await agent.metrics.driftCorrections.get()).values.reduce((sum, v) => sum + v.value, 0);

describe("autoscaling against the emulator", () => {
  let stack: Stack;
  let agent: Agent;
  before(async () => {
    stack = await startStack(sqlite!.db);
    agent = await stack.agent();
    await agent.ready;
  });
  after(() => stack?.close());

  test("the HPA owns the replicas: scaled to 5, a new image keeps them untouched by drift correction; off sets the placement's replicas and prunes the HPA", async () => {
    const deployments = stack.t.client(DeploymentService);
    await deployments.createDeployment({ deployment: app("api", "app:1", { autoscaling }) });
    const created = await waitFor(() => hpaOf(stack, "api"), "the HorizontalPodAutoscaler");
    assert.deepEqual(created.spec, {
      scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "api" },
      minReplicas: 2,
      maxReplicas: 5,
      metrics: [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 70 } } }],
    });
    assert.equal(created.metadata.labels?.["app.kubernetes.io/managed-by"], "flotilla");
    assert.equal(created.metadata.labels?.["flotilla.dev/resource-id"], "api");
    // Created without replicas (1), then the HPA scales to its minimum without metrics.
    await waitFor(() => deploymentOf(stack, "api")?.spec?.replicas === 2 || undefined, "minReplicas");
    await waitForPhase(stack, "api", "RUNNING", /^2\/2 replicas ready$/);
    assert.ok(!ownsReplicas(deploymentOf(stack, "api"), "flotilla-agent"), "the agent's field manager does not own spec.replicas");

    stack.emulator.setAutoscalerUtilization(NS, "api", { cpu: 250 });
    await waitFor(() => deploymentOf(stack, "api")?.spec?.replicas === 5 || undefined, "the HPA scaled to 5");
    const scaled = await waitForPhase(stack, "api", "RUNNING", /^5\/5 replicas ready$/);
    const status = (await deployments.getDeployment({ id: "api" })).deployment!.status[0]!;
    assert.equal(status.desiredReplicas, 5);
    assert.equal(status.autoscalerCurrentReplicas, 5);
    assert.equal(status.autoscalerDesiredReplicas, 5);
    assert.ok(scaled);

    const correctionsBefore = await corrections(agent);
    stack.emulator.clearRequestLog();
    await deployments.updateDeployment({ deployment: app("api", "app:2", { autoscaling }) });
    await waitForPhase(stack, "api", "RUNNING", /^5\/5 replicas ready$/);
    assert.equal(deploymentOf(stack, "api")?.spec?.template.spec.containers[0].image, "app:2");
    assert.equal(deploymentOf(stack, "api")?.spec?.replicas, 5, "the new image kept the HPA's replicas");
    await sleep(300);
    assert.equal(await corrections(agent), correctionsBefore, "no drift correction");
    assert.ok(!ownsReplicas(deploymentOf(stack, "api"), "flotilla-agent"));

    await deployments.updateDeployment({ deployment: app("api", "app:2", {}) });
    await waitFor(() => hpaOf(stack, "api") === undefined || undefined, "the HPA pruned");
    await waitFor(() => deploymentOf(stack, "api")?.spec?.replicas === 3 || undefined, "the placement's replicas");
    await waitForPhase(stack, "api", "RUNNING", /^3\/3 replicas ready$/);
    assert.ok(ownsReplicas(deploymentOf(stack, "api"), "flotilla-agent"), "the field is the agent's again");
    const off = (await deployments.getDeployment({ id: "api" })).deployment!.status[0]!;
    assert.equal(off.autoscalerCurrentReplicas, 0);
  });

  test("a HorizontalPodAutoscaler of the same name made by someone else is a conflict, never written", async () => {
    stack.emulator.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: NS } });
    stack.emulator.put({
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name: "web", namespace: NS, labels: { "app.kubernetes.io/managed-by": "Helm" } },
      spec: { scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "web" }, minReplicas: 1, maxReplicas: 9 },
    });
    const before = JSON.stringify(hpaOf(stack, "web")?.spec);
    await stack.t.client(DeploymentService).createDeployment({ deployment: app("web", "app:1", { autoscaling }) });
    await waitForPhase(
      stack,
      "web",
      "FAILED",
      /horizontalpodautoscaler scaled\/web exists and is not managed by flotilla \(app\.kubernetes\.io\/managed-by=Helm\)/,
    );
    await sleep(300);
    assert.equal(JSON.stringify(hpaOf(stack, "web")?.spec), before);
    assert.equal(hpaOf(stack, "web")?.metadata.labels?.["app.kubernetes.io/managed-by"], "Helm");
    await stack.t.client(DeploymentService).deleteDeployment({ id: "web" });
    assert.ok(hpaOf(stack, "web"), "the foreign HPA stays");
  });

  test("a region's env values replace or add to the deployment's in its Deployment", async () => {
    await stack.t.client(DeploymentService).createDeployment({
      deployment: {
        id: "envs",
        namespace: NS,
        image: "app:1",
        env: [
          { name: "LOG", value: "info" },
          { name: "MODE", value: "shared" },
        ],
        regions: [
          {
            region: REGION,
            replicas: 1,
            env: [
              { name: "MODE", value: "local" },
              { name: "EXTRA", value: "1" },
            ],
          },
          { region: OTHER_REGION, replicas: 1 },
        ],
      },
    });
    const local = await waitFor(() => deploymentOf(stack, "envs"), "the local Deployment");
    assert.deepEqual(local.spec?.template.spec.containers[0].env, [
      { name: "LOG", value: "info" },
      { name: "MODE", value: "local" },
      { name: "EXTRA", value: "1" },
    ]);
  });
});
