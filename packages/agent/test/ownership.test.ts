// Ownership end to end: objects the agent did not make (unlabelled, Helm's, another region's)
// are never changed or deleted by create, update, delete or prune; the status names the
// conflict; an adopt annotation hands the object over. Plus the ownership and namespace rules
// as functions.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import type { Agent } from "../src/agent.ts";
import { namespaceRefusal, DEFAULT_NAMESPACE_RULES, parseGlobList } from "../src/namespaces.ts";
import { ADOPT_ANNOTATION, ownershipConflict } from "../src/ownership.ts";
import { deploymentOf, imageOf, OTHER_REGION, REGION, serviceOf, startStack, statusOf, waitFor, waitForPhase, type Stack } from "@flotilla/testkit/stack";

const [sqlite] = await testDatabases();

const NS = "owned";
const owner = { region: REGION, type: "deployment", id: "web" };
const ours = {
  "app.kubernetes.io/managed-by": "flotilla",
  "flotilla.dev/region": REGION,
  "flotilla.dev/resource-type": "deployment",
  "flotilla.dev/resource-id": "web",
};

test("ownershipConflict: only this region's marks for this resource, or the adopt annotation, let the agent write", () => {
  const object = (labels: Record<string, string>, annotations?: Record<string, string>) => ({
    kind: "Deployment",
    metadata: { name: "web", namespace: "demo", labels, annotations },
  });
  assert.equal(ownershipConflict(object(ours), owner), undefined);
  assert.equal(
    ownershipConflict(object({ "app.kubernetes.io/managed-by": "Helm" }), owner),
    "deployment demo/web exists and is not managed by flotilla (app.kubernetes.io/managed-by=Helm); annotate it flotilla.dev/adopt=true to let flotilla take it over",
  );
  assert.match(ownershipConflict(object({}), owner)!, /not managed by flotilla \(no app\.kubernetes\.io\/managed-by label\)/);
  assert.match(ownershipConflict(object({ ...ours, "flotilla.dev/region": OTHER_REGION }), owner)!, /another region \(flotilla\.dev\/region=west\)/);
  assert.match(ownershipConflict(object({ ...ours, "flotilla.dev/resource-type": "sentinel" }), owner)!, /another flotilla resource \(sentinel\/web\)/);
  assert.equal(ownershipConflict(object({ "app.kubernetes.io/managed-by": "Helm" }, { [ADOPT_ANNOTATION]: "true" }), owner), undefined);
  assert.ok(ownershipConflict(object({ "app.kubernetes.io/managed-by": "Helm" }, { [ADOPT_ANNOTATION]: "yes" }), owner), 'only "true" adopts');
});

test("namespace rules: globs, denied wins, the system namespaces denied by default", () => {
  for (const ns of ["kube-system", "kube-public", "kube-node-lease", "default"])
    assert.match(namespaceRefusal(ns, DEFAULT_NAMESPACE_RULES)!, new RegExp(`namespace ${ns} is refused`));
  assert.equal(namespaceRefusal("demo", DEFAULT_NAMESPACE_RULES), undefined);
  const rules = { allowed: parseGlobList("team-*, shared"), denied: parseGlobList("team-secret*,kube-*") };
  assert.equal(namespaceRefusal("team-a", rules), undefined);
  assert.equal(namespaceRefusal("shared", rules), undefined);
  assert.match(namespaceRefusal("team-secrets", rules)!, /denied namespace "team-secret\*"/);
  assert.match(namespaceRefusal("other", rules)!, /not among the allowed namespaces team-\*,shared/);
  assert.equal(namespaceRefusal("default", rules)?.includes("allowed"), true, "not allowed by the list");
  assert.deepEqual(parseGlobList(""), []);
});

/** A Deployment made by someone else, as Helm, kubectl or another region's agent would. */
const foreign = (name: string, labels: Record<string, string>, annotations?: Record<string, string>) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace: NS, labels, ...(annotations ? { annotations } : {}) },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "app", image: "theirs:1" }] } },
  },
});

const app = (id: string, image = "app:1", port = 80) => ({ id, namespace: NS, image, port, regions: [{ region: REGION, replicas: 1 }] });

