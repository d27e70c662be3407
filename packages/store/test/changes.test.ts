// A Change read from the outbox carries its stored encoding framed once: the bytes every
// watch stream puts into its responses as they are (ctrl's verbatim.ts). A commit hands its
// listeners the outbox rows it wrote, the same changes a read gives, unless they are too many.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { ChangeEventSchema, DeploymentSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { changeOf, type CommittedChange, type Store } from "../src/index.ts";
import { COMMITTED_CHANGES_MAX } from "../src/outbox.ts";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";

for (const { db, skip } of await testDatabases()) {
  describe(`outbox changes (${db.name})`, { skip }, () => {
    let store: Store;
    let cleanup: () => Promise<void>;

    before(async () => {
      ({ store, cleanup } = await freshStore(db));
      await store.regions.create("r1");
    });
    after(() => cleanup());

    test("read gives each change's version, decoded event and length-prefixed stored encoding", async () => {
      const deployment = (image: string) =>
        create(DeploymentSchema, { id: "web", namespace: "shop", image, port: 8080, regions: [{ region: "r1", replicas: 1 }] });
      await store.deployments.create(deployment("app:1"));
      await store.deployments.update(deployment("app:2"));
      const region = await store.regions.resolve("r1");
      const changes = await store.changes.read(region.id, 0, 10);
      assert.ok(region.headVersion >= 2 && region.headVersion <= 10);
      assert.deepEqual(
        changes.map((c) => c.version),
        Array.from({ length: region.headVersion }, (_, i) => i + 1),
      );
      for (const change of changes) {
        assert.equal(Number(change.event.version), change.version);
        const reader = new BinaryReader(change.bytes);
        const encoded = reader.bytes();
        assert.equal(reader.pos, change.bytes.length, "nothing after the one framed message");
        assert.deepEqual(fromBinary(ChangeEventSchema, encoded), change.event);
        assert.deepEqual(encoded, toBinary(ChangeEventSchema, change.event));
      }
    });

    test("a commit hands its listeners the rows it wrote: the changes a read gives", async () => {
      await store.regions.create("r2");
      const commits: { regionIds: number[]; written: readonly CommittedChange[] | undefined }[] = [];
      const stop = store.onCommit((regionIds, written) => commits.push({ regionIds, written }));
      try {
        const placed = (id: string, image: string, regions: string[]) =>
          create(DeploymentSchema, { id, namespace: "shop", image, port: 8080, regions: regions.map((region) => ({ region, replicas: 1 })) });
        await store.deployments.create(placed("two-regions", "app:1", ["r1", "r2"]));
        await store.deployments.delete("two-regions");
        const [r1, r2] = await Promise.all([store.regions.resolve("r1"), store.regions.resolve("r2")]);
        assert.equal(commits.length, 2);
        for (const { regionIds, written } of commits) {
          assert.deepEqual([...regionIds].sort(), [r1.id, r2.id].sort());
          assert.equal(written?.length, 2, "one row per region");
          for (const row of written!) {
            const [read] = await store.changes.read(row.regionId, row.version - 1, 1);
            assert.deepEqual(changeOf(row.body), read);
          }
        }
        // A transaction past COMMITTED_CHANGES_MAX rows hands over none: its listeners read them.
        commits.length = 0;
        const regions = Array.from({ length: COMMITTED_CHANGES_MAX + 1 }, (_, i) => `many-${i}`);
        for (const region of regions) await store.regions.create(region);
        commits.length = 0;
        await store.deployments.create(placed("everywhere", "app:1", regions));
        assert.equal(commits.length, 1);
        assert.equal(commits[0]!.written, undefined);
      } finally {
        stop();
      }
    });
  });
}
