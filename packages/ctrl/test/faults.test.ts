// Faults ctrl must survive: the database going away and coming back, and shutdown with
// streams open (in-process and as a real process on SIGTERM).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import type { Store } from "@flotilla/store";
import { testDatabases } from "@flotilla/testkit/databases";
import { startCtrl, type Ctrl } from "../src/server.ts";
import { desiredInDatabase, Follower, stateDiff } from "@flotilla/testkit/follower";
import { ADMIN_TOKEN, startTestCtrl } from "@flotilla/testkit/ctrl";
import { spawnCtrl } from "@flotilla/testkit/ctrl-process";
import { storeBehindProxy, type TcpProxy } from "@flotilla/testkit/tcp-proxy";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

const databases = await testDatabases();
const mysql = databases.find((d) => d.db.name === "mysql")!;

function clients(url: string) {
  const transport = createGrpcTransport({
    baseUrl: url,
    interceptors: [
      (next) => (req) => {
        req.header.set("authorization", `Bearer ${ADMIN_TOKEN}`);
        return next(req);
      },
    ],
  });
  return { cluster: createClient(ClusterService, transport), deployments: createClient(DeploymentService, transport) };
}

describe("database down and back (mysql, through a proxy)", { skip: mysql.skip }, () => {
  let proxy: TcpProxy;
  let store: Store;
  let ctrl: Ctrl;
  let close: () => Promise<void>;
  before(async () => {
    ({ store, proxy, close } = await storeBehindProxy(mysql.db));
    await store.regions.create("db");
    ctrl = await startCtrl({ store, adminToken: ADMIN_TOKEN, port: 0, pollIntervalMs: 50, stream: { bookmarkIntervalMs: 200 } });
  });
  after(async () => {
    await ctrl.shutdown();
    await close();
  });

  test("writes fail with UNAVAILABLE while it is down; watchers lose nothing", async () => {
    const { cluster, deployments } = clients(ctrl.url);
    const create = (id: string) => deployments.createDeployment({ deployment: { id, namespace: "x", image: "x:1", regions: [{ region: "db", replicas: 1 }] } });
    const follower = new Follower(cluster, "db");
    await follower.snapshot();
    follower.watch();
    await create("before");
    proxy.cut();
    await assert.rejects(create("during"), (e) => ConnectError.from(e).code === Code.Unavailable);
    await sleep(500); // the poller fails a few rounds meanwhile
    proxy.restore();
    let created = false;
    for (let i = 0; i < 50 && !created; i++) {
      created = await create("after").then(
        () => true,
        async () => {
          await sleep(100);
          return false;
        },
      );
    }
    assert.ok(created, "writes work again once the database is back");
    const expected = await desiredInDatabase(store, "db");
    await follower.reach(expected.head);
    await follower.stop();
    assert.equal(follower.error, undefined);
    assert.equal(stateDiff(follower.state, expected.state), "");
    assert.deepEqual(follower.versions, [1, 2]);
  });
});

for (const { db, skip } of databases) {
  describe(`shutdown with open streams (${db.name})`, { skip }, () => {
    test("in-process: streams end with UNAVAILABLE, promptly", async () => {
      const t = await startTestCtrl(db);
      await t.store.regions.create("s");
      const follower = new Follower(t.client(ClusterService, { protocol: "grpc" }), "s");
      await follower.snapshot();
      follower.watch();
      // Shut down only once ctrl serves the stream: one still opening would be refused
      // (REFUSED_STREAM, safe to retry) rather than ended.
      const open = async () => (await t.ctrl.metrics.watchStreams.get()).values.reduce((n, v) => n + v.value, 0);
      for (let i = 0; i < 200 && (await open()) < 1; i++) await sleep(25);
      assert.equal(await open(), 1, "the watch stream is open");
      const started = Date.now();
      await t.close();
      await sleep(100);
      assert.equal(ConnectError.from(follower.error).code, Code.Unavailable, String(follower.error));
      assert.ok(Date.now() - started < 5000, "shutdown does not wait for streams to end by themselves");
    });

    test("as a process: SIGTERM drains and exits 0", async () => {
      const t = await startTestCtrl(db);
      await t.store.regions.create("s");
      const child = await spawnCtrl(t.databaseUrl, ADMIN_TOKEN);
      try {
        const follower = new Follower(clients(child.url).cluster, "s");
        await follower.snapshot();
        follower.watch();
        await sleep(200);
        assert.equal(await child.kill("SIGTERM"), 0, child.log());
        await sleep(100);
        assert.equal(ConnectError.from(follower.error).code, Code.Unavailable);
        assert.match(child.log(), /stopped/);
      } finally {
        await child.kill("SIGKILL");
        await t.close();
      }
    });
  });
}
