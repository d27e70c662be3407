// SyncDesiredState's read: every desired resource of a region and the region's version,
// from ONE consistent snapshot, so a watch from that version has no gap and no duplicate.
import { sql } from "kysely";
import { openSqliteConnection, type OpenDatabase } from "./database.ts";
import { StoreError } from "./errors.ts";
import { ReadAhead, type ReadAheadBudget, type Slots } from "./read-ahead.ts";

/** One desired resource as stored: `body` is ctrl.v1.DesiredResource without its version. */
export interface SnapshotRow {
  type: number;
  version: number;
  body: Uint8Array;
}

export type SnapshotItem = { batch: SnapshotRow[] } | { complete: { version: number; count: number } };

interface DesiredRow {
  resource_type: number;
  resource_id: string;
  version: number;
  body: Uint8Array;
}

// Keyset over the primary key (region_id, resource_type, resource_id); never OFFSET.
const SQLITE_PAGE = `SELECT resource_type, resource_id, version, body FROM desired_resources
  WHERE region_id = ? AND (resource_type > ? OR (resource_type = ? AND resource_id > ?))
  ORDER BY resource_type, resource_id LIMIT ?`;

/**
 * A page of rows as batches of at most `maxBytes` encoded (one oversized row still goes
 * alone). Rows stay undecoded: the stream decides whether it needs messages or bytes.
 */
function* toBatches(rows: DesiredRow[], maxBytes: number): Generator<SnapshotItem> {
  let batch: SnapshotRow[] = [];
  let bytes = 0;
  for (const row of rows) {
    if (batch.length > 0 && bytes + row.body.length > maxBytes) {
      yield { batch };
      batch = [];
      bytes = 0;
    }
    batch.push({ type: row.resource_type, version: Number(row.version), body: row.body });
    bytes += row.body.length;
  }
  if (batch.length > 0) yield { batch };
}

function regionGone(regionId: number): StoreError {
  return new StoreError("not_found", `region ${regionId} no longer exists`, "region");
}

export interface SnapshotLimits {
  /** Resources per batch at most. */
  batchSize: number;
  /** Encoded bytes per batch at most (clients cap message sizes, e.g. 4 MiB in gRPC). */
  batchBytes: number;
  /**
   * What snapshots may read ahead of their consumers, together. A snapshot within it is
   * read whole and its connection and transaction released before anything is sent.
   */
  readAhead: ReadAheadBudget;
  /** Bounds how many snapshots hold a connection (or read transaction) at once. */
  slots?: Slots;
  /** Gives up waiting for a slot (the caller went away). */
  signal?: AbortSignal;
}

type Push = (item: SnapshotItem) => Promise<void>;

/** Batches within `limits`, then one `complete` item with the snapshot's version. */
export async function* readSnapshot(database: OpenDatabase, regionId: number, limits: SnapshotLimits): AsyncIterable<SnapshotItem> {
  const release = await limits.slots?.acquire(limits.signal);
  const buffer = new ReadAhead<SnapshotItem>(limits.readAhead);
  const push: Push = (item) => buffer.push(item, "batch" in item ? item.batch.reduce((n, row) => n + row.body.length, 0) : 0);
  const read = database.dialect.snapshotsInPool ? mysqlSnapshot : sqliteSnapshot;
  const producer = read(database, regionId, limits, push)
    .finally(() => release?.())
    .then(
      () => buffer.end(),
      (error: unknown) => buffer.end(error),
    );
  try {
    yield* buffer;
  } finally {
    buffer.close();
    await producer;
  }
}

async function sqliteSnapshot(database: OpenDatabase, regionId: number, { batchSize, batchBytes }: SnapshotLimits, push: Push): Promise<void> {
  if (!database.sqlitePath || database.sqlitePath === ":memory:") throw new Error("snapshots need a SQLite file, not :memory:");
  // A connection of its own: the writer's connection is never held across our awaits, and
  // in WAL mode this read transaction keeps its snapshot while writers commit.
  const conn = openSqliteConnection(database.sqlitePath, { readonly: true });
  try {
    conn.prepare("BEGIN").run();
    const head = conn.prepare("SELECT head_version FROM regions WHERE id = ?").get(regionId) as { head_version: number } | undefined;
    if (!head) throw regionGone(regionId);
    const page = conn.prepare(SQLITE_PAGE);
    let count = 0;
    let after: [number, string] = [-1, ""];
    for (;;) {
      const rows = page.all(regionId, after[0], after[0], after[1], batchSize) as DesiredRow[];
      if (rows.length === 0) break;
      count += rows.length;
      const last = rows[rows.length - 1]!;
      after = [last.resource_type, last.resource_id];
      for (const batch of toBatches(rows, batchBytes)) await push(batch);
      if (rows.length < batchSize) break;
    }
    await push({ complete: { version: Number(head.head_version), count } });
    conn.prepare("COMMIT").run();
  } finally {
    conn.close();
  }
}

async function mysqlSnapshot(database: OpenDatabase, regionId: number, { batchSize, batchBytes }: SnapshotLimits, push: Push): Promise<void> {
  // The snapshot needs one pinned connection. The next page's query is sent as soon as a
  // page arrives, before the page is handed on: the database reads page N+1 while the
  // consumer takes page N.
  await database.db.connection().execute(async (conn) => {
    await sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`.execute(conn);
    await sql`START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY`.execute(conn);
    try {
      const { rows: heads } = await sql<{ head_version: number }>`SELECT head_version FROM regions WHERE id = ${regionId}`.execute(conn);
      if (!heads[0]) throw regionGone(regionId);
      const page = (after: [number, string]) => {
        const rows = sql<DesiredRow>`SELECT resource_type, resource_id, version, body FROM desired_resources
          WHERE region_id = ${regionId} AND (resource_type > ${after[0]} OR (resource_type = ${after[0]} AND resource_id > ${after[1]}))
          ORDER BY resource_type, resource_id LIMIT ${batchSize}`
          .execute(conn)
          .then((result) => result.rows);
        // Awaited below, unless the consumer went away first: then only ROLLBACK waits for it.
        rows.catch(() => {});
        return rows;
      };
      let count = 0;
      let next: Promise<DesiredRow[]> | undefined = page([-1, ""]);
      while (next) {
        const rows: DesiredRow[] = await next;
        const last = rows.at(-1);
        next = last && rows.length === batchSize ? page([last.resource_type, last.resource_id]) : undefined;
        count += rows.length;
        for (const batch of toBatches(rows, batchBytes)) await push(batch);
      }
      await push({ complete: { version: Number(heads[0].head_version), count } });
    } finally {
      // Read-only: rolling back ends the snapshot and returns a clean connection to the pool.
      await sql`ROLLBACK`.execute(conn);
    }
  });
}