describe("ownership against the emulator", () => {
  let stack: Stack;
  let agent: Agent;
  before(async () => {
    stack = await startStack(sqlite!.db);
    // The namespace exists already (someone else's): the agent must not label or change it.
    stack.emulator.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: NS, labels: { team: "payments" } } });
    stack.emulator.put(foreign("unmarked", { app: "unmarked" }));
    stack.emulator.put(foreign("helm", { app: "helm", "app.kubernetes.io/managed-by": "Helm" }));
    stack.emulator.put(foreign("west", { ...ours, "flotilla.dev/region": OTHER_REGION, "flotilla.dev/resource-id": "west" }));
    agent = await stack.agent({ ownershipRecheckMs: 300 });
    await agent.ready;
  });
  after(() => stack?.close());

  /** Requests that wrote (or tried to write) the named objects since the log was cleared. */
  const writes = (names: string[]) =>
    stack.emulator.requestLog
      .filter((e) => e.verb !== "get" && e.verb !== "list" && e.verb !== "watch" && names.includes(e.name ?? ""))
      .map((e) => `${e.verb} ${e.resource} ${e.name}`);
  const snapshot = (name: string) => JSON.stringify(deploymentOf(stack.emulator, NS, name));

  test("create over an unmarked, a Helm and another region's Deployment: nothing changed, FAILED naming the owner", async () => {
    const before = Object.fromEntries(["unmarked", "helm", "west"].map((n) => [n, snapshot(n)]));
    const namespaceBefore = JSON.stringify(stack.emulator.get("v1", "Namespace", NS));
    stack.emulator.clearRequestLog();
    const deployments = stack.t.client(DeploymentService);
    for (const id of ["unmarked", "helm", "west"]) await deployments.createDeployment({ deployment: app(id) });
    await waitForPhase(
      stack,
      "unmarked",
      "FAILED",
      /deployment owned\/unmarked exists and is not managed by flotilla \(no app\.kubernetes\.io\/managed-by label\)/,
    );
    await waitForPhase(stack, "helm", "FAILED", /deployment owned\/helm exists and is not managed by flotilla \(app\.kubernetes\.io\/managed-by=Helm\)/);
    await waitForPhase(stack, "west", "FAILED", /deployment owned\/west exists and is managed by flotilla for another region \(flotilla\.dev\/region=west\)/);
    // A few recheck intervals: retried, still refused, never written.
    await sleep(1000);
    for (const n of ["unmarked", "helm", "west"]) assert.equal(snapshot(n), before[n], `${n} unchanged`);
    assert.deepEqual(writes(["unmarked", "helm", "west"]), [], "no write request to any of them");
    assert.equal(JSON.stringify(stack.emulator.get("v1", "Namespace", NS)), namespaceBefore, "the existing namespace is left as it was");
    // Not a hot loop: a read per object per recheck interval (300 ms), not per millisecond.
    const reads = stack.emulator.requestLog.filter((e) => e.verb === "get" && e.name === "helm").length;
    assert.ok(reads >= 2 && reads <= 30, `${reads} reads of the Helm Deployment`);
    // No Service was created either: the Deployment's refusal stops the resource before it.
    assert.equal(serviceOf(stack.emulator, NS, "helm"), undefined);
  });

  test("update and delete of the conflicting resources still leave the objects alone; prune too", async () => {
    const before = Object.fromEntries(["unmarked", "helm", "west"].map((n) => [n, snapshot(n)]));
    stack.emulator.clearRequestLog();
    const deployments = stack.t.client(DeploymentService);
    await deployments.updateDeployment({ deployment: app("helm", "app:2") });
    await waitForPhase(stack, "helm", "FAILED", /app\.kubernetes\.io\/managed-by=Helm/);
    for (const id of ["unmarked", "helm", "west"]) await deployments.deleteDeployment({ id });
    await waitFor(
      () => agent.table.counts().error === 0 && agent.table.counts().pending === 0,
      "tombstones settled",
      10_000,
      () => agent.table.counts(),
    );
    // A restart prunes after its snapshot: the foreign objects are not managed, so not pruned.
    const restarted = await stack.agent({ ownershipRecheckMs: 300 });
    await restarted.ready;
    await sleep(500);
    await restarted.stop();
    for (const n of ["unmarked", "helm", "west"]) assert.equal(snapshot(n), before[n], `${n} unchanged`);
    assert.deepEqual(writes(["unmarked", "helm", "west"]), []);
  });

  test("an object of ours relabelled by Helm is no longer updated or deleted", async () => {
    const deployments = stack.t.client(DeploymentService);
    await deployments.createDeployment({ deployment: app("taken") });
    await waitForPhase(stack, "taken", "RUNNING");
    const live = structuredClone(deploymentOf(stack.emulator, NS, "taken")!);
    live.metadata.labels = { ...live.metadata.labels, "app.kubernetes.io/managed-by": "Helm" };
    stack.emulator.put(live);
    const taken = snapshot("taken");
    stack.emulator.clearRequestLog();
    await deployments.updateDeployment({ deployment: app("taken", "app:2") });
    await waitForPhase(stack, "taken", "FAILED", /deployment owned\/taken exists and is not managed by flotilla \(app\.kubernetes\.io\/managed-by=Helm\)/);
    await deployments.deleteDeployment({ id: "taken" });
    await waitFor(async () => (await statusOf(stack, "taken")) === undefined, "deployment gone from ctrl");
    await sleep(500);
    assert.equal(snapshot("taken"), taken, "neither updated nor deleted");
    assert.deepEqual(
      writes(["taken"]).filter((w) => !w.startsWith("delete services")),
      [],
      "no write to the Deployment",
    );
  });

  test("the conflict clears once the object is removed; adoption by annotation hands it over", async () => {
    const deployments = stack.t.client(DeploymentService);
    await deployments.createDeployment({ deployment: app("helm") });
    await waitForPhase(stack, "helm", "FAILED", /Helm/);
    const live = structuredClone(deploymentOf(stack.emulator, NS, "helm")!);
    // The adopted Deployment must match our selector (immutable) for the apply to succeed.
    live.metadata.annotations = { ...live.metadata.annotations, [ADOPT_ANNOTATION]: "true" };
    live.spec = { ...(live.spec as object), selector: { matchLabels: { "flotilla.dev/resource-type": "deployment", "flotilla.dev/resource-id": "helm" } } };
    (live.spec as any).template.metadata.labels = { "flotilla.dev/resource-type": "deployment", "flotilla.dev/resource-id": "helm" };
    stack.emulator.put(live);
    await waitForPhase(stack, "helm", "RUNNING");
    const adopted = deploymentOf(stack.emulator, NS, "helm")!;
    assert.equal(adopted.metadata.uid, live.metadata.uid, "the same object, taken over");
    assert.equal(adopted.metadata.labels?.["app.kubernetes.io/managed-by"], "flotilla");
    assert.equal(imageOf(adopted), "app:1");

    await deployments.createDeployment({ deployment: app("unmarked") });
    await waitForPhase(stack, "unmarked", "FAILED", /not managed by flotilla/);
    assert.ok(stack.emulator.delete("apps/v1", "Deployment", NS, "unmarked"));
    await waitForPhase(stack, "unmarked", "RUNNING");
    assert.equal(deploymentOf(stack.emulator, NS, "unmarked")?.metadata.labels?.["flotilla.dev/region"], REGION);
  });
});

