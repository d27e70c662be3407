// A page of resources or revisions carries at most `pageBytes` of stored bodies (ctrl's
// --list-page-bytes; at least one object, whatever its size): it ends early with a next page
// token, and the pages together are every object once, in order.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { DeploymentSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { DEFAULT_PAGE_BYTES, Store } from "@flotilla/store";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";

const PAGE_BYTES = 64 * 1024;
/** An environment value of about `bytes` (a deployment's stored body is a little more). */
const deployment = (id: string, bytes: number, image = "app:1") =>
  create(DeploymentSchema, { id, namespace: "demo", image, env: [{ name: "NOISE", value: "x".repeat(bytes) }], regions: [{ region: "east", replicas: 1 }] });

for (const { db, skip } of await testDatabases()) {
  test(`pages end before ${PAGE_BYTES / 1024} KiB of bodies, never before their first object (${db.name})`, { skip }, async () => {
    const { url, cleanup } = await freshStore(db);
    const store = await Store.open(url, { pageBytes: PAGE_BYTES });
    try {
      await store.regions.create("east");
      // 10 of 20 KB (3 to a page), one of 100 KB (a page of its own), 5 small (one page).
      for (let i = 0; i < 10; i++) await store.deployments.create(deployment(`a${i}`, 20_000));
      await store.deployments.create(deployment("b", 100_000));
      for (let i = 0; i < 5; i++) await store.deployments.create(deployment(`c${i}`, 10));
      const pages: string[][] = [];
      let token = "";
      do {
        const page = await store.deployments.list(100, token);
        pages.push(page.items.map((d) => d.id));
        token = page.nextPageToken;
      } while (token !== "");
      assert.deepEqual(pages, [["a0", "a1", "a2"], ["a3", "a4", "a5"], ["a6", "a7", "a8"], ["a9"], ["b"], ["c0", "c1", "c2", "c3", "c4"]]);
      // page_size still ends a page first.
      assert.deepEqual(
        (await store.deployments.list(2, "")).items.map((d) => d.id),
        ["a0", "a1"],
      );

      for (let i = 2; i <= 5; i++) await store.deployments.update(deployment("a0", 20_000, `app:${i}`));
      const first = await store.deployments.revisions("a0", 100, "");
      assert.deepEqual(
        first.items.map((r) => r.revision),
        [5, 4, 3],
      );
      assert.deepEqual(
        (await store.deployments.revisions("a0", 100, first.nextPageToken)).items.map((r) => r.revision),
        [2, 1],
      );
    } finally {
      await store.close();
      await cleanup();
    }
  });
}

test("the default is 256 KiB", () => assert.equal(DEFAULT_PAGE_BYTES, 256 * 1024));
