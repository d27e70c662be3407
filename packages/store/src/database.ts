// Opens the database named by a URL: `sqlite:<path>` (embedded, the default) or `mysql://…`.
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import SQLite from "better-sqlite3";
import { CompiledQuery, type DatabaseConnection, Kysely, MysqlDialect, SqliteDialect } from "kysely";
import { createPool } from "mysql2";
import type { Database } from "./schema.ts";

export const DEFAULT_DATABASE_URL = "sqlite:.flotilla/flotilla.db";

/** What differs between the databases the store runs on; compare by identity (SQLITE, MYSQL). */
export interface Dialect {
  /** For logs and messages. */
  readonly name: "sqlite" | "mysql";
  /**
   * Whether writers lock the rows they depend on (SELECT … FOR UPDATE). SQLite has no row locks
   * and needs none: it runs one writer at a time.
   */
  readonly locksRows: boolean;
}

export const SQLITE: Dialect = Object.freeze({ name: "sqlite", locksRows: false });
export const MYSQL: Dialect = Object.freeze({ name: "mysql", locksRows: true });

export interface OpenDatabase {
  db: Kysely<Database>;
  dialect: Dialect;
  close(): Promise<void>;
}

export function openDatabase(url: string = DEFAULT_DATABASE_URL, options: { poolSize?: number } = {}): OpenDatabase {
  if (url.startsWith("sqlite:")) {
    const path = url.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "");
    if (path === "") throw new Error(`database URL ${JSON.stringify(url)}: missing file path (sqlite:<path>)`);
    if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
    const sqlite = openSqliteConnection(path);
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
    return { db, dialect: SQLITE, close: () => db.destroy() };
  }
  if (url.startsWith("mysql://")) {
    const pool = createPool({
      uri: url,
      connectionLimit: options.poolSize ?? 10,
      // Binary columns stay Buffers; BIGINT versions fit in a double for 2^53 writes.
      supportBigNumbers: false,
      timezone: "Z",
    });
    // Every transaction runs READ COMMITTED, set once per connection rather than per
    // transaction (a round trip each): no statement takes a gap lock, so writers whose new
    // rows interleave in an index cannot deadlock (ObservationRepository.saveReport), and each
    // write reads what has committed, which its compare-and-sets and row locks rely on.
    const onCreateConnection = async (connection: DatabaseConnection) => {
      await connection.executeQuery(CompiledQuery.raw("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"));
    };
    const db = new Kysely<Database>({ dialect: new MysqlDialect({ pool, onCreateConnection }) });
    return { db, dialect: MYSQL, close: () => db.destroy() };
  }
  throw new Error(`database URL ${JSON.stringify(url)}: expected sqlite:<path> or mysql://user:pass@host:port/db`);
}

function openSqliteConnection(path: string): SQLite.Database {
  const sqlite = new SQLite(path);
  // WAL: readers go on while the writer commits.
  sqlite.pragma("journal_mode = WAL");
  sqlite.pragma("synchronous = NORMAL");
  sqlite.pragma("busy_timeout = 5000");
  sqlite.pragma("foreign_keys = ON");
  return sqlite;
}