describe("system namespaces at the agent", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(sqlite!.db, { ctrl: { allowedSystemNamespaces: ["kube-system"] } });
  });
  after(() => stack?.close());

  test("kube-system, allowed by ctrl, is refused by the agent with a reason in the status; nothing written", async () => {
    const agent = await stack.agent();
    await agent.ready;
    const namespaceBefore = JSON.stringify(stack.emulator.get("v1", "Namespace", "kube-system"));
    stack.emulator.clearRequestLog();
    await stack.t.client(DeploymentService).createDeployment({ deployment: { ...app("sys"), namespace: "kube-system" } });
    await waitForPhase(stack, "sys", "FAILED", /namespace kube-system is refused by this agent/);
    await sleep(300);
    assert.equal(deploymentOf(stack.emulator, "kube-system", "sys"), undefined);
    assert.equal(JSON.stringify(stack.emulator.get("v1", "Namespace", "kube-system")), namespaceBefore, "the namespace is not labelled");
    assert.deepEqual(
      stack.emulator.requestLog.filter((e) => e.namespace === "kube-system" || e.name === "kube-system"),
      [],
    );
    await agent.stop();
  });

  test("an agent told to allow it applies there", async () => {
    const agent = await stack.agent({ namespaces: { allowed: ["*"], denied: [] } });
    await agent.ready;
    await waitForPhase(stack, "sys", "RUNNING");
    await agent.stop();
  });
});

describe("a conflict is re-checked when the observer sees the object change", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(sqlite!.db);
  });
  after(() => stack?.close());

  test("labelled with this resource's marks, the object is taken over long before the recheck interval", async () => {
    const identity = { "flotilla.dev/resource-type": "deployment", "flotilla.dev/resource-id": "relabel" };
    const object = foreign("relabel", { "app.kubernetes.io/managed-by": "Helm" });
    object.spec.selector.matchLabels = identity as never;
    object.spec.template.metadata.labels = identity as never;
    stack.emulator.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: NS } });
    stack.emulator.put(object);
    const agent = await stack.agent({ ownershipRecheckMs: 120_000 });
    await agent.ready;
    await stack.t.client(DeploymentService).createDeployment({ deployment: app("relabel") });
    await waitForPhase(stack, "relabel", "FAILED", /managed-by=Helm/);
    const live = structuredClone(deploymentOf(stack.emulator, NS, "relabel")!);
    live.metadata.labels = { ...ours, ...identity };
    stack.emulator.put(live);
    // waitForPhase gives up after 30 s, a quarter of the recheck interval.
    await waitForPhase(stack, "relabel", "RUNNING");
    assert.equal(imageOf(deploymentOf(stack.emulator, NS, "relabel")), "app:1");
  });
});
