// Observed status end to end: operator API on a real ctrl → agent → emulator → observer →
// ReportObservedState → the phases of GetDeployment (ARCHITECTURE §3, §4, §5).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { DeploymentDesiredStatus } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import type { Agent } from "../src/agent.ts";
import { REGION, startStack, statusOf, waitFor, waitForPhase, type Stack } from "@flotilla/testkit/stack";

const STALE_MS = 1500;

/** Whether `wanted` occurs in `seen` in this order (other phases may come between). */
function inOrder(seen: string[], wanted: string[]): boolean {
  let at = 0;
  for (const phase of seen) if (phase === wanted[at]) at++;
  return at === wanted.length;
}

const web = (image: string, replicas = 2) => ({ id: "web", namespace: "status", image, port: 80, regions: [{ region: REGION, replicas }] });

for (const { db, skip } of await testDatabases()) {
  describe(`observed status end to end (${db.name})`, { skip }, () => {
    let stack: Stack;
    let agent: Agent;
    before(async () => {
      stack = await startStack(db, { ctrl: { status: { staleAfterMs: STALE_MS } }, emulator: { rolloutDelayMs: 400 } });
      // A short periodic full sync: each one reconnects the watch, so full sets go out often.
      agent = await stack.agent({ fullSyncIntervalMs: 1000 });
      await agent.ready;
    });
    after(() => stack?.close());

    test("create → PENDING → PROGRESSING → RUNNING; failing image → FAILED; fixed → RUNNING; scaled to 0 and stopped → STOPPED; deleted → gone", async () => {
      const deployments = stack.t.client(DeploymentService);
      // The agent's applies wait until PENDING has been seen, and the pods stay unready until
      // PROGRESSING has: each phase is seen however slowly this runs under load.
      const releaseApplies = stack.emulator.faults.hold("apply");
      const releaseRollouts = stack.emulator.holdRollouts();
      const seen: string[] = [];
      try {
        await deployments.createDeployment({ deployment: web("app:1") });
        await waitForPhase(stack, "web", "PENDING", undefined, seen);
        releaseApplies();
        await waitForPhase(stack, "web", "PROGRESSING", undefined, seen);
      } finally {
        releaseApplies();
        releaseRollouts();
      }
      await waitForPhase(stack, "web", "RUNNING", /2\/2 replicas ready/, seen);
      assert.ok(inOrder(seen, ["PENDING", "PROGRESSING", "RUNNING"]), `phases seen: ${seen.join(" → ")}`);

      await deployments.updateDeployment({ deployment: web("app:fail-1") });
      const failed = await waitForPhase(stack, "web", "FAILED");
      assert.match(failed.reason, /deadline/);

      await deployments.updateDeployment({ deployment: web("app:2") });
      await waitForPhase(stack, "web", "RUNNING", /2\/2 replicas ready/);

      await deployments.updateDeployment({ deployment: web("app:2", 0) });
      assert.match((await waitForPhase(stack, "web", "STOPPED")).reason, /scaled to zero/);

      await deployments.updateDeployment({ deployment: web("app:2") });
      await waitForPhase(stack, "web", "RUNNING");
      await deployments.updateDeployment({ deployment: { ...web("app:2"), desiredStatus: DeploymentDesiredStatus.STOPPED } });
      const stopped = await waitForPhase(stack, "web", "STOPPED");
      assert.equal(stopped.reason, "stopped");

      await deployments.deleteDeployment({ id: "web" });
      await waitFor(async () => (await statusOf(stack, "web")) === undefined, "web gone");
    });

    test("steady state: reports are no-ops (heartbeats and full sets), the observations table is unchanged", async () => {
      await stack.t.client(DeploymentService).createDeployment({ deployment: { ...web("app:1"), id: "steady" } });
      await waitForPhase(stack, "steady", "RUNNING");
      const counts = async () => Object.fromEntries((await stack.t.ctrl.metrics.statusUpdates.get()).values.map((v) => [v.labels.result, v.value]));
      // The last changes of the rollout have reached ctrl once a report of them is a no-op.
      const running = await counts();
      await waitFor(async () => ((await counts()).noop ?? 0) > (running.noop ?? 0), "a no-op report after the rollout", 30_000);
      const rows = () => stack.t.store.database.db.selectFrom("observations").selectAll().orderBy("resource_id").execute();
      const rowsBefore = await rows();
      const before = await counts();
      // Full sets follow each periodic full sync (every second here, later on a loaded machine):
      // wait for a few of them rather than for a fixed time.
      const after = await waitFor(
        async () => {
          const now = await counts();
          return (now.noop ?? 0) >= (before.noop ?? 0) + 3 && now;
        },
        "no-op reports going on",
        30_000,
        () => before,
      );
      assert.equal(after.changed, before.changed, "no status changed");
      assert.deepEqual(await rows(), rowsBefore);
      const sent = (await agent.metrics.observationsSent.get()).values[0]?.value ?? 0;
      assert.ok(sent > 0);
    });

    test("a stopped agent makes statuses stale with phases kept; a new agent makes them fresh", async () => {
      await waitForPhase(stack, "steady", "RUNNING");
      assert.equal((await statusOf(stack, "steady"))?.stale, false);
      await agent.stop();
      await waitFor(async () => (await statusOf(stack, "steady"))?.stale, "stale status", 10_000);
      assert.equal((await statusOf(stack, "steady"))?.phase, "RUNNING", "the phase is kept while stale");
      agent = await stack.agent();
      await waitFor(async () => (await statusOf(stack, "steady"))?.stale === false, "fresh status", 10_000);
      assert.equal((await statusOf(stack, "steady"))?.phase, "RUNNING");
    });
  });
}
