// SyncDesiredState's read: every desired resource of a region, ending at one version, with
// nothing held for a client that does not read. The list-then-watch pattern made
// consistent at its end: the region's version v0 is read first, then the resources in
// keyset pages, each a short query of its own when the client asks for it (no transaction,
// no pinned connection), then the version v1, then the outbox changes in (v0, v1]. A
// resource changed during the pages was read somewhere between v0 and v1; its changes
// after v0 follow, so what the client holds at the end is exactly the state at v1.
// The pages carry no secret value unless asked (withSecretEnvSeals, for an agent that holds
// none): a workload's values, sealed for the region's agent, are stored beside its body
// (desired-seals.ts) and fetched by the agent that lacks them (readSecretEnvSeals()); the
// changes in (v0, v1] come from the outbox, seals included.
import { create, toBinary } from "@bufbuild/protobuf";
import { DesiredResourceSchema, ResourceTombstoneSchema, ResourceType, type ResourceTombstone } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { ChangeLog } from "./changes.ts";
import { bodyWithSeal } from "./desired-seals.ts";
import type { OpenDatabase } from "./database.ts";
import { StoreError } from "./errors.ts";
import { ROWS_PER_STATEMENT } from "./outbox.ts";
import type { ReadAheadBudget, Slots } from "./read-ahead.ts";

/** One desired resource as stored: `body` is ctrl.v1.DesiredResource without its version. */
export interface SnapshotRow {
  type: number;
  version: number;
  body: Uint8Array;
}

/**
 * Apply in order: a batch's resources replace earlier ones of the same key, a removal takes
 * one out; `complete` names the version the result equals and what was sent.
 */
export type SnapshotItem = { batch: SnapshotRow[] } | { removals: ResourceTombstone[] } | { complete: { version: number; count: number; removals: number } };

export interface SnapshotLimits {
  /** Rows per page query and per batch at most. */
  batchSize: number;
  /** Encoded bytes per batch at most (clients cap message sizes, e.g. 4 MiB in gRPC). */
  batchBytes: number;
  /**
   * Pages all snapshots together may hold before their clients ask for them. A page is
   * fetched ahead (while the client takes the one before) only while this has room, so a
   * client that stops reading holds at most the page it stopped on beyond it.
   */
  readAhead: ReadAheadBudget;
  /** Bounds the page queries in flight at once, so the pool stays open to other work. */
  queries: Slots;
  /** Gives up waiting for a query slot (the caller went away). */
  signal?: AbortSignal;
  /** Each page's bodies with their workload's seal put back (bodyWithSeal()): for the region's own agent only. */
  withSecretEnvSeals?: boolean;
}

type Key = { resource_type: number; resource_id: string };
type DesiredRow = Key & { version: number; body: Uint8Array; secret_env_sealed?: Uint8Array | null };

/** Batches within `limits`, changes that happened meanwhile, then `complete`. */
export async function* readSnapshot(database: OpenDatabase, regionId: number, limits: SnapshotLimits): AsyncGenerator<SnapshotItem> {
  const { db } = database;
  const query = <T>(run: () => Promise<T>) => limits.queries.run(run, limits.signal);
  const headVersion = async () => {
    const row = await query(() => db.selectFrom("regions").select("head_version").where("id", "=", regionId).executeTakeFirst());
    if (!row) throw new StoreError("not_found", `region ${regionId} no longer exists`, "region");
    return Number(row.head_version);
  };

  const from = await headVersion();
  let count = 0;
  // Keyset over the primary key (region_id, resource_type, resource_id); never OFFSET.
  const page = (after: Key | undefined, limit: number) =>
    query(() =>
      db
        .selectFrom("desired_resources")
        .select(["resource_type", "resource_id", "version", "body"])
        .$if(limits.withSecretEnvSeals === true, (q) => q.select("secret_env_sealed"))
        .where("region_id", "=", regionId)
        .$if(after !== undefined, (q) =>
          q.where((eb) =>
            eb.or([
              eb("resource_type", ">", after!.resource_type),
              eb.and([eb("resource_type", "=", after!.resource_type), eb("resource_id", ">", after!.resource_id)]),
            ]),
          ),
        )
        .orderBy("resource_type")
        .orderBy("resource_id")
        .limit(limit)
        .execute(),
    ) as Promise<DesiredRow[]>;
  for await (const rows of pagesAhead(page, limits)) {
    count += rows.length;
    yield* toBatches(
      rows.map(({ resource_type: type, version, body, secret_env_sealed: sealed }) => ({
        type,
        version: Number(version),
        body: sealed && sealed.length > 0 ? bodyWithSeal(body, sealed) : body,
      })),
      limits.batchBytes,
    );
  }

  const to = await headVersion();
  let removals = 0;
  const changes = new ChangeLog(db);
  for (let cursor = from; cursor < to; ) {
    const read = (await query(() => changes.read(regionId, cursor, limits.batchSize))).filter((c) => c.version <= to);
    if (read[0]?.version !== cursor + 1) {
      throw new StoreError("aborted", `the changes after version ${cursor} of region ${regionId} were pruned while the snapshot was read; run it again`);
    }
    cursor = read.at(-1)!.version;
    // In commit order: consecutive upserts as batches, consecutive deletes as one removal.
    let upserts: SnapshotRow[] = [];
    let deletes: ResourceTombstone[] = [];
    for (const { event } of read) {
      if (event.change.case === "upsert") {
        if (deletes.length > 0) yield { removals: deletes };
        deletes = [];
        const resource = create(DesiredResourceSchema, { ...event.change.value, version: 0n });
        upserts.push({ type: resource.type, version: Number(event.version), body: toBinary(DesiredResourceSchema, resource) });
        count++;
      } else if (event.change.case === "delete") {
        if (upserts.length > 0) yield* toBatches(upserts, limits.batchBytes);
        upserts = [];
        deletes.push(create(ResourceTombstoneSchema, event.change.value));
        removals++;
      }
    }
    yield* toBatches(upserts, limits.batchBytes);
    if (deletes.length > 0) yield { removals: deletes };
  }
  yield { complete: { version: to, count, removals } };
}

