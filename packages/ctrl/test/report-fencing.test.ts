// Fencing of ReportObservedState by the reporting agent's leader epoch: a deposed leader's
// reports are refused with FAILED_PRECONDITION / FENCED and write nothing, and the check and
// the write are one transaction, so concurrent reports of older and newer leaders never leave
// an older leader's observation behind.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { ErrorInfoSchema } from "@flotilla/proto/google/rpc/error_details_pb.js";
import { FENCED, silentLogger } from "@flotilla/runtime";
import { testDatabases } from "@flotilla/testkit/databases";
import { startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

for (const { db, skip } of await testDatabases()) {
  describe(`report fencing (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    let agent: ReturnType<TestCtrl["client"]>;
    before(async () => {
      t = await startTestCtrl(db, { log: silentLogger }); // it refuses reports on purpose
      await t.store.regions.create("local");
      const { token } = await t.client(RegionService).createAgentToken({ region: "local" });
      agent = t.client(ClusterService, { token });
      await t
        .client(DeploymentService)
        .createDeployment({ deployment: { id: "web", namespace: "demo", image: "nginx:1", regions: [{ region: "local", replicas: 1 }] } });
    });
    after(() => t.close());

    const report = (image: string, leader?: { epoch: bigint; holderIdentity: string }) =>
      (agent as any).reportObservedState({
        region: "local",
        appliedVersion: 1n,
        observations: [{ type: ResourceType.DEPLOYMENT, id: "web", observedImage: image }],
        leader,
      });
    const storedImage = async () => {
      const { stored } = (await t.store.observations.load(1, [{ type: ResourceType.DEPLOYMENT, id: "web" }])).get(`${ResourceType.DEPLOYMENT}/web`)!;
      return stored?.observation.observedImage;
    };
    const fenced = async () => (await t.ctrl.metrics.reportsFenced.get()).values.find((v) => v.labels.region === "local")?.value ?? 0;
    const isFenced = (error: unknown) => {
      const e = ConnectError.from(error);
      return e.code === Code.FailedPrecondition && e.findDetails(ErrorInfoSchema)[0]?.reason === FENCED && /refused, the region's leader is/.test(e.message);
    };

    test("reports without a leader are not fenced (leader election off)", async () => {
      await report("nginx:solo");
      assert.equal(await storedImage(), "nginx:solo");
    });

    test("a lower epoch, or the same epoch from another holder, is refused and writes nothing", async () => {
      await report("nginx:a", { epoch: 1n, holderIdentity: "a" });
      await report("nginx:b", { epoch: 2n, holderIdentity: "b" });
      assert.equal(await storedImage(), "nginx:b");
      const before = await fenced();
      const rows = await t.store.database.db.selectFrom("observations").selectAll().execute();
      const agents = await t.store.database.db.selectFrom("agents").selectAll().execute();
      await assert.rejects(report("nginx:a-stale", { epoch: 1n, holderIdentity: "a" }), isFenced);
      await assert.rejects(report("nginx:c-same-epoch", { epoch: 2n, holderIdentity: "c" }), isFenced);
      assert.equal(await fenced(), before + 2);
      assert.deepEqual(await t.store.database.db.selectFrom("observations").selectAll().execute(), rows);
      assert.deepEqual(await t.store.database.db.selectFrom("agents").selectAll().execute(), agents, "no heartbeat either");
      await report("nginx:b2", { epoch: 2n, holderIdentity: "b" });
      assert.equal(await storedImage(), "nginx:b2", "the current leader goes on");
    });

    test("bad leader fields are rejected", async () => {
      await assert.rejects(
        report("x", { epoch: -1n, holderIdentity: "a" }),
        (e) => ConnectError.from(e).code === Code.InvalidArgument && /leader.epoch/.test(ConnectError.from(e).message),
      );
      await assert.rejects(
        report("x", { epoch: 9n, holderIdentity: "" }),
        (e) => ConnectError.from(e).code === Code.InvalidArgument && /leader.holder_identity/.test(ConnectError.from(e).message),
      );
    });

    test("concurrent reports of many epochs: the newest epoch's observation is what stays", async () => {
      const epochs = Array.from({ length: 24 }, (_, i) => 10 + i);
      // Interleaved so that older epochs race newer ones.
      const order = [...epochs.filter((e) => e % 2 === 1), ...epochs.filter((e) => e % 2 === 0)].sort(() => Math.random() - 0.5);
      const results = await Promise.allSettled(order.map((epoch) => report(`nginx:${epoch}`, { epoch: BigInt(epoch), holderIdentity: `h${epoch}` })));
      for (const result of results) if (result.status === "rejected") assert.ok(isFenced(result.reason), String(result.reason));
      assert.equal(results[order.indexOf(33)]!.status, "fulfilled", "the newest epoch is never refused");
      assert.equal(await storedImage(), "nginx:33");
      const row = await t.store.database.db.selectFrom("leader_epochs").selectAll().executeTakeFirstOrThrow();
      assert.deepEqual([Number(row.epoch), row.holder_identity], [33, "h33"]);
    });
  });
}
