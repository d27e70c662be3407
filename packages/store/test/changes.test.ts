// A Change read from the outbox carries its stored encoding framed once: the bytes every
// watch stream puts into its responses as they are (ctrl's verbatim.ts).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { ChangeEventSchema, DeploymentSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Store } from "../src/index.ts";
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
  });
}
