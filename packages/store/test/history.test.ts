// The bounds of history: only the last `revisionHistoryLimit` revisions of an object are kept
// (ctrl's --revision-history-limit), a deleted object's go with it, and audit events older
// than the retention are pruned (--audit-max-age).
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { DeploymentSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { Store } from "@flotilla/store";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";

const [{ db }] = await testDatabases();

test("only the last N revisions of an object are kept; a rollback beyond them is NOT_FOUND; delete drops them", async () => {
  const { url, cleanup } = await freshStore(db);
  const store = await Store.open(url, { revisionHistoryLimit: 3 });
  try {
    await store.regions.create("east");
    const spec = (image: string) => create(DeploymentSchema, { id: "web", namespace: "demo", image, regions: [{ region: "east", replicas: 1 }] });
    await store.deployments.create(spec("app:1"));
    for (let i = 2; i <= 5; i++) await store.deployments.update(spec(`app:${i}`));
    const kept = (await store.deployments.revisions("web", 100, "")).items.map((r) => r.revision);
    assert.deepEqual(kept, [5, 4, 3]);
    await assert.rejects(store.deployments.rollback("web", 1, undefined), /has no revision 1 \(kept: the last 3\)/);
    await store.deployments.delete("web");
    const rows = await store.database.db.selectFrom("resource_revisions").select("revision").execute();
    assert.deepEqual(rows, []);
  } finally {
    await store.close();
    await cleanup();
  }
});

test("audit events older than the retention are pruned, newer ones stay", async () => {
  const { url, cleanup } = await freshStore(db);
  const store = await Store.open(url);
  try {
    const record = (at: number) =>
      store.audit.record(
        { author: { actor: "admin", message: "" }, action: "CreateRegion", objectKind: "region", objectId: `r${at}`, revision: 0 },
        undefined,
        at,
      );
    const now = Date.now();
    await record(now - 10_000);
    await record(now - 1_000);
    assert.equal(await store.audit.prune(5_000, now), 1);
    assert.deepEqual(
      (await store.audit.list({}, 100, "")).items.map((e) => e.objectId),
      [`r${now - 1_000}`],
    );
  } finally {
    await store.close();
    await cleanup();
  }
});

test("a region's desired state carries the revision its spec was written from; a revision that leaves that spec as it was writes nothing there", async () => {
  const { url, cleanup } = await freshStore(db);
  const store = await Store.open(url);
  try {
    await store.regions.create("east");
    await store.regions.create("west");
    const ids = await store.regions.idsByName(["east", "west"]);
    const spec = (westReplicas: number, image = "app:1") =>
      create(DeploymentSchema, {
        id: "web",
        namespace: "demo",
        image,
        regions: [
          { region: "east", replicas: 1 },
          { region: "west", replicas: westReplicas },
        ],
      });
    const revisionIn = async (region: number) => {
      const changes = await store.changes.read(region, 0, 100);
      const last = changes.at(-1)!.event.change;
      assert.equal(last.case, "upsert");
      return { changes: changes.length, revision: last.value.spec.case === "deployment" ? last.value.spec.value.revision : -1n };
    };
    await store.deployments.create(spec(1));
    await store.deployments.update(spec(2));
    assert.deepEqual(await revisionIn(ids.get("east")!), { changes: 1, revision: 1n }, "east's spec did not change: its pods keep revision 1");
    assert.deepEqual(await revisionIn(ids.get("west")!), { changes: 2, revision: 2n });
    await store.deployments.update(spec(2, "app:2"));
    assert.deepEqual(await revisionIn(ids.get("east")!), { changes: 2, revision: 3n });
  } finally {
    await store.close();
    await cleanup();
  }
});

test("rollout analysis measurements are kept once per key and pruned by age", async () => {
  const { url, cleanup } = await freshStore(db);
  const store = await Store.open(url);
  try {
    const now = Date.now();
    const at = (index: number, takenAt: number) => ({
      rolloutId: "web-2",
      wave: 0,
      bakeStart: 1,
      analysis: "errors",
      region: "east",
      index,
      revision: 2,
      takenAt,
      value: 0,
    });
    assert.equal(await store.analysis.record([at(0, now - 10_000), at(1, now - 1_000)], ["web"], now), 2);
    assert.equal(await store.analysis.record([at(1, now)], ["web"], now), 0, "a key kept already");
    assert.equal(await store.analysis.prune(5_000, now), 1);
    assert.deepEqual(
      (await store.analysis.ofBakes([{ rolloutId: "web-2", wave: 0, bakeStart: 1 }])).map((m) => [m.index, m.takenAt]),
      [[1, now - 1_000]],
    );
    // A page of rollouts shown asks for many bakes at once: more than one statement takes.
    const many = Array.from({ length: 1500 }, (_, i) => ({ rolloutId: `other-${i}`, wave: 0, bakeStart: 1 }));
    assert.deepEqual(
      (await store.analysis.ofBakes([...many, { rolloutId: "web-2", wave: 0, bakeStart: 1 }])).map((m) => m.index),
      [1],
    );
  } finally {
    await store.close();
    await cleanup();
  }
});
