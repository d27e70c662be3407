// Every operator write leaves exactly the outbox rows it should; a failed write leaves none.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fromBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { ChangeEventSchema, DeploymentDesiredStatus, SentinelDesiredState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { rowCounts, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

interface Row {
  region: string;
  version: number;
  op: "upsert" | "delete";
  id: string;
  detail: string;
}

for (const { db, skip } of await testDatabases()) {
  describe(`outbox rows of operator writes (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    const seen = new Set<string>();
    before(async () => {
      t = await startTestCtrl(db);
      const regions = t.client(RegionService);
      for (const name of ["eu", "us", "ap"]) await regions.createRegion({ region: { name } });
    });
    after(() => t.close());

    /** Outbox rows written since the previous call, decoded. */
    async function newRows(): Promise<Row[]> {
      const rows = await t.store.database.db
        .selectFrom("deployment_changes")
        .innerJoin("regions", "regions.id", "deployment_changes.region_id")
        .select(["regions.name", "deployment_changes.version", "deployment_changes.body", "deployment_changes.create_time"])
        .orderBy("regions.name")
        .orderBy("deployment_changes.version")
        .execute();
      const all = rows.map((r): Row => {
        const event = fromBinary(ChangeEventSchema, r.body);
        assert.equal(Number(event.version), Number(r.version));
        if (event.change.case === "upsert") {
          const spec = event.change.value.spec;
          const detail = spec.case === "deployment" || spec.case === "sentinel" ? `${spec.value.workload?.image} x${spec.value.replicas}` : "policy";
          assert.equal(Number(event.change.value.version), Number(r.version));
          return { region: r.name, version: Number(r.version), op: "upsert", id: event.change.value.id, detail };
        }
        assert.equal(event.change.case, "delete");
        const tomb = event.change.value;
        return { region: r.name, version: Number(r.version), op: "delete", id: tomb.id, detail: `${tomb.namespace}/${tomb.name}` };
      });
      const fresh = all.filter((r) => !seen.has(`${r.region}@${r.version}`));
      for (const r of fresh) seen.add(`${r.region}@${r.version}`);
      return fresh;
    }

    test("deployment lifecycle", async () => {
      const deployments = t.client(DeploymentService);
      const base = { id: "web", namespace: "demo", image: "nginx:1.27", port: 80 };
      const created = await deployments.createDeployment({
        deployment: {
          ...base,
          regions: [
            { region: "eu", replicas: 2 },
            { region: "us", replicas: 3 },
          ],
        },
      });
      assert.equal(created.deployment?.revision, 1n);
      assert.deepEqual(await newRows(), [
        { region: "eu", version: 1, op: "upsert", id: "web", detail: "nginx:1.27 x2" },
        { region: "us", version: 1, op: "upsert", id: "web", detail: "nginx:1.27 x3" },
      ]);

      // Same id and body again: idempotent, nothing written.
      const again = await deployments.createDeployment({
        deployment: {
          ...base,
          regions: [
            { region: "eu", replicas: 2 },
            { region: "us", replicas: 3 },
          ],
        },
      });
      assert.equal(again.deployment?.revision, 1n);
      assert.deepEqual(await newRows(), []);

      // Only the region whose state changed gets a row.
      const scaled = await deployments.updateDeployment({
        deployment: {
          ...base,
          regions: [
            { region: "eu", replicas: 5 },
            { region: "us", replicas: 3 },
          ],
        },
        expectedRevision: 1n,
      });
      assert.equal(scaled.deployment?.revision, 2n);
      assert.deepEqual(await newRows(), [{ region: "eu", version: 2, op: "upsert", id: "web", detail: "nginx:1.27 x5" }]);

      // Moving out of us, into ap.
      await deployments.updateDeployment({
        deployment: {
          ...base,
          regions: [
            { region: "eu", replicas: 5 },
            { region: "ap", replicas: 1 },
          ],
        },
      });
      assert.deepEqual(await newRows(), [
        { region: "ap", version: 1, op: "upsert", id: "web", detail: "nginx:1.27 x1" },
        { region: "us", version: 2, op: "delete", id: "web", detail: "demo/web" },
      ]);

      // Stopped: tombstones everywhere, the deployment stays.
      await deployments.updateDeployment({
        deployment: {
          ...base,
          regions: [
            { region: "eu", replicas: 5 },
            { region: "ap", replicas: 1 },
          ],
          desiredStatus: DeploymentDesiredStatus.STOPPED,
        },
        expectedRevision: 3n,
      });
      assert.deepEqual(await newRows(), [
        { region: "ap", version: 2, op: "delete", id: "web", detail: "demo/web" },
        { region: "eu", version: 3, op: "delete", id: "web", detail: "demo/web" },
      ]);

      // Deleting a stopped deployment: nothing is desired anywhere, so no rows.
      await deployments.deleteDeployment({ id: "web" });
      assert.deepEqual(await newRows(), []);
    });

    test("delete of a running deployment writes tombstones with namespace and name", async () => {
      const deployments = t.client(DeploymentService);
      await deployments.createDeployment({
        deployment: { id: "api", namespace: "shop", image: "ghcr.io/acme/api:v1", regions: [{ region: "eu", replicas: 1 }] },
      });
      await deployments.deleteDeployment({ id: "api", expectedRevision: 1n });
      assert.deepEqual(await newRows(), [
        { region: "eu", version: 4, op: "upsert", id: "api", detail: "ghcr.io/acme/api:v1 x1" },
        { region: "eu", version: 5, op: "delete", id: "api", detail: "shop/api" },
      ]);
      await assert.rejects(deployments.getDeployment({ id: "api" }), (e: ConnectError) => e.code === Code.NotFound);
    });

    test("sentinel standby and back, network policy create/delete", async () => {
      const sentinels = t.client(SentinelService);
      const s = { id: "gw", region: "us", namespace: "edge", image: "sentinel:2", replicas: 2, port: 8080 };
      await sentinels.createSentinel({ sentinel: s });
      await sentinels.updateSentinel({ sentinel: { ...s, desiredState: SentinelDesiredState.STANDBY } });
      await sentinels.updateSentinel({ sentinel: { ...s, desiredState: SentinelDesiredState.RUNNING } });
      const policies = t.client(NetworkPolicyService);
      await policies.createNetworkPolicy({
        networkPolicy: { id: "deny-all", region: "us", namespace: "edge", spec: { endpointSelector: {}, ingress: [] } },
      });
      await policies.deleteNetworkPolicy({ id: "deny-all" });
      assert.deepEqual(await newRows(), [
        { region: "us", version: 3, op: "upsert", id: "gw", detail: "sentinel:2 x2" },
        { region: "us", version: 4, op: "delete", id: "gw", detail: "edge/gw" },
        { region: "us", version: 5, op: "upsert", id: "gw", detail: "sentinel:2 x2" },
        { region: "us", version: 6, op: "upsert", id: "deny-all", detail: "policy" },
        { region: "us", version: 7, op: "delete", id: "deny-all", detail: "edge/deny-all" },
      ]);
    });

    test("failed writes leave nothing", async () => {
      const deployments = t.client(DeploymentService);
      const good = { id: "cache", namespace: "demo", image: "redis:7", regions: [{ region: "eu", replicas: 1 }] };
      await deployments.createDeployment({ deployment: good });
      await newRows();
      const before = await rowCounts(t.store);
      const failures: [() => Promise<unknown>, Code][] = [
        [() => deployments.updateDeployment({ deployment: { ...good, image: "redis:8" }, expectedRevision: 7n }), Code.Aborted],
        [() => deployments.deleteDeployment({ id: "cache", expectedRevision: 2n }), Code.Aborted],
        [() => deployments.createDeployment({ deployment: { ...good, image: "redis:8" } }), Code.AlreadyExists],
        [() => deployments.updateDeployment({ deployment: { ...good, namespace: "other" } }), Code.InvalidArgument],
        [
          () =>
            deployments.updateDeployment({
              deployment: {
                ...good,
                regions: [
                  { region: "eu", replicas: 1 },
                  { region: "mars", replicas: 1 },
                ],
              },
            }),
          Code.NotFound,
        ],
        [
          () =>
            deployments.createDeployment({
              deployment: {
                ...good,
                id: "x",
                regions: [
                  { region: "eu", replicas: 1 },
                  { region: "mars", replicas: 1 },
                ],
              },
            }),
          Code.NotFound,
        ],
        [() => t.client(RegionService).deleteRegion({ name: "eu" }), Code.FailedPrecondition],
      ];
      for (const [call, code] of failures) {
        await assert.rejects(call(), (e: unknown) => ConnectError.from(e).code === code);
      }
      assert.deepEqual(await rowCounts(t.store), before);
      assert.deepEqual(await newRows(), []);
    });

    test("a region without resources can be deleted, with its tokens and outbox", async () => {
      const regions = t.client(RegionService);
      await regions.createRegion({ region: { name: "tmp" } });
      await regions.createAgentToken({ region: "tmp" });
      await regions.deleteRegion({ name: "tmp" });
      await assert.rejects(regions.getRegion({ name: "tmp" }), (e: ConnectError) => e.code === Code.NotFound);
      const tokens = await t.store.database.db.selectFrom("agent_tokens").selectAll().execute();
      assert.equal(tokens.length, 0);
    });
  });
}
