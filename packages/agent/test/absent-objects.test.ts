// The objects a deployment does not use (a budget, an autoscaler, a secret env Secret, a Service
// at port 0) are not read on every apply once the observer has listed the cluster: the cache
// says they are not there. Removing one still deletes it, also when the cache lags behind the
// apply that created it.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { testSecretKeyRing } from "@flotilla/testkit/ctrl";
import { deploymentOf, REGION, startStack, waitFor, waitForPhase, type Stack } from "@flotilla/testkit/stack";

const [sqlite] = await testDatabases();
const NS = "lean";
const app = (id: string, image: string, fields: object = {}) => ({ id, namespace: NS, image, port: 80, regions: [{ region: REGION, replicas: 1 }], ...fields });
const imageOf = (stack: Stack, id: string) =>
  (deploymentOf(stack.emulator, NS, id) as { spec?: { template?: { spec?: { containers?: { image?: string }[] } } } } | undefined)?.spec?.template?.spec
    ?.containers?.[0]?.image;

describe("objects a deployment does not use", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(sqlite!.db, { store: { secrets: testSecretKeyRing() } });
    await (await stack.agent()).ready;
  });
  after(() => stack?.close());

  test("an update reads none of them: no GET of a budget, an autoscaler or a Secret", async () => {
    const deployments = stack.t.client(DeploymentService);
    await deployments.createDeployment({ deployment: app("plain", "app:1") });
    await waitForPhase(stack, "plain", "RUNNING");
    stack.emulator.clearRequestLog();
    await deployments.updateDeployment({ deployment: app("plain", "app:2") });
    await waitFor(() => imageOf(stack, "plain") === "app:2" || undefined, "the new image applied");
    await waitForPhase(stack, "plain", "RUNNING");
    const reads = stack.emulator.requestLog.filter((r) => r.verb === "get" && r.namespace === NS).map((r) => `${r.resource}/${r.name}`);
    assert.deepEqual(reads, [], "no object read");
    const writes = stack.emulator.requestLog.filter((r) => r.verb === "apply" && r.namespace === NS).map((r) => r.resource);
    assert.deepEqual(writes, ["deployments"], "the Deployment written, nothing else (its Service holds what it would apply)");
  });

  test("a Secret created while the watch delivers nothing is still deleted when its secret env is removed", async () => {
    const deployments = stack.t.client(DeploymentService);
    await deployments.createDeployment({ deployment: app("lagging", "app:1") });
    await waitForPhase(stack, "lagging", "RUNNING");
    // The cache keeps the Deployment as it was, without a reference to any Secret.
    stack.emulator.faults.suppressWatchEvents(true);
    try {
      await deployments.updateDeployment({ deployment: app("lagging", "app:2", { secretEnv: [{ name: "TOKEN", value: "t0ken" }] }) });
      await waitFor(() => stack.emulator.get("v1", "Secret", NS, "lagging-env"), "the Secret");
      await deployments.updateDeployment({ deployment: app("lagging", "app:3") });
      await waitFor(() => imageOf(stack, "lagging") === "app:3" || undefined, "the Deployment without secret env");
      await waitFor(() => stack.emulator.get("v1", "Secret", NS, "lagging-env") === undefined || undefined, "the Secret deleted");
    } finally {
      stack.emulator.faults.suppressWatchEvents(false);
    }
  });

  test("a budget removed is deleted: the cache knows it is there", async () => {
    const deployments = stack.t.client(DeploymentService);
    await deployments.createDeployment({ deployment: app("budgeted", "app:1", { disruptionBudget: { budget: { case: "minAvailable", value: "1" } } }) });
    await waitFor(() => stack.emulator.get("policy/v1", "PodDisruptionBudget", NS, "budgeted"), "the budget");
    await waitForPhase(stack, "budgeted", "RUNNING");
    await deployments.updateDeployment({ deployment: app("budgeted", "app:2") });
    await waitFor(() => stack.emulator.get("policy/v1", "PodDisruptionBudget", NS, "budgeted") === undefined || undefined, "the budget deleted");
  });
});
