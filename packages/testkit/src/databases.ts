// The databases every database test (store, ctrl, agent) runs against: embedded SQLite always,
// MySQL/MariaDB when reachable. With CI=true an unreachable MySQL fails the run instead of skipping.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { createConnection } from "mysql2/promise";
import { storeDecisions } from "@flotilla/ctrl/rollouts";
import { Store, type StoreOptions } from "@flotilla/store";

/** ctrl's rollout decisions, which a store that stages changes is opened with (freshStore passes them). */
export { storeDecisions };

export const MYSQL_URL = process.env.FLOTILLA_TEST_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test";

export interface TestDatabase {
  name: "sqlite" | "mysql";
  /** A fresh, empty database URL; call `drop()` when done. */
  create(): Promise<{ url: string; drop(): Promise<void> }>;
}

let mysqlReachable: Promise<string | undefined> | undefined;

/** Undefined when reachable, else why not. */
function mysqlProblem(): Promise<string | undefined> {
  mysqlReachable ??= createConnection({ uri: MYSQL_URL, connectTimeout: 3000 })
    .then(async (c) => {
      await c.end();
      return undefined;
    })
    .catch((e: Error) => `MySQL at ${MYSQL_URL} unreachable: ${e.message}`);
  return mysqlReachable;
}

const sqlite: TestDatabase = {
  name: "sqlite",
  async create() {
    const dir = mkdtempSync(join(tmpdir(), "flotilla-test-"));
    return { url: `sqlite:${join(dir, "test.db")}`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  },
};

const mysql: TestDatabase = {
  name: "mysql",
  async create() {
    const name = `flotilla_t_${process.pid}_${randomBytes(4).toString("hex")}`;
    const admin = await createConnection({ uri: MYSQL_URL });
    try {
      await admin.query(`CREATE DATABASE \`${name}\``);
    } finally {
      await admin.end();
    }
    const url = new URL(MYSQL_URL);
    url.pathname = `/${name}`;
    return {
      url: url.toString(),
      async drop() {
        const c = await createConnection({ uri: MYSQL_URL });
        try {
          await c.query(`DROP DATABASE IF EXISTS \`${name}\``);
        } finally {
          await c.end();
        }
      },
    };
  },
};

/** The databases to run against, each with `skip` set when it cannot run here. */
export async function testDatabases(): Promise<{ db: TestDatabase; skip: string | false }[]> {
  const problem = await mysqlProblem();
  if (problem && process.env.CI === "true") throw new Error(`${problem} (CI=true: the MySQL tests must run)`);
  return [
    { db: sqlite, skip: false },
    { db: mysql, skip: problem ?? false },
  ];
}

/** A migrated store on a fresh database, closed and dropped by the returned function. */
export async function freshStore(db: TestDatabase, options?: StoreOptions): Promise<{ store: Store; url: string; cleanup(): Promise<void> }> {
  const { url, drop } = await db.create();
  const store = await Store.open(url, { rollouts: storeDecisions, ...options });
  return {
    store,
    url,
    async cleanup() {
      await store.close();
      await drop();
    },
  };
}
