// ReportObservedState and the projected status in Get/List (ARCHITECTURE §3, §4), driven
// by a scripted agent: no-op reports write nothing, staleness keeps phases, scoping holds.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { Phase, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

const STALE_MS = 2000;

for (const { db, skip } of await testDatabases()) {
  describe(`observed status (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    let agent: ReturnType<TestCtrl["client"]>;
    before(async () => {
      t = await startTestCtrl(db, { status: { staleAfterMs: STALE_MS } });
      for (const name of ["local", "other"]) await t.store.regions.create(name);
      const { token } = await t.client(RegionService).createAgentToken({ region: "local" });
      agent = t.client(ClusterService, { token });
    });
    after(() => t.close());

    const phaseOf = async (id: string) => {
      const { deployment } = await t.client(DeploymentService).getDeployment({ id });
      return deployment!.status.map((s) => ({ region: s.region, phase: Phase[s.phase], stale: s.stale }));
    };
    const report = (obs: Record<string, unknown>, appliedVersion = 1n) =>
      (agent as any).reportObservedState({ region: "local", appliedVersion, observations: [{ type: ResourceType.DEPLOYMENT, id: "web", ...obs }] });

    test("status follows the observations, per region", async () => {
      await t.client(DeploymentService).createDeployment({
        deployment: {
          id: "web",
          namespace: "demo",
          image: "nginx:1.27",
          regions: [
            { region: "local", replicas: 2 },
            { region: "other", replicas: 1 },
          ],
        },
      });
      assert.deepEqual(await phaseOf("web"), [
        { region: "local", phase: "PENDING", stale: true },
        { region: "other", phase: "PENDING", stale: true },
      ]);
      await report({ appliedVersion: 1n, observedImage: "nginx:1.27", desiredReplicas: 2, readyReplicas: 1, updatedReplicas: 2 });
      assert.deepEqual((await phaseOf("web"))[0], { region: "local", phase: "PROGRESSING", stale: false });
      await report({ appliedVersion: 1n, observedImage: "nginx:1.27", desiredReplicas: 2, readyReplicas: 2, updatedReplicas: 2 });
      const { deployment } = await t.client(DeploymentService).getDeployment({ id: "web" });
      const local = deployment!.status[0]!;
      assert.equal(Phase[local.phase], "RUNNING");
      assert.equal(local.reason, "2/2 replicas ready");
      assert.equal(local.desiredVersion, 1n);
      assert.equal(local.appliedVersion, 1n);
      assert.ok(local.lastObservedAt);
      const listed = await t.client(DeploymentService).listDeployments({});
      assert.equal(Phase[listed.deployments[0]!.status[0]!.phase], "RUNNING");
      const { region } = await t.client(RegionService).getRegion({ name: "local" });
      assert.equal(region!.agent?.connected, true);
      assert.equal(region!.agent?.appliedVersion, 1n);
    });

    test("steady state: identical reports are no-ops and write nothing", async () => {
      const rowsBefore = await t.store.database.db.selectFrom("observations").selectAll().execute();
      const counts = async () => Object.fromEntries((await t.ctrl.metrics.statusUpdates.get()).values.map((v) => [v.labels.result, v.value]));
      const before = await counts();
      // Each at its own time, as an agent sends them: the time alone is no change.
      for (let i = 0; i < 5; i++) {
        await report({ appliedVersion: 1n, observedImage: "nginx:1.27", desiredReplicas: 2, readyReplicas: 2, updatedReplicas: 2, observedAt: timestampNow() });
      }
      const after = await counts();
      assert.equal(after.noop! - (before.noop ?? 0), 5);
      assert.equal(after.changed, before.changed);
      assert.deepEqual(await t.store.database.db.selectFrom("observations").selectAll().execute(), rowsBefore);
    });

    test("a changed observation is written even when its status stays the same", async () => {
      const counts = async () => Object.fromEntries((await t.ctrl.metrics.statusUpdates.get()).values.map((v) => [v.labels.result, v.value]));
      const before = await counts();
      const changed = {
        appliedVersion: 1n,
        observedImage: "nginx:1.27",
        desiredReplicas: 2,
        readyReplicas: 2,
        updatedReplicas: 2,
        conditions: [{ type: "Available", status: "True" }],
      };
      await report({ ...changed, observedAt: timestampNow() });
      const [stored] = await t.store.observations.inputs(ResourceType.DEPLOYMENT, ["web"]).then((inputs) => inputs.filter((i) => i.region === "local"));
      assert.deepEqual(
        stored!.stored!.observation.conditions.map((c) => c.type),
        ["Available"],
      );
      await report({ ...changed, observedAt: timestampNow() });
      const after = await counts();
      assert.equal(after.changed! - (before.changed ?? 0), 1);
      assert.equal(after.noop! - (before.noop ?? 0), 1);
      assert.equal((await phaseOf("web"))[0]!.phase, "RUNNING");
    });

    test("a silent agent makes statuses stale, phases kept; reporting again makes them fresh", async () => {
      await sleep(STALE_MS + 200);
      assert.deepEqual((await phaseOf("web"))[0], { region: "local", phase: "RUNNING", stale: true });
      assert.equal((await t.client(RegionService).getRegion({ name: "local" })).region!.agent?.connected, false);
      await report({ appliedVersion: 1n, observedImage: "nginx:1.27", desiredReplicas: 2, readyReplicas: 2, updatedReplicas: 2 });
      assert.deepEqual((await phaseOf("web"))[0], { region: "local", phase: "RUNNING", stale: false });
    });

    test("an agent token reports only for its region; bad reports are rejected whole", async () => {
      await assert.rejects(
        (agent as any).reportObservedState({ region: "other", appliedVersion: 1n, observations: [] }),
        (e) => ConnectError.from(e).code === Code.PermissionDenied,
      );
      const rowsBefore = await t.store.database.db.selectFrom("observations").selectAll().execute();
      await assert.rejects(
        (agent as any).reportObservedState({
          region: "local",
          observations: [
            { type: ResourceType.DEPLOYMENT, id: "ok" },
            { type: ResourceType.DEPLOYMENT, id: "Bad_Id" },
          ],
        }),
        (e) => ConnectError.from(e).code === Code.InvalidArgument && ConnectError.from(e).message.includes("observations[1].id"),
      );
      await assert.rejects(
        (agent as any).reportObservedState({ region: "local", observations: [{ type: 99, id: "x" }] }),
        (e) => ConnectError.from(e).code === Code.InvalidArgument && ConnectError.from(e).message.includes("observations[0].type"),
      );
      assert.deepEqual(await t.store.database.db.selectFrom("observations").selectAll().execute(), rowsBefore);
    });

    test("a deleted deployment takes its observations with it", async () => {
      await t.client(DeploymentService).deleteDeployment({ id: "web" });
      const rows = await t.store.database.db.selectFrom("observations").selectAll().where("resource_id", "=", "web").execute();
      assert.equal(rows.length, 0);
    });
  });
}