/**
 * What a page aims at: each page's row count follows the size of the rows before it. What a
 * client that stops reading holds is about two pages (the one it stopped on, as rows and as
 * the message that waits for it), so pages of large resources are kept small.
 */
const PAGE_BYTES = 256 * 1024;
/** Rows of the first page, before their size is known: a few, in case they are large. */
const FIRST_PAGE_ROWS = 4;

/** A row's body and seal (if read). */
const storedBytes = (row: DesiredRow) => row.body.length + (row.secret_env_sealed?.length ?? 0);

/**
 * The pages of a keyset read in order. While the client takes one page the next is fetched,
 * if the shared budget has room; otherwise only when the client asks for it.
 */
async function* pagesAhead(page: (after: Key | undefined, limit: number) => Promise<DesiredRow[]>, limits: SnapshotLimits): AsyncGenerator<DesiredRow[]> {
  const { readAhead, batchSize } = limits;
  const pageBytes = Math.min(PAGE_BYTES, limits.batchBytes);
  let ahead: { rows: Promise<DesiredRow[]>; bytes: number } | undefined;
  let limit = Math.min(batchSize, FIRST_PAGE_ROWS);
  const fetchAhead = (after: Key) => {
    const held = { rows: page(after, limit), bytes: 0 };
    held.rows.then(
      (rows) => {
        held.bytes = rows.reduce((n, row) => n + storedBytes(row), 0);
        readAhead.take(held.bytes);
      },
      () => {},
    );
    return held;
  };
  const takeAhead = async () => {
    const held = ahead!;
    ahead = undefined;
    const rows = await held.rows;
    readAhead.give(held.bytes);
    return rows;
  };
  try {
    let rows = await page(undefined, limit);
    for (;;) {
      const last = rows.at(-1);
      const more = last !== undefined && rows.length === limit;
      if (more) {
        const rowBytes = rows.reduce((n, row) => n + storedBytes(row), 0) / rows.length;
        limit = Math.max(1, Math.min(batchSize, Math.floor(pageBytes / rowBytes)));
        if (readAhead.used < readAhead.max) ahead = fetchAhead(last);
      }
      yield rows;
      if (!more) return;
      rows = ahead ? await takeAhead() : await page(last, limit);
    }
  } finally {
    // The client went away with a page fetched ahead: give its bytes back once it lands.
    if (ahead) await takeAhead().catch(() => {});
  }
}

/**
 * Rows as batches of at most `maxBytes` encoded (one oversized row still goes alone).
 * Rows stay undecoded: the stream decides whether it needs messages or bytes.
 */
function* toBatches(rows: SnapshotRow[], maxBytes: number): Generator<SnapshotItem> {
  let batch: SnapshotRow[] = [];
  let bytes = 0;
  for (const row of rows) {
    if (batch.length > 0 && bytes + row.body.length > maxBytes) {
      yield { batch };
      batch = [];
      bytes = 0;
    }
    batch.push(row);
    bytes += row.body.length;
  }
  if (batch.length > 0) yield { batch };
}

/**
 * The seals of the deployments `wanted` in region row `regionId`, each only while the region's
 * desired state of it is still at the version asked for (a newer one reaches the agent through
 * the outbox, seal included). A rotation re-seals in place at the same version: the values of
 * a version never change, only the key they are sealed under.
 */
export async function readSecretEnvSeals(
  { db }: OpenDatabase,
  regionId: number,
  wanted: readonly { id: string; version: number }[],
): Promise<{ id: string; sealed: Uint8Array }[]> {
  const versions = new Map(wanted.map(({ id, version }) => [id, version]));
  const found: { id: string; sealed: Uint8Array }[] = [];
  const ids = [...versions.keys()];
  for (let i = 0; i < ids.length; i += ROWS_PER_STATEMENT) {
    const rows = await db
      .selectFrom("desired_resources")
      .select(["resource_id", "version", "secret_env_sealed"])
      .where("region_id", "=", regionId)
      .where("resource_type", "=", ResourceType.DEPLOYMENT)
      .where("resource_id", "in", ids.slice(i, i + ROWS_PER_STATEMENT))
      .execute();
    for (const row of rows) {
      if (row.secret_env_sealed && row.secret_env_sealed.length > 0 && Number(row.version) === versions.get(row.resource_id)) {
        found.push({ id: row.resource_id, sealed: row.secret_env_sealed });
      }
    }
  }
  return found;
}
