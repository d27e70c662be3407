// The schema's migrations (the repository's top-level migrations/): the index the store
// applies names every migration file, and they bring an empty database to the current schema.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Kysely } from "kysely";
import { MIGRATIONS } from "../../../migrations/index.ts";
import { pendingMigrations } from "../src/index.ts";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";

const MIGRATIONS_DIR = fileURLToPath(new URL("../../../migrations/", import.meta.url));

test("migrations/index.ts lists every migration file of migrations/, under its file name", () => {
  const files = readdirSync(MIGRATIONS_DIR)
    .filter((file) => file.endsWith(".ts") && file !== "index.ts")
    .map((file) => file.slice(0, -".ts".length));
  assert.ok(files.length > 0, "migrations/ has migrations");
  assert.deepEqual(Object.keys(MIGRATIONS).sort(), files.sort());
});

for (const { db, skip } of await testDatabases()) {
  test(`every migration applies to an empty database (${db.name})`, { skip }, async (t) => {
    const { store, cleanup } = await freshStore(db);
    t.after(cleanup);
    assert.deepEqual(await pendingMigrations(store.database.db), [], "the store applies every migration when it opens");
    const applied = await (store.database.db as Kysely<any>).selectFrom("kysely_migration").select("name").orderBy("name").execute();
    assert.deepEqual(
      applied.map((row) => row.name),
      Object.keys(MIGRATIONS).sort(),
    );
  });
}
