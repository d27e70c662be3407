// ctrl's /livez and /readyz: ready only while the database answers and its schema is current.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { sql } from "kysely";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl } from "@flotilla/testkit/ctrl";
import { storeBehindProxy, type TcpProxy } from "@flotilla/testkit/tcp-proxy";
import { waitFor } from "@flotilla/testkit/stack";
import { startCtrl, type Ctrl } from "../src/server.ts";

const databases = await testDatabases();
const mysql = databases.find((d) => d.db.name === "mysql")!;

async function probe(url: string, path: string): Promise<{ status: number; text: string }> {
  const response = await fetch(url + path);
  return { status: response.status, text: await response.text() };
}

describe("readiness with the database down and back (mysql, through a proxy)", { skip: mysql.skip }, () => {
  let proxy: TcpProxy;
  let ctrl: Ctrl;
  let close: () => Promise<void>;
  before(async () => {
    const behind = await storeBehindProxy(mysql.db);
    ({ proxy, close } = behind);
    ctrl = await startCtrl({ store: behind.store, adminToken: ADMIN_TOKEN, port: 0, readinessTimeoutMs: 1000 });
  });
  after(async () => {
    await ctrl?.shutdown();
    await close?.();
  });

  test("/readyz fails while the database is cut and recovers; /livez stays ok", async () => {
    assert.deepEqual(await probe(ctrl.url, "/readyz"), { status: 200, text: "ok\n" });
    proxy.cut();
    const down = await probe(ctrl.url, "/readyz");
    assert.equal(down.status, 503);
    assert.match(down.text, /^database unreachable: /);
    assert.deepEqual(await probe(ctrl.url, "/livez"), { status: 200, text: "ok\n" }, "alive: restarting would not bring the database back");
    proxy.restore();
    await waitFor(async () => (await probe(ctrl.url, "/readyz")).status === 200, "readyz 200 with the database back");
  });
});

for (const { db, skip } of databases) {
  describe(`readiness and the schema (${db.name})`, { skip }, () => {
    test("/readyz fails while a migration is not applied, and names it", async () => {
      const t = await startTestCtrl(db);
      const { db: kysely } = t.store.database;
      try {
        assert.deepEqual(await probe(t.url, "/readyz"), { status: 200, text: "ok\n" });
        const [last] = await sql<{ name: string; timestamp: string }>`select name, timestamp from kysely_migration order by name desc limit 1`
          .execute(kysely)
          .then((r) => r.rows);
        // As if a newer ctrl version were rolling out before its migrations ran.
        await sql`delete from kysely_migration where name = ${last!.name}`.execute(kysely);
        assert.deepEqual(await probe(t.url, "/readyz"), { status: 503, text: `database schema behind: migrations ${last!.name} not applied\n` });
        await sql`insert into kysely_migration (name, timestamp) values (${last!.name}, ${last!.timestamp})`.execute(kysely);
        assert.deepEqual(await probe(t.url, "/readyz"), { status: 200, text: "ok\n" });
      } finally {
        await t.close();
      }
    });
  });
}
