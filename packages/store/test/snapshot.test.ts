// A snapshot read in pages on demand, with writes committed between its pages: what the
// reader holds at `complete` is exactly the region's state at the version it names.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { create, fromBinary } from "@bufbuild/protobuf";
import { DeploymentSchema, DesiredResourceSchema, type DesiredResource } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { ReadAheadBudget, readSnapshot, Slots, type SnapshotItem, type Store } from "@flotilla/store";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";
import { desiredAtVersion, keyOf, stateDiff } from "@flotilla/testkit/follower";

const spec = (id: string, image: string) => create(DeploymentSchema, { id, namespace: "ns", image, regions: [{ region: "east", replicas: 1 }] });

/** Reads the snapshot, running `between(n)` after the n-th item; returns the state it leaves and `complete`. */
async function readWith(store: Store, readAheadBytes: number, between: (n: number) => Promise<void>) {
  const { id } = await store.regions.resolve("east");
  const state = new Map<string, DesiredResource>();
  let complete: Extract<SnapshotItem, { complete: unknown }>["complete"] | undefined;
  let n = 0;
  const limits = { batchSize: 5, batchBytes: 1 << 20, readAhead: new ReadAheadBudget(readAheadBytes), queries: new Slots(1) };
  for await (const item of readSnapshot(store.database, id, limits)) {
    if ("batch" in item) {
      for (const row of item.batch) {
        const resource = fromBinary(DesiredResourceSchema, row.body);
        resource.version = BigInt(row.version);
        state.set(keyOf(resource), resource);
      }
    } else if ("removals" in item) for (const r of item.removals) state.delete(keyOf(r));
    else complete = item.complete;
    await between(++n);
  }
  return { state, complete: complete! };
}

for (const { db, skip } of await testDatabases()) {
  for (const readAhead of [0, 1 << 20]) {
    describe(`snapshot read in pages (${db.name}, ${readAhead ? "a page fetched ahead" : "no read-ahead"})`, { skip }, () => {
      test("updates, deletes, re-creates and creates behind, at and ahead of the cursor, and after the last page: exact state at the version named", async () => {
        const { store, cleanup } = await freshStore(db);
        try {
          await store.regions.create("east");
          for (let i = 0; i < 30; i++) await store.deployments.create(spec(`d${String(i).padStart(2, "0")}`, "app:1"));
          const { headVersion: before } = await store.regions.resolve("east");
          const { state, complete } = await readWith(store, readAhead, async (n) => {
            if (n === 1) {
              // d00–d04 were sent.
              await store.deployments.update(spec("d01", "app:2"));
              await store.deployments.delete("d02");
              await store.deployments.update(spec("d20", "app:2"));
              await store.deployments.delete("d21");
              await store.deployments.create(spec("d99", "app:1"));
              await store.deployments.create(spec("a00", "app:1"));
            } else if (n === 3) {
              await store.deployments.delete("d03");
              await store.deployments.create(spec("d03", "app:3"));
              await store.deployments.update(spec("d01", "app:3"));
              await store.deployments.delete("d12");
            } else if (n === 6) {
              // The last page was sent: changes between it and the final version.
              await store.deployments.delete("d04");
              await store.deployments.update(spec("d05", "app:4"));
            }
          });
          assert.equal(complete.version, before + 12);
          assert.ok(complete.removals > 0);
          assert.equal(stateDiff(state, await desiredAtVersion(store, "east", complete.version)), "");
          assert.equal(state.size, 28);
        } finally {
          await store.close();
          await cleanup();
        }
      });
    });
  }

  describe(`snapshot read in pages (${db.name}): bounds`, { skip }, () => {
    test("changes pruned from the outbox before the snapshot read them: ABORTED, run it again", async () => {
      const { store, cleanup } = await freshStore(db);
      try {
        await store.regions.create("east");
        for (let i = 0; i < 12; i++) await store.deployments.create(spec(`d${String(i).padStart(2, "0")}`, "app:1"));
        const read = readWith(store, 0, async (n) => {
          if (n !== 1) return;
          for (let i = 0; i < 3; i++) await store.deployments.update(spec("d00", `app:${i + 2}`));
          await store.changes.prune({ maxAgeMs: 0, maxRows: 1 }, Date.now());
        });
        await assert.rejects(read, (error: Error & { code?: string }) => error.code === "aborted" && /pruned while the snapshot was read/.test(error.message));
      } finally {
        await store.close();
        await cleanup();
      }
    });

    test("a reader that stops holds no query slot: another snapshot reads meanwhile", async () => {
      const { store, cleanup } = await freshStore(db);
      try {
        await store.regions.create("east");
        for (let i = 0; i < 12; i++) await store.deployments.create(spec(`d${i}`, "app:1"));
        const { id } = await store.regions.resolve("east");
        const limits = { batchSize: 5, batchBytes: 1 << 20, readAhead: new ReadAheadBudget(1 << 20), queries: new Slots(1) };
        const stalled = readSnapshot(store.database, id, limits);
        assert.ok("batch" in (await stalled.next()).value!);
        // The stalled reader sits on its first page, one page fetched ahead, and no slot.
        let items = 0;
        for await (const _ of readSnapshot(store.database, id, limits)) items++;
        assert.equal(items, 4); // three pages, complete
        assert.equal(limits.readAhead.used > 0, true);
        await stalled.return(undefined);
        assert.equal(limits.readAhead.used, 0, "the page fetched ahead was given back");
      } finally {
        await store.close();
        await cleanup();
      }
    });
  });
}
