// The observer against a misbehaving API server: dropped watches, watches resumed from a
// resourceVersion the server no longer has (410 Gone → relist), failing lists and watches, and
// silent watches (inactivity watchdog). Status transitions made meanwhile are never lost.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import type { Agent } from "../src/agent.ts";
import { REGION, startStack, waitFor, waitForPhase, type Stack } from "@flotilla/testkit/stack";

const app = (id: string, image: string) => ({ id, namespace: "observed", image, port: 80, regions: [{ region: REGION, replicas: 2 }] });

const restarts = async (agent: Agent, reason: string) =>
  (await agent.metrics.observerRestarts.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;

const [sqlite] = await testDatabases();

describe("observer resilience", () => {
  let stack: Stack;
  let agent: Agent;
  before(async () => {
    // A short watch history makes resumed watches fall out of it; quick bookmarks make the
    // inactivity watchdog (3× the bookmark interval) notice silent watches within a second.
    stack = await startStack(sqlite!.db, { emulator: { rolloutDelayMs: 100, watchHistory: 10, bookmarkIntervalMs: 300 } });
    agent = await stack.agent();
    await agent.ready;
  });
  after(() => stack?.close());

  test("watches dropped every 100 ms: transitions still arrive", async () => {
    const deployments = stack.t.client(DeploymentService);
    stack.emulator.faults.setWatchDropIntervalMs(100);
    await deployments.createDeployment({ deployment: app("dropped", "app:1") });
    await waitForPhase(stack, "dropped", "RUNNING");
    await deployments.updateDeployment({ deployment: app("dropped", "app:fail-1") });
    await waitForPhase(stack, "dropped", "FAILED", /deadline/);
    await deployments.updateDeployment({ deployment: app("dropped", "app:2") });
    await waitForPhase(stack, "dropped", "RUNNING");
    stack.emulator.faults.clear();
    assert.ok((await restarts(agent, "closed")) > 0, "the watch was restarted after being closed");
  });

  test("silent watches and a resourceVersion out of the history: watchdog restart, 410 Gone, relist", async () => {
    const deployments = stack.t.client(DeploymentService);
    const [inactiveBefore, goneBefore] = [await restarts(agent, "inactive"), await restarts(agent, "gone")];
    // The watch stays open but delivers nothing, not even bookmarks.
    stack.emulator.faults.suppressWatchEvents(true);
    await deployments.createDeployment({ deployment: app("silent", "app:fail-1") });
    for (let i = 0; i < 4; i++) await deployments.createDeployment({ deployment: app(`churn-${i}`, "app:1") });
    // Once the churn pushed the watch's resourceVersion out of the history, the watchdog's
    // restart resumes from it, gets 410 Gone and relists (the ERROR event is never suppressed).
    // Either may be counted first: a watch of a quiet kind (Services, which image updates leave
    // alone) can already be out of the history when the previous test's drops restart it.
    await waitFor(async () => (await restarts(agent, "inactive")) > inactiveBefore, "the silent watch restarted by the watchdog", 20_000);
    await waitFor(async () => (await restarts(agent, "gone")) > goneBefore, "a 410 Gone restart", 20_000);
    // Relists alone keep the observations coming while events are suppressed: writes go on
    // pushing resumed watches out of the history, so each watchdog restart ends in 410 Gone and
    // a relist, however late the rollout's deadline passes.
    let failed = false;
    const churn = (async () => {
      for (let i = 0; !failed; i++) {
        await deployments.updateDeployment({ deployment: app(`churn-${i % 4}`, `app:${2 + (i % 2)}`) });
        await sleep(200);
      }
    })();
    try {
      await waitForPhase(stack, "silent", "FAILED", /deadline/);
    } finally {
      failed = true;
      await churn;
    }
    await deployments.updateDeployment({ deployment: app("silent", "app:3") });
    // The fault ends with its connections: events a silent watch swallowed are gone for good on
    // that connection (no API server does that), and with the history kept per resource type a
    // restart may resume without a 410 and relist. A new watch resumes from the last version seen.
    stack.emulator.faults.clear();
    stack.emulator.faults.dropWatches();
    await waitForPhase(stack, "silent", "RUNNING");
    for (let i = 0; i < 4; i++) await waitForPhase(stack, `churn-${i}`, "RUNNING");
  });

  test("failing lists and watches: backoff and retry, nothing lost", async () => {
    const deployments = stack.t.client(DeploymentService);
    const errorsBefore = await restarts(agent, "error");
    stack.emulator.faults.setErrorRate("list", 1, 500);
    stack.emulator.faults.setErrorRate("watch", 1, 503);
    stack.emulator.faults.dropWatches();
    await deployments.createDeployment({ deployment: app("unlisted", "app:1") });
    await waitFor(async () => (await restarts(agent, "error")) >= errorsBefore + 3, "failed watch attempts");
    await deployments.updateDeployment({ deployment: app("unlisted", "app:fail-2") });
    stack.emulator.faults.clear();
    await waitForPhase(stack, "unlisted", "FAILED", /deadline/);
    await deployments.updateDeployment({ deployment: app("unlisted", "app:4") });
    await waitForPhase(stack, "unlisted", "RUNNING");
  });
});
