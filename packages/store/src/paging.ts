// Opaque keyset page tokens: the last key of the previous page. Never OFFSET.
import { StoreError } from "./errors.ts";

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

/** Reads one row more than the page to know whether another page follows. */
export function toPage<Row, T>(rows: Row[], size: number, key: (row: Row) => string, map: (row: Row) => T): Page<T> {
  const more = rows.length > size;
  const pageRows = more ? rows.slice(0, size) : rows;
  return { items: pageRows.map(map), nextPageToken: more ? encodePageToken(key(pageRows[pageRows.length - 1]!)) : "" };
}
