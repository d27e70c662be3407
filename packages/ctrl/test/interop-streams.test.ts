// The agent-facing streams through second implementations: `buf curl` (Connect, gRPC,
// gRPC-Web) and @grpc/grpc-js, including the ARCHITECTURE §8 calls as written.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { AUTH, bufCurl, grpcJsServerStream, jsonDocuments, BUF_PROTOCOLS as PROTOCOLS } from "@flotilla/testkit/interop";

for (const { db, skip } of await testDatabases()) {
  describe(`streaming interop (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    before(async () => {
      t = await startTestCtrl(db, { stream: { bookmarkIntervalMs: 500 } });
      await t.store.regions.create("local");
      const deployments = t.client(DeploymentService);
      for (const id of ["a", "b", "c"]) {
        await deployments.createDeployment({ deployment: { id, namespace: "demo", image: "nginx:1.27", regions: [{ region: "local", replicas: 1 }] } });
      }
      await deployments.deleteDeployment({ id: "b" });
    });
    after(() => t.close());

    for (const [protocol, flags] of Object.entries(PROTOCOLS)) {
      test(`buf curl SyncDesiredState and WatchDeploymentChanges over ${protocol}`, async () => {
        const sync = await bufCurl([...flags, "-H", AUTH, `${t.url}/ctrl.v1.ClusterService/SyncDesiredState`, "-d", '{"region":"local"}']);
        assert.equal(sync.code, 0, sync.stderr);
        const docs = jsonDocuments(sync.stdout) as any[];
        assert.deepEqual(docs.at(-1), { complete: { version: "4", resourceCount: "2" } });
        assert.deepEqual(
          docs.slice(0, -1).flatMap((d) => d.batch.resources.map((r: any) => r.id)),
          ["a", "c"],
        );

        // A watch never ends by itself: buf curl is stopped after a while, its output kept.
        const watch = await bufCurl(
          [...flags, "-H", AUTH, `${t.url}/ctrl.v1.ClusterService/WatchDeploymentChanges`, "-d", '{"region":"local","versionLastSeen":"2"}'],
          2500,
        );
        const messages = jsonDocuments(watch.stdout) as any[];
        const events = messages.flatMap((m) => m.events ?? []);
        assert.deepEqual(
          events.map((e: any) => [e.version, e.upsert ? "upsert" : "delete"]),
          [
            ["3", "upsert"],
            ["4", "delete"],
          ],
        );
        assert.deepEqual(events[1].delete, { type: "RESOURCE_TYPE_DEPLOYMENT", id: "b", namespace: "demo", name: "b" });
        assert.ok(
          messages.some((m) => !m.events && m.version === "4"),
          `a bookmark in ${watch.stdout}`,
        );
      });
    }

    test("buf curl watch with no versionLastSeen follows live changes only", async () => {
      const eventsIn = (stdout: string) => (jsonDocuments(stdout) as any[]).flatMap((m) => m.events ?? []);
      const open = async () => (await t.ctrl.metrics.watchStreams.get()).values.reduce((n, v) => n + v.value, 0);
      const until = async (what: string, check: () => Promise<boolean>) => {
        const deadline = Date.now() + 30_000;
        while (!(await check())) {
          assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
          await sleep(20);
        }
      };
      // The earlier tests' streams end once ctrl notices that their clients went away.
      await until("the earlier streams to end", async () => (await open()) === 0);
      const watching = bufCurl(
        ["--http2-prior-knowledge", "-H", AUTH, `${t.url}/ctrl.v1.ClusterService/WatchDeploymentChanges`, "-d", '{"region":"local"}'],
        60_000,
        (stdout) => eventsIn(stdout).some((e: any) => e.upsert?.id === "live"),
      );
      // The stream starts at the head it read before counting itself open: write only after that.
      await until("buf curl's stream", async () => (await open()) > 0);
      await t
        .client(DeploymentService)
        .createDeployment({ deployment: { id: "live", namespace: "demo", image: "nginx:1.27", regions: [{ region: "local", replicas: 1 }] } });
      const events = eventsIn((await watching).stdout);
      assert.deepEqual(
        events.map((e: any) => e.upsert?.id),
        ["live"],
      );
    });

    test("@grpc/grpc-js streams both RPCs", async () => {
      const sync = grpcJsServerStream(t.url, ClusterService.method.syncDesiredState, { region: "local" }, ADMIN_TOKEN);
      const messages: any[] = [];
      await new Promise<void>((resolve, reject) => {
        sync.stream.on("data", (m) => messages.push(m));
        sync.stream.on("end", resolve);
        sync.stream.on("error", reject);
      });
      sync.close();
      const complete = messages.at(-1).message;
      assert.equal(complete.case, "complete");
      const version = complete.value.version as bigint;
      const watch = grpcJsServerStream(t.url, ClusterService.method.watchDeploymentChanges, { region: "local", versionLastSeen: version - 2n }, ADMIN_TOKEN);
      const first = await new Promise<any>((resolve, reject) => {
        watch.stream.once("data", resolve);
        watch.stream.once("error", reject);
      });
      watch.close();
      assert.deepEqual(
        first.events.map((e: any) => e.version),
        [version - 1n, version],
      );
    });
  });
}
