// The status stream's latency and cost: a status change written through this ctrl process
// (an agent's report, an operator's write) reaches open WatchStatus streams without waiting
// for the poll, and the streams a change wakes share one read of its statuses and one read
// of the regions, however many are open.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { Phase, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { StatusService, type WatchStatusResponse } from "@flotilla/proto/ctrl/v1/status_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

/** Far longer than any test here waits: whatever arrives was not fetched by a poll. */
const POLL_MS = 120_000;
const STREAMS = 20;

for (const { db, skip } of await testDatabases()) {
  describe(`status stream (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    before(async () => {
      t = await startTestCtrl(db, { pollIntervalMs: POLL_MS });
      await t.store.regions.create("local");
      await t.client(DeploymentService).createDeployment({
        deployment: { id: "web", namespace: "demo", image: "nginx:1.27", regions: [{ region: "local", replicas: 2 }] },
      });
    });
    after(() => t.close());

    /** Opens a stream of the deployments and reads it up to SYNCED. */
    const openStream = async (signal: AbortSignal) => {
      const stream = t.client(StatusService).watchStatus({ resourceType: ResourceType.DEPLOYMENT }, { signal })[Symbol.asyncIterator]();
      const next = async () => (await stream.next()).value as WatchStatusResponse;
      while ((await next()).event.case !== "synced");
      /** Reads until `web` is sent with the phase `phase`. */
      return async (phase: Phase) => {
        for (;;) {
          const r = await next();
          if (r.event.case === "object" && r.event.value.id === "web" && r.event.value.regions[0]?.phase === phase) return;
        }
      };
    };
    const report = (readyReplicas: number) =>
      t.client(ClusterService).reportObservedState({
        region: "local",
        appliedVersion: 1n,
        observations: [
          { type: ResourceType.DEPLOYMENT, id: "web", appliedVersion: 1n, observedImage: "nginx:1.27", desiredReplicas: 2, readyReplicas, updatedReplicas: 2 },
        ],
      });

    test("an agent's report through this process reaches an open stream without waiting for the poll", async () => {
      const signal = AbortSignal.timeout(POLL_MS / 4);
      const waitFor = await openStream(signal);
      await report(1);
      await waitFor(Phase.PROGRESSING);
      await report(2);
      await waitFor(Phase.RUNNING);
    });

    test(`${STREAMS} open streams share one read of a change's statuses and one of the regions`, async () => {
      const abort = new AbortController();
      const streams = await Promise.all(Array.from({ length: STREAMS }, () => openStream(abort.signal)));
      const calls = { statuses: 0, regions: 0 };
      const inputs = t.store.observations.inputs.bind(t.store.observations);
      const list = t.store.regions.list.bind(t.store.regions);
      t.store.observations.inputs = (...args) => {
        calls.statuses++;
        return inputs(...args);
      };
      t.store.regions.list = (...args) => {
        calls.regions++;
        return list(...args);
      };
      try {
        await report(1);
        await Promise.all(streams.map((waitFor) => waitFor(Phase.PROGRESSING)));
        assert.equal(calls.statuses, 1, "status reads for one change");
        // The streams' region checks share a timer too; one may fall between the two reads.
        assert.ok(calls.regions >= 1 && calls.regions <= 2, `region reads for one change: ${calls.regions}`);
      } finally {
        t.store.observations.inputs = inputs;
        t.store.regions.list = list;
        abort.abort();
      }
    });
  });
}
