// No client can stall the rest: streams whose clients never read hold no database
// connection, and end after the send timeout; idle connections hold nothing either.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { constants as h2 } from "node:http2";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, createBulkyDeployments, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { rawGrpcCall } from "@flotilla/testkit/interop";

const SEND_TIMEOUT_MS = 2000;
const STALLED = 50;
const IDLE_CONNECTIONS = 1000;

/** A TCP connection that sends the HTTP/2 preface and then nothing; resolves once ctrl closes it. */
function prefaceOnly(port: number): { opened: Promise<void>; closed: Promise<void>; socket: net.Socket } {
  const socket = net.connect({ port, host: "127.0.0.1" });
  socket.on("error", () => {});
  socket.on("data", () => {}); // ctrl's SETTINGS
  const opened = new Promise<void>((resolve) =>
    socket.once("connect", () => {
      socket.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
      resolve();
    }),
  );
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  return { opened, closed, socket };
}

for (const { db, skip } of await testDatabases()) {
  describe(`stalled clients (${db.name}, pool of 10)`, { skip }, () => {
    let t: TestCtrl;
    before(async () => {
      t = await startTestCtrl(db, { streamSendTimeoutMs: SEND_TIMEOUT_MS });
      await t.store.regions.create("wan");
      // Every snapshot is far beyond the stalled clients' window.
      await createBulkyDeployments(t, "wan", 20);
    });
    after(() => t.close());

    test(`${STALLED} stalled syncs and ${IDLE_CONNECTIONS} preface-only connections: unary calls and a new sync succeed; the stalled streams end after the send timeout`, async () => {
      const port = Number(new URL(t.url).port);
      const idle = Array.from({ length: IDLE_CONNECTIONS }, () => prefaceOnly(port));
      await Promise.all(idle.map((c) => c.opened));
      // Clients that never read, with a 1 KiB HTTP/2 window they never open.
      const stalled = Array.from({ length: STALLED }, () =>
        rawGrpcCall(t.url, ClusterService.method.syncDesiredState, { region: "wan" }, ADMIN_TOKEN, { initialWindowSize: 1024 }),
      );
      // When each stream got its headers (with its first message) and when it ended.
      const ends = stalled.map(({ stream }) => {
        const responded = new Promise<number>((resolve) => stream.once("response", () => resolve(Date.now())));
        return new Promise<{ code: number; stalledMs: number }>((resolve) =>
          stream.once("close", async () => resolve({ code: stream.rstCode ?? -1, stalledMs: Date.now() - (await responded) })),
        );
      });

      const deployments = t.client(DeploymentService, { protocol: "grpc" });
      const regions = t.client(RegionService);
      for (let i = 0; i < 20; i++) {
        await deployments.getDeployment({ id: `d${i}` }, { timeoutMs: 5000 });
        await regions.getRegion({ name: "wan" }, { timeoutMs: 5000 });
      }
      await deployments.createDeployment(
        { deployment: { id: "during", namespace: "ns", image: "app:1", regions: [{ region: "wan", replicas: 1 }] } },
        { timeoutMs: 5000 },
      );
      let resources = 0;
      let complete = false;
      for await (const res of t.client(ClusterService, { protocol: "grpc" }).syncDesiredState({ region: "wan" }, { timeoutMs: 10_000 })) {
        if (res.message.case === "batch") resources += res.message.value.resources.length;
        else if (res.message.case === "complete") complete = true;
      }
      assert.deepEqual({ resources, complete }, { resources: 21, complete: true });

      const ended = await Promise.all(ends);
      assert.deepEqual(new Set(ended.map((e) => e.code)), new Set([h2.NGHTTP2_ENHANCE_YOUR_CALM]));
      assert.ok(Math.min(...ended.map((e) => e.stalledMs)) >= SEND_TIMEOUT_MS - 50, "a stalled stream ended before the send timeout");
      const metric = await t.ctrl.metrics.connectionBounds.get();
      assert.equal(metric.values.find((v) => v.labels.reason === "send_timeout")?.value, STALLED);
      for (const call of stalled) call.close();
      for (const c of idle) c.socket.destroy();
    });
  });
}

describe("snapshot bounds (sqlite)", () => {
  let t: TestCtrl;
  before(async () => {
    const [sqlite] = await testDatabases();
    // One snapshot at a time, 64 KB of read-ahead for all: a snapshot of 10 batches of 64 KB does not
    // fit, so a client that stops reading keeps the only slot until the send timeout.
    t = await startTestCtrl(sqlite!.db, {
      streamSendTimeoutMs: SEND_TIMEOUT_MS,
      stream: { snapshotConcurrency: 1, snapshotReadAheadBytes: 64 * 1024, snapshotBatchSize: 2 },
    });
    await t.store.regions.create("wan");
    await createBulkyDeployments(t, "wan", 20);
  });
  after(() => t.close());

  test("--snapshot-concurrency and --snapshot-read-ahead-bytes: a sync waits for the slot a stalled one holds, and gets it when that one is reset", async () => {
    const stalled = rawGrpcCall(t.url, ClusterService.method.syncDesiredState, { region: "wan" }, ADMIN_TOKEN, { initialWindowSize: 1024 });
    await new Promise((resolve) => stalled.stream.once("response", resolve));
    let stalledEndedAt = 0;
    void stalled.result.then(() => (stalledEndedAt = Date.now()));
    let resources = 0;
    let firstBatchAt = 0;
    for await (const res of t.client(ClusterService, { protocol: "grpc" }).syncDesiredState({ region: "wan" }, { timeoutMs: 30_000 })) {
      if (res.message.case === "batch") {
        firstBatchAt ||= Date.now();
        resources += res.message.value.resources.length;
      }
    }
    assert.equal(resources, 20);
    assert.equal((await stalled.result).rstCode, h2.NGHTTP2_ENHANCE_YOUR_CALM);
    assert.ok(stalledEndedAt > 0 && firstBatchAt >= stalledEndedAt - 50, "the second sync read while the stalled one held the only slot");
    stalled.close();
  });
});
