// Opaque keyset page tokens: the last key of the previous page. Never OFFSET.
import { sql, type Kysely, type SelectQueryBuilder } from "kysely";
import { StoreError } from "./errors.ts";
import type { Database } from "./schema.ts";

export const DEFAULT_PAGE_SIZE = 100;
export const MAX_PAGE_SIZE = 1000;

export interface Page<T> {
  items: T[];
  nextPageToken: string;
}

export function encodePageToken(lastKey: string): string {
  return Buffer.from(`k:${lastKey}`).toString("base64url");
}

/** The key to continue after, or undefined for the first page. */
export function decodePageToken(token: string): string | undefined {
  if (token === "") return undefined;
  const decoded = /^[A-Za-z0-9_-]+$/.test(token) ? Buffer.from(token, "base64url").toString() : "";
  if (!decoded.startsWith("k:")) throw new StoreError("invalid_argument", "page_token: not a token from a previous page", "page_token");
  return decoded.slice(2);
}

export function pageSize(requested: number): number {
  if (requested < 0) throw new StoreError("invalid_argument", "page_size: must not be negative", "page_size");
  return Math.min(requested || DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
}

/**
 * The stored bodies one page of resources or revisions carries at most (one row, whatever its
 * size, always): a page is ended early, with a next page token, rather than past it (AIP-158
 * lets a page be shorter than page_size). Without it a page was page_size bodies of up to the
 * 1 MiB write limit: with 150 deployments of 60 KB each ListDeployments was 6 MB of rows,
 * messages and an encoded response, and the authenticated fuzz (16 requests at a time) took
 * ctrl's RSS +150 and +163 MiB above where the burst started (+174 MiB in another run), where on
 * an empty database it peaks at about +55. With pages of at most 1 MiB: +84 and +78 MiB; 256 KiB:
 * +62 MiB, as on an empty database (bench/diag/burst-memory.ts --after-stalls 50). A page of
 * ordinary deployments (1 to 2 KB) is far below it; gRPC clients refuse messages over 4 MiB by
 * default anyway. ctrl's --list-page-bytes.
 */
export const DEFAULT_PAGE_BYTES = 256 * 1024;

/**
 * The rows of `page` (a query ordered by `order` and limited to a page and one row more) whose
 * bodies begin within `pageBytes`: the database leaves the rest out, so what is read stays
 * within a page's bytes plus one body (the row that tells another page follows).
 */
export function bodiesWithin<Row>(
  db: Kysely<Database>,
  page: SelectQueryBuilder<Database, any, Row>,
  order: string,
  direction: "asc" | "desc",
  pageBytes: number,
): Promise<Row[]> {
  const window = sql`OVER (ORDER BY ${sql.ref(order)} ${sql.raw(direction)})`;
  const sized = db
    .selectFrom(page.as("page"))
    .selectAll()
    .select([sql<number>`SUM(LENGTH(body)) ${window} - LENGTH(body)`.as("before_bytes"), sql<number>`ROW_NUMBER() ${window}`.as("row_number")]);
  // The second row tells another page follows when the first alone is past pageBytes.
  return (db.selectFrom(sized.as("sized")) as any)
    .selectAll()
    .where((eb: any) => eb.or([eb("before_bytes", "<=", pageBytes), eb("row_number", "<=", 2)]))
    .orderBy(order, direction)
    .execute();
}

/**
 * Reads one row more than the page to know whether another page follows. With `bytes`, the
 * page also ends before the row that would take its bodies past `bytes.max` (never before its
 * first row).
 */
export function toPage<Row, T>(
  rows: Row[],
  size: number,
  key: (row: Row) => string,
  map: (row: Row) => T,
  bytes?: { of: (row: Row) => number; max: number },
): Page<T> {
  let fits = Math.min(rows.length, size);
  if (bytes) {
    let total = 0;
    for (let i = 0; i < fits; i++) {
      total += bytes.of(rows[i]!);
      if (i > 0 && total > bytes.max) fits = i;
    }
  }
  const more = rows.length > fits;
  const pageRows = more ? rows.slice(0, fits) : rows;
  return { items: pageRows.map(map), nextPageToken: more ? encodePageToken(key(pageRows[pageRows.length - 1]!)) : "" };
}
