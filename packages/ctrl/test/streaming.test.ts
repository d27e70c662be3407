// ARCHITECTURE §2/§3: snapshot→watch handoff with no gap and no duplicate under load,
// tombstones, resume after a cut, retention, slow consumers, token scoping.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { toBinary } from "@bufbuild/protobuf";
import { ClusterService, SyncDesiredStateResponseSchema, WatchDeploymentChangesResponseSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { ErrorInfoSchema } from "@flotilla/proto/google/rpc/error_details_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { assertCaughtUp, desiredAtVersion, desiredInDatabase, Follower, stateDiff } from "@flotilla/testkit/follower";
import { ADMIN_TOKEN, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { rawGrpcCall } from "@flotilla/testkit/interop";
import { constants as http2Constants } from "node:http2";

const REGIONS = ["r1", "r2", "r3"];

function reason(error: unknown): string | undefined {
  return ConnectError.from(error).findDetails(ErrorInfoSchema)[0]?.reason;
}

/**
 * Four writers creating, updating and deleting 300 deployments named `prefix`N across the
 * regions (240 of them first, so a snapshot spans many batches while the writes go on), each
 * carrying `envBytes` of environment.
 */
async function startLoad(t: TestCtrl, prefix: string, envBytes = 0) {
  const deployments = t.client(DeploymentService);
  const env = envBytes > 0 ? [{ name: "NOISE", value: "x".repeat(envBytes) }] : [];
  const placement = (n: number) => REGIONS.filter((_, i) => (n >> i) & 1 || i === n % 3).map((region) => ({ region, replicas: n % 4 }));
  for (let i = 0; i < 240; i++) {
    await deployments.createDeployment({ deployment: { id: `${prefix}${i}`, namespace: "load", image: `app:${i}`, env, regions: placement(i) } });
  }
  let writing = true;
  let writes = 0;
  let failure: unknown;
  const writer = async (w: number) => {
    for (let n = w; writing; n += 7) {
      const id = `${prefix}${n % 300}`;
      const op = n % 5;
      try {
        if (op === 0) await deployments.deleteDeployment({ id });
        else if (op === 1 || op === 2) {
          await deployments.createDeployment({ deployment: { id, namespace: "load", image: `app:${n}`, env, regions: placement(n) } });
        } else await deployments.updateDeployment({ deployment: { id, namespace: "load", image: `app:${n}`, env, regions: placement(n + 1) } });
        writes++;
      } catch (error) {
        const code = ConnectError.from(error).code;
        if (code !== Code.NotFound && code !== Code.AlreadyExists) throw error;
      }
    }
  };
  const writers = [0, 1, 2, 3].map((w) =>
    writer(w).catch((error) => {
      failure = error;
      writing = false;
    }),
  );
  return {
    writes: () => writes,
    /** Count-based, not time-based: a loaded machine only slows the test down. */
    async writesReach(n: number) {
      while (writes < n) {
        if (failure) throw failure;
        await sleep(5);
      }
    },
    async stop() {
      writing = false;
      await Promise.all(writers);
      if (failure) throw failure;
    },
  };
}

for (const { db, skip } of await testDatabases()) {
  describe(`streaming (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    before(async () => {
      t = await startTestCtrl(db, {
        stream: { snapshotBatchSize: 50, bookmarkIntervalMs: 300, watchBufferLimit: 200, overflowResetMs: 1500 },
        pollIntervalMs: 50,
      });
      for (const name of REGIONS) await t.store.regions.create(name);
    });
    after(() => t.close());

    test("snapshot → watch handoff under concurrent writes: exact state, every version once", async () => {
      const load = await startLoad(t, "d");
      await load.writesReach(30);
      const followers = ["r1", "r2"].map((r) => new Follower(t.client(ClusterService, { protocol: "grpc" }), r));
      for (const f of followers) {
        await f.snapshot();
        f.watch();
      }
      await load.writesReach(load.writes() + 120);
      await load.stop();
      for (const f of followers) {
        const expected = await desiredInDatabase(t.store, f.region);
        await f.reach(expected.head, 30_000);
        await f.stop();
        assert.equal(stateDiff(f.state, expected.state), "", `${f.region} state`);
        const want = Array.from({ length: expected.head - f.snapshotVersion }, (_, i) => f.snapshotVersion + 1 + i);
        assert.deepEqual(f.versions, want, `${f.region}: every version after the snapshot exactly once`);
      }
    });

    test("a slow snapshot with writes before, during and after its pages: at its marker the client holds exactly the state at the version named", async () => {
      // 2 KB each: a page is far more than the client's window and ctrl's socket buffer take.
      const load = await startLoad(t, "slow", 2048);
      await load.writesReach(30);
      // Until the snapshots have spanned enough commits (count-based: a slow machine only takes longer).
      let committedDuring = 0;
      for (let round = 0; committedDuring < 20; round++) {
        assert.ok(round < 100, `the writers committed only ${committedDuring} versions during 100 snapshots`);
        const region = REGIONS[round % REGIONS.length]!;
        const { headVersion: before } = await t.store.regions.resolve(region);
        // A client that takes 20 ms per message through a 4 KiB window: ctrl reads each page
        // as it asks for it, and the writers commit between the pages.
        const f = new Follower(t.client(ClusterService, { protocol: "grpc", windowBytes: 4096 }), region);
        await f.snapshot(() => sleep(20));
        committedDuring += f.snapshotVersion - before;
        assert.equal(stateDiff(f.state, await desiredAtVersion(t.store, region, f.snapshotVersion)), "", `${region} at ${f.snapshotVersion}`);
      }
      await load.stop();
    });

    test("deletes arrive as tombstones though the source rows are gone", async () => {
      const deployments = t.client(DeploymentService);
      await deployments.createDeployment({ deployment: { id: "gone", namespace: "tomb", image: "x:1", regions: [{ region: "r3", replicas: 1 }] } });
      const f = new Follower(t.client(ClusterService), "r3");
      await f.snapshot();
      assert.ok(f.state.has("1/gone"));
      await deployments.deleteDeployment({ id: "gone" });
      const rows = await t.store.database.db.selectFrom("deployments").select("id").where("id", "=", "gone").execute();
      assert.equal(rows.length, 0);
      f.watch();
      const { head } = await desiredInDatabase(t.store, "r3");
      await f.reach(head);
      await f.stop();
      assert.equal(f.state.has("1/gone"), false);
    });

    test("a stream cut mid-way resumes from its last version: nothing lost, nothing duplicated", async () => {
      const deployments = t.client(DeploymentService);
      const f = new Follower(t.client(ClusterService, { protocol: "grpc" }), "r3");
      await f.snapshot();
      f.watch();
      for (let i = 0; i < 30; i++) {
        await deployments.createDeployment({ deployment: { id: `cut${i}`, namespace: "cut", image: "x:1", regions: [{ region: "r3", replicas: 1 }] } });
        if (i === 12) await f.stop(); // the cut: later changes happen while nobody watches
      }
      const resumed = f.continueOn(f.client);
      resumed.watch();
      await assertCaughtUp(resumed, t.store);
    });

    test("absent version_last_seen follows from the head; idle streams get bookmarks", async () => {
      const deployments = t.client(DeploymentService);
      const { head } = await desiredInDatabase(t.store, "r2");
      const messages: { events: number; version: number }[] = [];
      const abort = new AbortController();
      const watching = (async () => {
        try {
          for await (const res of t.client(ClusterService).watchDeploymentChanges({ region: "r2" }, { signal: abort.signal })) {
            messages.push({ events: res.events.length, version: Number(res.version) });
          }
        } catch (e) {
          if (!abort.signal.aborted) throw e;
        }
      })();
      await sleep(200);
      await deployments.createDeployment({ deployment: { id: "live", namespace: "x", image: "x:1", regions: [{ region: "r2", replicas: 1 }] } });
      const bookmarkAfter = () => messages.findIndex((m) => m.events === 0 && m.version === head + 1);
      for (let i = 0; i < 100 && bookmarkAfter() < 0; i++) await sleep(20);
      abort.abort();
      await watching;
      const firstEvents = messages.findIndex((m) => m.events > 0);
      assert.deepEqual(messages[firstEvents], { events: 1, version: head + 1 }, "only the live change, not history");
      assert.ok(
        messages.slice(0, firstEvents).every((m) => m.events === 0 && m.version === head),
        "bookmarks before it are at the old head",
      );
      assert.ok(bookmarkAfter() > firstEvents, `bookmarks: ${JSON.stringify(messages)}`);
    });

    test("a cursor ahead of the head or before the retention floor → RESYNC_REQUIRED", async () => {
      const cluster = t.client(ClusterService);
      const drain = async (versionLastSeen: bigint) => {
        for await (const _ of cluster.watchDeploymentChanges({ region: "r1", versionLastSeen })) break;
      };
      const { head } = await desiredInDatabase(t.store, "r1");
      await assert.rejects(drain(BigInt(head + 5)), (e) => ConnectError.from(e).code === Code.FailedPrecondition && reason(e) === "RESYNC_REQUIRED");
      const deleted = await t.store.changes.prune({ maxAgeMs: 0, maxRows: 5 }, Date.now());
      assert.ok(deleted > 0);
      await assert.rejects(drain(0n), (e) => ConnectError.from(e).code === Code.FailedPrecondition && reason(e) === "RESYNC_REQUIRED");
      // Within the retained window it still works, and the newest row is never pruned.
      await t.store.changes.prune({ maxAgeMs: 0, maxRows: 0 }, Date.now());
      await t.store.changes.prune({ maxAgeMs: 1, maxRows: 1 }, Date.now() + 10_000);
      const rows = await t.store.changes.read((await t.store.regions.resolve("r1")).id, 0, 100);
      assert.deepEqual(
        rows.map((r) => Number(r.version)),
        [head],
      );
      await drain(BigInt(head - 1));
    });

    test("stopped and slow consumers are ended with the resumable error; others keep flowing", async () => {
      const deployments = t.client(DeploymentService);
      const endedForLag = async () => Number((await t.ctrl.metrics.watchEndedForLag.get()).values[0]?.value ?? 0);
      // Fat changes fill the transport windows fast, then the 200-event buffer.
      const env = Array.from({ length: 40 }, (_, i) => ({ name: `V${i}`, value: "x".repeat(1000) }));
      let n = 0;
      const write = () =>
        deployments.createDeployment({ deployment: { id: `lag${n++}`, namespace: "lag", image: "x:1", env, regions: [{ region: "r2", replicas: 1 }] } });
      const { head } = await desiredInDatabase(t.store, "r2");
      const healthy = new Follower(t.client(ClusterService, { protocol: "grpc" }), "r2");
      healthy.cursor = head;
      healthy.watch();
      const watch = { region: "r2", versionLastSeen: BigInt(head) };

      // Stopped: never reads. Its generator parks on the full transport, so ctrl resets the
      // stream with ENHANCE_YOUR_CALM (which gRPC clients read as RESOURCE_EXHAUSTED).
      const stopped = rawGrpcCall(t.url, ClusterService.method.watchDeploymentChanges, watch, ADMIN_TOKEN);
      stopped.stream.pause();
      const before = await endedForLag();
      while ((await endedForLag()) === before) await write();
      const stoppedResult = await stopped.result;
      stopped.close();
      assert.equal(stoppedResult.rstCode, http2Constants.NGHTTP2_ENHANCE_YOUR_CALM);

      // Slow: stalls until its buffer overflows, then reads again: it gets the error in-band.
      const { head: now } = await desiredInDatabase(t.store, "r2");
      const slow = rawGrpcCall(t.url, ClusterService.method.watchDeploymentChanges, { ...watch, versionLastSeen: BigInt(now) }, ADMIN_TOKEN);
      slow.stream.pause();
      while ((await endedForLag()) === before + 1) await write();
      slow.stream.resume();
      slow.stream.on("data", () => {});
      const slowResult = await slow.result;
      slow.close();
      assert.equal(slowResult.grpcStatus, String(Code.ResourceExhausted), JSON.stringify(slowResult));
      assert.match(slowResult.grpcMessage ?? "", /CONSUMER_TOO_SLOW/);

      const { head: last } = await desiredInDatabase(t.store, "r2");
      await healthy.reach(last, 30_000);
      await healthy.stop();
      assert.deepEqual(
        healthy.versions,
        Array.from({ length: last - head }, (_, i) => head + 1 + i),
      );
    });

    test("messages stay under the byte limit: big resources are split across batches", async () => {
      const deployments = t.client(DeploymentService);
      const env = Array.from({ length: 7 }, (_, i) => ({ name: `V${i}`, value: "y".repeat(30_000) }));
      await t.store.regions.create("fat");
      const f = new Follower(t.client(ClusterService), "fat");
      await f.snapshot();
      const sizes: number[] = [];
      const abort = new AbortController();
      const watching = (async () => {
        try {
          for await (const res of t.client(ClusterService).watchDeploymentChanges({ region: "fat", versionLastSeen: 0n }, { signal: abort.signal })) {
            sizes.push(toBinary(WatchDeploymentChangesResponseSchema, res).length);
          }
        } catch (e) {
          if (!abort.signal.aborted) throw e;
        }
      })();
      // Committed while the poller fans out: one wake-up may see all of them at once.
      await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          deployments.createDeployment({ deployment: { id: `fat${i}`, namespace: "fat", image: "x:1", env, regions: [{ region: "fat", replicas: 1 }] } }),
        ),
      );
      await sleep(500);
      abort.abort();
      await watching;
      const limit = 1024 * 1024 + 64;
      assert.ok(
        sizes.every((s) => s <= limit),
        `watch message sizes ${sizes}`,
      );
      const snapshotSizes: number[] = [];
      let total = 0;
      for await (const res of t.client(ClusterService).syncDesiredState({ region: "fat" })) {
        snapshotSizes.push(toBinary(SyncDesiredStateResponseSchema, res).length);
        if (res.message.case === "batch") total += res.message.value.resources.length;
      }
      assert.equal(total, 60);
      assert.ok(snapshotSizes.length > 2 && snapshotSizes.every((s) => s <= limit), `snapshot message sizes ${snapshotSizes}`);
    });

    test("binary clients get the stored bytes, JSON clients real messages: the same resources", async () => {
      const expected = await desiredInDatabase(t.store, "r1");
      for (const protocol of ["grpc", "grpcweb", "connect"] as const) {
        const f = new Follower(t.client(ClusterService, { protocol }), "r1");
        await f.snapshot();
        assert.equal(stateDiff(f.state, expected.state), "", protocol);
      }
    });

    test("agent tokens are scoped to their region", async () => {
      const { token } = await t.client(RegionService).createAgentToken({ region: "r1" });
      const agent = t.client(ClusterService, { token });
      for await (const _ of agent.syncDesiredState({ region: "r1" }));
      await assert.rejects(
        (async () => {
          for await (const _ of agent.syncDesiredState({ region: "r2" }));
        })(),
        (e) => ConnectError.from(e).code === Code.PermissionDenied,
      );
      await assert.rejects(
        (async () => {
          for await (const _ of agent.watchDeploymentChanges({ region: "r2", versionLastSeen: 0n }));
        })(),
        (e) => ConnectError.from(e).code === Code.PermissionDenied,
      );
      await assert.rejects(t.client(DeploymentService, { token }).listDeployments({}), (e) => ConnectError.from(e).code === Code.PermissionDenied);
    });
  });
}
