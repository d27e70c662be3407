// A deployment's disruption budget through a real agent against the emulator: the
// PodDisruptionBudget is created over the Deployment's pods, changed with the spec, pruned when
// the budget is removed and deleted with the deployment; a PodDisruptionBudget of the same name
// made by someone else is a conflict named in the status and never written.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { REGION, startStack, waitFor, waitForPhase, type Stack } from "@flotilla/testkit/stack";

const [sqlite] = await testDatabases();

const NS = "budgets";
const budgetOf = (stack: Stack, name: string) =>
  stack.emulator.get("policy/v1", "PodDisruptionBudget", NS, name) as
    | { spec?: Record<string, unknown>; status?: Record<string, unknown>; metadata: { labels?: Record<string, string> } }
    | undefined;
const app = (id: string, fields: object = {}) => ({ id, namespace: NS, image: "app:1", regions: [{ region: REGION, replicas: 3 }], ...fields });
const minAvailable = (value: string) => ({ disruptionBudget: { budget: { case: "minAvailable" as const, value } } });
const maxUnavailable = (value: string) => ({ disruptionBudget: { budget: { case: "maxUnavailable" as const, value } } });

describe("disruption budgets against the emulator", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(sqlite!.db);
    const agent = await stack.agent();
    await agent.ready;
  });
  after(() => stack?.close());

  test("created over the Deployment's pods, changed with the spec, pruned when removed, deleted with the deployment", async () => {
    const deployments = stack.t.client(DeploymentService);
    await deployments.createDeployment({ deployment: app("web", minAvailable("2")) });
    await waitForPhase(stack, "web", "RUNNING");
    const created = await waitFor(() => budgetOf(stack, "web"), "the PodDisruptionBudget");
    assert.deepEqual(created.spec, {
      minAvailable: 2,
      selector: { matchLabels: { "flotilla.dev/resource-type": "deployment", "flotilla.dev/resource-id": "web" } },
    });
    assert.equal(created.metadata.labels?.["app.kubernetes.io/managed-by"], "flotilla");
    // The emulator's disruption controller sees the Deployment's three ready pods.
    await waitFor(() => budgetOf(stack, "web")?.status?.disruptionsAllowed === 1 || undefined, "one disruption allowed");

    await deployments.updateDeployment({ deployment: app("web", maxUnavailable("50%")) });
    await waitFor(() => budgetOf(stack, "web")?.spec?.maxUnavailable === "50%" || undefined, "the budget changed");
    assert.equal(budgetOf(stack, "web")?.spec?.minAvailable, undefined, "the old bound is gone (server-side apply dropped our field)");

    await deployments.updateDeployment({ deployment: app("web") });
    await waitFor(() => budgetOf(stack, "web") === undefined || undefined, "the budget pruned");

    await deployments.updateDeployment({ deployment: app("web", minAvailable("1")) });
    await waitFor(() => budgetOf(stack, "web"), "the budget back");
    await deployments.deleteDeployment({ id: "web" });
    await waitFor(() => budgetOf(stack, "web") === undefined || undefined, "the budget deleted with the deployment");
  });

  test("a PodDisruptionBudget of the same name made by someone else is a conflict, never written", async () => {
    const theirs = {
      apiVersion: "policy/v1",
      kind: "PodDisruptionBudget",
      metadata: { name: "api", namespace: NS, labels: { "app.kubernetes.io/managed-by": "Helm" } },
      spec: { maxUnavailable: 1, selector: { matchLabels: { app: "api" } } },
    };
    stack.emulator.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: NS } });
    stack.emulator.put(theirs);
    const marksAndSpec = () => {
      const { metadata, spec } = budgetOf(stack, "api")!;
      return JSON.stringify({ labels: metadata.labels, annotations: (metadata as { annotations?: unknown }).annotations, spec });
    };
    const before = marksAndSpec();
    stack.emulator.clearRequestLog();
    await stack.t.client(DeploymentService).createDeployment({ deployment: app("api", minAvailable("1")) });
    await waitForPhase(
      stack,
      "api",
      "FAILED",
      /poddisruptionbudget budgets\/api exists and is not managed by flotilla \(app\.kubernetes\.io\/managed-by=Helm\)/,
    );
    await sleep(500);
    assert.equal(marksAndSpec(), before, "their budget unchanged");
    const writes = stack.emulator.requestLog.filter(
      (e) => e.resource === "poddisruptionbudgets" && e.name === "api" && !["get", "list", "watch"].includes(e.verb ?? ""),
    );
    assert.deepEqual(writes, [], "no write request to it");
  });
});
