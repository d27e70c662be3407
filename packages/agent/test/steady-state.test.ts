// Semantic comparison end to end: a workload whose values a real API server canonicalizes
// (cpu 1000m → 1, memory 1024Mi → 1Gi, an empty env value dropped) stays at zero applies and
// zero drift corrections over many refresh intervals, even when the live object holds the
// canonical forms rather than what the agent sent.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import type { Agent } from "../src/agent.ts";
import { deploymentOf, REGION, startStack, waitFor, waitForPhase, type Stack } from "@flotilla/testkit/stack";

const [sqlite] = await testDatabases();

// The refresh looks at most once a second, whatever the interval.
const REFRESH_MS = 1000;
const INTERVALS = 6;

const sum = async (
  metric: { get(): Promise<{ values: { value: number; labels: Record<string, string | number> }[] }> },
  filter: (labels: Record<string, string | number>) => boolean = () => true,
) => (await metric.get()).values.filter((v) => filter(v.labels)).reduce((total, v) => total + v.value, 0);

describe("steady state with canonicalizable values", () => {
  let stack: Stack;
  let agent: Agent;
  before(async () => {
    stack = await startStack(sqlite!.db);
    agent = await stack.agent({ refreshIntervalMs: REFRESH_MS, refreshPerSecond: 100 });
    await agent.ready;
    await stack.t.client(DeploymentService).createDeployment({
      deployment: {
        id: "canon",
        namespace: "steady",
        image: "app:1",
        port: 8080,
        cpuMillicores: 1000,
        memoryMib: 1024,
        command: ["/app", "--serve"],
        env: [
          { name: "EMPTY", value: "" },
          { name: "MODE", value: "prod" },
        ],
        regions: [{ region: REGION, replicas: 2 }],
      },
    });
    await waitForPhase(stack, "canon", "RUNNING");
  });
  after(() => stack?.close());

  test("zero applies and zero drift corrections over many refresh intervals, also against canonical forms", async () => {
    const { emulator } = stack;
    // Store the Deployment as a real API server returns it (canonical quantities, the empty value
    // dropped, a default filled in), as another writer that leaves our fields' meaning alone: an
    // emulator that canonicalizes already holds this, one that stores what it is given now does.
    const live = structuredClone(deploymentOf(emulator, "steady", "canon")!);
    const app = (live.spec as any).template.spec.containers[0];
    app.resources.requests = { cpu: "1", memory: "1Gi" };
    app.env = [{ name: "EMPTY" }, { name: "MODE", value: "prod" }];
    app.imagePullPolicy = "IfNotPresent";
    emulator.put(live);
    const canonical = deploymentOf(emulator, "steady", "canon")!.metadata.resourceVersion;

    const runsBefore = await sum(agent.metrics.reconciles, (l) => l.op === "apply");
    const correctionsBefore = await sum(agent.metrics.driftCorrections);
    emulator.clearRequestLog();
    const refreshesSince = async () => (await sum(agent.metrics.reconciles, (l) => l.op === "apply")) - runsBefore;
    await sleep(REFRESH_MS * INTERVALS);
    // A loaded machine may look less often than once an interval: the window then lasts until it has.
    await waitFor(async () => (await refreshesSince()) >= INTERVALS / 2, "the refresh to look a few times", 30_000);

    const writes = emulator.requestLog.filter((e) => e.verb !== undefined && !["get", "list", "watch"].includes(e.verb));
    assert.deepEqual(
      writes.map((e) => `${e.verb} ${e.resource} ${e.name}`),
      [],
      "no write request at all",
    );
    assert.equal(await sum(agent.metrics.driftCorrections), correctionsBefore, "no drift correction counted");
    const refreshes = await refreshesSince();
    assert.ok(refreshes >= INTERVALS / 2, `the refresh did look (${refreshes} reconciles)`);
    assert.equal(deploymentOf(emulator, "steady", "canon")!.metadata.resourceVersion, canonical, "the live object was left as it was");
  });
});
