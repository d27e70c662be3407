// Namespaces at the agent: an existing namespace is used as it is (never labelled, never deleted),
// one the agent creates carries its marks, and a Terminating namespace is a reported, retried
// condition (with backoff), not a crash or a hot loop.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import type { Agent } from "../src/agent.ts";
import { REGION, startStack, statusOf, waitFor, waitForPhase, type Stack } from "@flotilla/testkit/stack";

const [sqlite] = await testDatabases();

const app = (id: string, namespace: string) => ({ id, namespace, image: "app:1", regions: [{ region: REGION, replicas: 1 }] });
const namespaceOf = (stack: Stack, name: string) => stack.emulator.get("v1", "Namespace", name);

describe("namespaces the agent writes into", () => {
  let stack: Stack;
  let agent: Agent;
  before(async () => {
    stack = await startStack(sqlite!.db);
    agent = await stack.agent({ retryBackoff: { minMs: 50, maxMs: 400 } });
    await agent.ready;
  });
  after(() => stack?.close());

  test("a namespace the agent creates carries its marks; deleting the deployment leaves it", async () => {
    const deployments = stack.t.client(DeploymentService);
    await deployments.createDeployment({ deployment: app("fresh", "made-by-agent") });
    await waitForPhase(stack, "fresh", "RUNNING");
    const labels = namespaceOf(stack, "made-by-agent")?.metadata.labels;
    assert.equal(labels?.["app.kubernetes.io/managed-by"], "flotilla");
    assert.equal(labels?.["flotilla.dev/region"], REGION);
    await deployments.deleteDeployment({ id: "fresh" });
    await waitFor(() => stack.emulator.get("apps/v1", "Deployment", "made-by-agent", "fresh") === undefined, "Deployment deleted");
    assert.ok(namespaceOf(stack, "made-by-agent"), "namespaces are never deleted by the agent");
  });

  test("a Terminating namespace is reported and retried with backoff, then used once it is gone", async () => {
    // As the API server shows a namespace being deleted (its finalizers still running).
    stack.emulator.put({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "dying", deletionTimestamp: new Date().toISOString(), finalizers: ["example.com/slow"] },
      spec: { finalizers: ["kubernetes"] },
      status: { phase: "Terminating" },
    });
    assert.equal((namespaceOf(stack, "dying")?.status as { phase?: string } | undefined)?.phase, "Terminating");
    stack.emulator.clearRequestLog();
    await stack.t.client(DeploymentService).createDeployment({ deployment: app("late", "dying") });
    await waitForPhase(stack, "late", "FAILED", /namespace dying is being terminated/);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const reads = stack.emulator.requestLog.filter((e) => e.verb === "get" && e.resource === "namespaces" && e.name === "dying").length;
    // Backoff 50 ms doubling to 400 ms: at most ~10 reads in 2 s, a hot loop would make hundreds.
    assert.ok(reads >= 2 && reads <= 15, `${reads} reads of the terminating namespace`);
    assert.equal(stack.emulator.get("apps/v1", "Deployment", "dying", "late"), undefined, "nothing written into it");
    assert.ok(stack.emulator.delete("v1", "Namespace", "dying"));
    await waitForPhase(stack, "late", "RUNNING");
    assert.equal(namespaceOf(stack, "dying")?.metadata.labels?.["app.kubernetes.io/managed-by"], "flotilla", "created anew, by the agent");
  });

  test("a namespace deleted under a running workload (403 NamespaceTerminating) is reported and retried, not looped", async () => {
    const { emulator } = stack;
    const deployments = stack.t.client(DeploymentService);
    await deployments.createDeployment({ deployment: app("victim", "doomed") });
    await waitForPhase(stack, "victim", "RUNNING");
    // A finalizer of someone else's keeps the namespace Terminating after its content is gone.
    const held = structuredClone(namespaceOf(stack, "doomed")!);
    held.metadata.finalizers = ["example.com/hold"];
    emulator.put(held);
    // kubectl delete namespace: its Deployment goes, the agent's re-create is refused (403).
    await fetch(`${emulator.url}/api/v1/namespaces/doomed`, { method: "DELETE" });
    await waitFor(async () => /being terminated/.test((await statusOf(stack, "victim"))?.reason ?? ""), "terminating reported");
    emulator.clearRequestLog();
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const attempts = emulator.requestLog.filter((e) => e.namespace === "doomed" || e.name === "doomed").length;
    assert.ok(attempts <= 40, `${attempts} requests in 2 s: retried with backoff, not looped`);
    assert.equal((await statusOf(stack, "victim"))?.phase, "FAILED");
    // The finalizer's owner lets go: the namespace is gone, the agent creates it anew.
    assert.ok(emulator.delete("v1", "Namespace", "doomed"));
    await waitForPhase(stack, "victim", "RUNNING");
    assert.equal(namespaceOf(stack, "doomed")?.metadata.labels?.["app.kubernetes.io/managed-by"], "flotilla", "created anew, by the agent");
  });
});
