// ARCHITECTURE §7: ctrl is stateless; replicas share one database. A write through one
// reaches watchers on another within the poll interval; a killed replica loses nothing.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { assertCaughtUp, Follower } from "@flotilla/testkit/follower";
import { ADMIN_TOKEN, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { spawnCtrl, type CtrlProcess } from "@flotilla/testkit/ctrl-process";

function clientOf<S extends typeof ClusterService | typeof DeploymentService>(url: string, service: S) {
  return createClient(
    service,
    createGrpcTransport({
      baseUrl: url,
      interceptors: [
        (next) => (req) => {
          req.header.set("authorization", `Bearer ${ADMIN_TOKEN}`);
          return next(req);
        },
      ],
    }),
  );
}

const mysql = (await testDatabases()).find((d) => d.db.name === "mysql")!;

describe("two ctrl processes on one MariaDB", { skip: mysql.skip }, () => {
  let a: TestCtrl;
  let b: CtrlProcess;
  before(async () => {
    a = await startTestCtrl(mysql.db);
    await a.store.regions.create("shared");
    b = await spawnCtrl(a.databaseUrl, ADMIN_TOKEN, ["--poll-interval", "100ms"]);
  });
  after(async () => {
    await b.kill();
    await a.close();
  });

  test("a write through one replica reaches a watcher on the other, both ways", async () => {
    const onB = new Follower(clientOf(b.url, ClusterService), "shared");
    const onA = new Follower(clientOf(a.url, ClusterService), "shared");
    for (const f of [onA, onB]) {
      await f.snapshot();
      f.watch();
    }
    await clientOf(a.url, DeploymentService).createDeployment({
      deployment: { id: "via-a", namespace: "x", image: "x:1", regions: [{ region: "shared", replicas: 1 }] },
    });
    await onB.reach(1, 5000);
    await clientOf(b.url, DeploymentService).createDeployment({
      deployment: { id: "via-b", namespace: "x", image: "x:1", regions: [{ region: "shared", replicas: 1 }] },
    });
    await onA.reach(2, 5000);
    // B's own write reaches its watcher through B's poller, on its own schedule.
    await onB.reach(2, 5000);
    for (const f of [onA, onB]) {
      await f.stop();
      assert.deepEqual(f.versions, [1, 2]);
    }
  });

  test("a replica killed mid-stream: the watcher resumes on the other, nothing lost or duplicated", async () => {
    const deployments = clientOf(a.url, DeploymentService);
    const follower = new Follower(clientOf(b.url, ClusterService), "shared");
    await follower.snapshot();
    follower.watch();
    let n = 0;
    const writeSome = async (count: number) => {
      for (let i = 0; i < count; i++) {
        await deployments.createDeployment({ deployment: { id: `k${n++}`, namespace: "x", image: "x:1", regions: [{ region: "shared", replicas: 1 }] } });
      }
    };
    await writeSome(20);
    await b.kill("SIGKILL");
    await writeSome(20);
    await follower.stop();
    assert.ok(follower.error, "the stream on the killed replica failed");
    const resumed = follower.continueOn(clientOf(a.url, ClusterService));
    resumed.watch();
    await assertCaughtUp(resumed, a.store);
    b = await spawnCtrl(a.databaseUrl, ADMIN_TOKEN);
  });
});
