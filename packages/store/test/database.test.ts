// Every transaction on MySQL/MariaDB runs READ COMMITTED, on every pooled connection: the
// level is the connection's (set when the pool opens it), not each transaction's statement.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { sql } from "kysely";
import type { Store } from "../src/index.ts";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";

const [, mysql] = await testDatabases();

describe("transaction isolation (mysql)", { skip: mysql!.skip }, () => {
  let store: Store;
  let cleanup: () => Promise<void>;
  before(async () => {
    ({ store, cleanup } = await freshStore(mysql!.db));
  });
  after(() => cleanup());

  test("READ COMMITTED in transactions on every connection of the pool", async () => {
    // More at once than the pool's 10 connections, each held until all have read: every connection is used.
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let reading = 0;
    const levels = await Promise.all(
      Array.from({ length: 12 }, () =>
        store.database.db.transaction().execute(async (tx) => {
          // MySQL 8 names it transaction_isolation; MariaDB before 11.1 only tx_isolation.
          const { rows } = await sql<{ level: string }>`SELECT @@SESSION.tx_isolation AS level`
            .execute(tx)
            .catch(() => sql<{ level: string }>`SELECT @@SESSION.transaction_isolation AS level`.execute(tx));
          if (++reading === 10) release();
          await Promise.race([held, new Promise((resolve) => setTimeout(resolve, 2000))]);
          return rows[0]!.level;
        }),
      ),
    );
    assert.deepEqual(new Set(levels), new Set(["READ-COMMITTED"]));
  });
});
