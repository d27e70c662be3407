// Create / Get / List / Update / Delete of the operator-owned resources. Each write is one
// transaction: the resource row, its placements, region versions and outbox rows.
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { clone, equals, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { Kysely } from "kysely";
import type { Dialect } from "./database.ts";
import { StoreError } from "./errors.ts";
import type { ResourceKind } from "./kinds.ts";
import { writeDesired, type Tx } from "./outbox.ts";
import { isDuplicateKey } from "./regions.ts";
import { decodePageToken, pageSize, toPage, type Page } from "./paging.ts";
import type { Database, ResourceTable } from "./schema.ts";

/** Called after a write commits, with the regions whose version moved. */
export type CommitListener = (regionIds: number[]) => void;

export class ResourceRepository<Desc extends DescMessage> {
  readonly kind: ResourceKind<Desc>;
  readonly #db: Kysely<Database>;
  readonly #dialect: Dialect;
  readonly #onCommit: CommitListener;

  constructor(db: Kysely<Database>, dialect: Dialect, kind: ResourceKind<Desc>, onCommit: CommitListener) {
    this.#db = db;
    this.#dialect = dialect;
    this.kind = kind;
    this.#onCommit = onCommit;
  }

  /** Creates the resource; the same id with an equal body returns the stored one unchanged. */
  async create(resource: MessageShape<Desc>): Promise<MessageShape<Desc>> {
    const input = this.#withoutOutput(resource);
    const id = this.#id(input);
    return this.#write(async (tx, now) => {
      const existing = await this.#lockRow(tx, id);
      if (existing) {
        const stored = this.#fromRow(existing);
        if (equals(this.kind.schema, this.#withoutOutput(stored), input)) return { result: stored, regions: [] };
        throw new StoreError("already_exists", `${this.kind.field} ${JSON.stringify(id)} already exists with a different body`, `${this.kind.field}.id`);
      }
      const regionIds = await this.#resolveRegions(tx, input);
      const row: ResourceTable = { id, revision: 1, body: toBinary(this.kind.schema, input), create_time: now, update_time: now };
      await tx.insertInto(this.kind.table).values(row).execute();
      const regions = await this.#writeDesired(tx, id, input, regionIds, now);
      await this.#writePlacements(tx, id, regionIds, false);
      return { result: this.#fromRow(row), regions };
    });
  }

  async get(id: string): Promise<MessageShape<Desc>> {
    const row = await this.#db.selectFrom(this.kind.table).selectAll().where("id", "=", id).executeTakeFirst();
    if (!row) throw this.#notFound(id);
    return this.#fromRow(row);
  }

  async list(requestedPageSize: number, pageToken: string): Promise<Page<MessageShape<Desc>>> {
    const size = pageSize(requestedPageSize);
    const after = decodePageToken(pageToken);
    let query = this.#db
      .selectFrom(this.kind.table)
      .selectAll()
      .orderBy("id")
      .limit(size + 1);
    if (after !== undefined) query = query.where("id", ">", after);
    return toPage(
      await query.execute(),
      size,
      (r) => r.id,
      (r) => this.#fromRow(r),
    );
  }

  /**
   * Replaces the resource's fields. With expectedRevision set, a different current revision
   * is ABORTED. An update that changes nothing keeps the revision and writes nothing.
   */
  async update(resource: MessageShape<Desc>, expectedRevision?: bigint): Promise<MessageShape<Desc>> {
    const input = this.#withoutOutput(resource);
    const id = this.#id(input);
    return this.#write(async (tx, now) => {
      const existing = await this.#lockRow(tx, id);
      if (!existing) throw this.#notFound(id);
      this.#checkRevision(existing, expectedRevision);
      const stored = this.#withoutOutput(this.#fromRow(existing));
      for (const field of this.kind.immutable) {
        if (fieldOf(stored, field) !== fieldOf(input, field))
          throw new StoreError("invalid_argument", `${this.kind.field}.${field}: is immutable`, `${this.kind.field}.${field}`);
      }
      if (equals(this.kind.schema, stored, input)) return { result: this.#fromRow(existing), regions: [] };
      const regionIds = await this.#resolveRegions(tx, input);
      const row: ResourceTable = {
        id,
        revision: Number(existing.revision) + 1,
        body: toBinary(this.kind.schema, input),
        create_time: Number(existing.create_time),
        update_time: now,
      };
      await tx.updateTable(this.kind.table).set(row).where("id", "=", id).execute();
      const regions = await this.#writeDesired(tx, id, input, regionIds, now);
      await this.#writePlacements(tx, id, regionIds, true);
      return { result: this.#fromRow(row), regions };
    });
  }

  /** Deletes the resource; every region it was desired in gets a tombstone. */
  async delete(id: string, expectedRevision?: bigint): Promise<void> {
    await this.#write(async (tx, now) => {
      const existing = await this.#lockRow(tx, id);
      if (!existing) throw this.#notFound(id);
      this.#checkRevision(existing, expectedRevision);
      await tx.deleteFrom(this.kind.table).where("id", "=", id).execute();
      const regions = await writeDesired(tx, this.#dialect, this.kind.type, id, new Map(), now);
      await this.#writePlacements(tx, id, new Map(), true);
      await tx.deleteFrom("observations").where("resource_type", "=", this.kind.type).where("resource_id", "=", id).execute();
      return { result: undefined, regions };
    });
  }

  /** Desired state of `resource` in its regions, region rows locked first (placements reference them). */
  #writeDesired(tx: Tx, id: string, resource: MessageShape<Desc>, regionIds: ReadonlyMap<string, number>, now: number): Promise<number[]> {
    return writeDesired(tx, this.#dialect, this.kind.type, id, this.kind.desired(resource, regionIds), now, regionIds.values());
  }

  async #write<T>(body: (tx: Tx, now: number) => Promise<{ result: T; regions: number[] }>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        // READ COMMITTED: every read that decides a write is a locking read anyway, and it
        // keeps InnoDB from taking gap locks that would serialize unrelated creates.
        const { result, regions } = await this.#db
          .transaction()
          .setIsolationLevel("read committed")
          .execute((tx) => body(tx, Date.now()));
        if (regions.length > 0) this.#onCommit(regions);
        return result;
      } catch (error) {
        // Two creates of one id race past the existence check; the loser retries and then
        // sees the winner's row. Deadlocks are not expected (lock order), but are retried too.
        if (attempt >= 3 || !isRetryable(error)) throw error;
        await new Promise((r) => setTimeout(r, Math.random() * 10 * attempt));
      }
    }
  }

  async #lockRow(tx: Tx, id: string): Promise<ResourceTable | undefined> {
    let query = tx.selectFrom(this.kind.table).selectAll().where("id", "=", id);
    if (this.#dialect.locksRows) query = query.forUpdate();
    return query.executeTakeFirst();
  }

  /** Region name → id for every placement (locked later, with the others, in id order). */
  async #resolveRegions(tx: Tx, resource: MessageShape<Desc>): Promise<Map<string, number>> {
    const placements = this.kind.placements(resource);
    const names = [...new Set(placements.map((p) => p.region))];
    const ids = new Map<string, number>();
    if (names.length === 0) return ids;
    for (const row of await tx.selectFrom("regions").select(["id", "name"]).where("name", "in", names).execute()) ids.set(row.name, row.id);
    const missing = placements.find((p) => !ids.has(p.region));
    if (missing) throw new StoreError("not_found", `${missing.field}: region ${JSON.stringify(missing.region)} not found`, missing.field);
    return ids;
  }

  async #writePlacements(tx: Tx, id: string, regionIds: ReadonlyMap<string, number>, replace: boolean): Promise<void> {
    if (replace) {
      await tx.deleteFrom("placements").where("resource_type", "=", this.kind.type).where("resource_id", "=", id).execute();
    }
    if (regionIds.size === 0) return;
    await tx
      .insertInto("placements")
      .values([...regionIds.values()].map((region_id) => ({ resource_type: this.kind.type, resource_id: id, region_id })))
      .execute();
  }

  #checkRevision(row: ResourceTable, expected: bigint | undefined): void {
    if (expected !== undefined && BigInt(row.revision) !== expected) {
      throw new StoreError(
        "aborted",
        `${this.kind.field} ${JSON.stringify(row.id)} is at revision ${row.revision}, not the expected ${expected}`,
        "expected_revision",
      );
    }
  }

  #fromRow(row: ResourceTable): MessageShape<Desc> {
    const resource = fromBinary(this.kind.schema, row.body) as MessageShape<Desc> & {
      revision: bigint;
      createTime: unknown;
      updateTime: unknown;
    };
    resource.revision = BigInt(row.revision);
    resource.createTime = timestampFromMs(Number(row.create_time));
    resource.updateTime = timestampFromMs(Number(row.update_time));
    return resource;
  }

  #withoutOutput(resource: MessageShape<Desc>): MessageShape<Desc> {
    const copy = clone(this.kind.schema, resource);
    this.kind.clearOutput(copy);
    return copy;
  }

  #id(resource: MessageShape<Desc>): string {
    return (resource as unknown as { id: string }).id;
  }

  #notFound(id: string): StoreError {
    return new StoreError("not_found", `${this.kind.field} ${JSON.stringify(id)} not found`, "id");
  }
}

function isRetryable(error: unknown): boolean {
  const code = (error as { code?: string })?.code;
  return code === "ER_LOCK_DEADLOCK" || isDuplicateKey(error);
}

/** Immutable fields are scalars, so strict equality compares them. */
function fieldOf(message: object, field: string): unknown {
  return (message as Record<string, unknown>)[field];
}
