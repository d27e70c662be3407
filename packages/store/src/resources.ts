// Create / Get / List / Update / Delete / Rollback of the operator-owned resources. Each
// write is one transaction: the resource row, its revision, its placements, region versions,
// outbox rows, a status event and an audit record.
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { clone, equals, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import type { DesiredResource } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Kysely } from "kysely";
import type { Dialect } from "./database.ts";
import { StoreError } from "./errors.ts";
import type { ResourceKind } from "./kinds.ts";
import { committedChanges, writeDesired, type Tx } from "./outbox.ts";
import type { CommittedChange } from "./changes.ts";
import { stageChange } from "./rollouts.ts";
import { ADMIN_AUTHOR, AuditLog, type ChangeAuthor } from "./audit.ts";
import { StatusEvents } from "./status-events.ts";
import { isDuplicateKey } from "./regions.ts";
import { bodiesWithin, decodePageToken, DEFAULT_PAGE_BYTES, pageSize, toPage, type Page } from "./paging.ts";
import { DEFAULT_PROJECT } from "./projects.ts";
import type { Database, ResourceTable } from "./schema.ts";
import type { SecretKeyRing } from "./secrets.ts";

/** Called after each committed write with the regions whose versions moved (maybe none). */
/**
 * Called after a commit that moved `regionIds`' versions, with the outbox rows it wrote
 * (`written`; undefined when they were too many to hand over: read them from the outbox).
 */
export type CommitListener = (regionIds: number[], written?: readonly CommittedChange[]) => void;

/** Revisions kept per object unless configured otherwise (ctrl's --revision-history-limit). */
export const DEFAULT_REVISION_HISTORY_LIMIT = 50;

/** One kept revision of an object. */
export interface StoredRevision<M> {
  revision: number;
  /** The spec at this revision: output fields cleared but `revision`. */
  resource: M;
  actor: string;
  message: string;
  createTime: number;
}

/**
 * Called in a write's transaction once the resource's row is locked, with what the write would
 * store (`next`; undefined for a delete) and what is stored (`existing`; undefined for a
 * create): it throws to refuse the write, and then nothing is written. ctrl's authorization
 * decides here, so that the resource it judges is the one the write changes.
 */
export type WriteGuard<M> = (write: { next: M | undefined; existing: M | undefined }) => void;

/** The project a resource names; what names none belongs to the default project. */
export function projectOf(resource: object): string {
  return (resource as { project?: string }).project || DEFAULT_PROJECT;
}

/** The actions recorded in the audit trail, by the RPC that makes them. */
type Action = "Create" | "Update" | "Delete" | "Rollback";

export class ResourceRepository<Desc extends DescMessage> {
  readonly kind: ResourceKind<Desc>;
  readonly #db: Kysely<Database>;
  readonly #dialect: Dialect;
  readonly #onCommit: CommitListener;
  readonly #audit: AuditLog;
  readonly #historyLimit: number;
  /** What one page of list() or revisions() carries at most of stored bodies (paging.ts). */
  readonly #pageBytes: number;
  readonly #secrets: SecretKeyRing | undefined;

  constructor(
    db: Kysely<Database>,
    dialect: Dialect,
    kind: ResourceKind<Desc>,
    onCommit: CommitListener,
    historyLimit = DEFAULT_REVISION_HISTORY_LIMIT,
    secrets?: SecretKeyRing,
    pageBytes = DEFAULT_PAGE_BYTES,
  ) {
    this.#pageBytes = pageBytes;
    this.#db = db;
    this.#dialect = dialect;
    this.kind = kind;
    this.#onCommit = onCommit;
    this.#audit = new AuditLog(db);
    this.#historyLimit = historyLimit;
    this.#secrets = secrets;
  }

  /** Creates the resource; the same id with an equal body returns the stored one unchanged. */
  async create(
    resource: MessageShape<Desc>,
    author: ChangeAuthor = ADMIN_AUTHOR,
    dryRun = false,
    guard?: WriteGuard<MessageShape<Desc>>,
  ): Promise<MessageShape<Desc>> {
    const input = this.#withoutOutput(resource);
    const id = this.#id(input);
    const created = await this.#write(dryRun, async (tx, now) => {
      const existing = await this.#lockRow(tx, id);
      guard?.({ next: input, existing: existing && this.#fromRow(existing) });
      this.kind.seal?.(this.#secrets, input, existing && this.#fromRow(existing), existing ? Number(existing.revision) : 0, dryRun);
      if (existing) {
        const stored = this.#fromRow(existing);
        if (equals(this.kind.schema, this.#withoutOutput(stored), input)) return { result: stored, regions: [] };
        throw new StoreError("already_exists", `${this.kind.field} ${JSON.stringify(id)} already exists with a different body`, `${this.kind.field}.id`);
      }
      const regionIds = await this.#resolveRegions(tx, input);
      this.kind.bind?.(this.#secrets, input, 0, 1);
      const row: ResourceTable = { id, project: projectOf(input), revision: 1, body: toBinary(this.kind.schema, input), create_time: now, update_time: now };
      await tx.insertInto(this.kind.table).values(row).execute();
      const regions = await this.#writeDesired(tx, id, input, undefined, regionIds, now, { from: 0, to: 1, actor: author.actor }, regionIds.values());
      await this.#writePlacements(tx, id, regionIds, false);
      await this.#recordChange(tx, row, author, "Create", now);
      return { result: this.#fromRow(row), regions };
    });
    return this.#shown(created);
  }

  async get(id: string): Promise<MessageShape<Desc>> {
    const row = await this.#db.selectFrom(this.kind.table).selectAll().where("id", "=", id).executeTakeFirst();
    if (!row) throw this.#notFound(id);
    return this.#shown(this.#fromRow(row));
  }

  /** The resources of these ids that exist, by id. */
  async getMany(ids: string[]): Promise<Map<string, MessageShape<Desc>>> {
    const found = new Map<string, MessageShape<Desc>>();
    for (let i = 0; i < ids.length; i += 1000) {
      const rows = await this.#db
        .selectFrom(this.kind.table)
        .selectAll()
        .where("id", "in", ids.slice(i, i + 1000))
        .execute();
      for (const row of rows) found.set(row.id, this.#shown(this.#fromRow(row)));
    }
    return found;
  }

  /** A page in id order, only of the projects in `visible` (undefined: of every project). */
  async list(requestedPageSize: number, pageToken: string, visible?: ReadonlySet<string>): Promise<Page<MessageShape<Desc>>> {
    const size = pageSize(requestedPageSize);
    const after = decodePageToken(pageToken);
    if (visible?.size === 0) return { items: [], nextPageToken: "" };
    let query = this.#db
      .selectFrom(this.kind.table)
      .selectAll()
      .orderBy("id")
      .limit(size + 1);
    if (after !== undefined) query = query.where("id", ">", after);
    if (visible) query = query.where("project", "in", [...visible]);
    return toPage(
      await bodiesWithin(this.#db, query, "id", "asc", this.#pageBytes),
      size,
      (r) => r.id,
      (r) => this.#shown(this.#fromRow(r)),
      { of: (r) => r.body.length, max: this.#pageBytes },
    );
  }

  /**
   * Replaces the resource's fields. With expectedRevision set, a different current revision
   * is ABORTED. An update that changes nothing keeps the revision and writes nothing.
   */
  async update(
    resource: MessageShape<Desc>,
    expectedRevision?: bigint,
    author: ChangeAuthor = ADMIN_AUTHOR,
    dryRun = false,
    guard?: WriteGuard<MessageShape<Desc>>,
  ): Promise<MessageShape<Desc>> {
    const input = this.#withoutOutput(resource);
    const id = this.#id(input);
    const updated = await this.#write(dryRun, async (tx, now) => {
      const existing = await this.#lockRow(tx, id);
      if (!existing) throw this.#notFound(id);
      guard?.({ next: input, existing: this.#fromRow(existing) });
      this.#checkRevision(existing, expectedRevision);
      this.kind.seal?.(this.#secrets, input, this.#fromRow(existing), Number(existing.revision), dryRun);
      return this.#replace(tx, existing, input, author, "Update", now);
    });
    return this.#shown(updated);
  }

  /**
   * Writes a new revision carrying revision `toRevision`'s spec, as `update` would (the same
   * checks), with the secret values stored now (#rolledBackSpec); NOT_FOUND when that revision
   * is no longer kept. Rolling back to a spec equal to the current one writes nothing.
   */
  async rollback(
    id: string,
    toRevision: number,
    expectedRevision: bigint | undefined,
    author: ChangeAuthor = ADMIN_AUTHOR,
    guard?: WriteGuard<MessageShape<Desc>>,
  ): Promise<MessageShape<Desc>> {
    const rolledBack = await this.#write(false, async (tx, now) => {
      const existing = await this.#lockRow(tx, id);
      if (!existing) throw this.#notFound(id);
      const target = await this.#revisionSpec(tx, existing, toRevision);
      // Authorization first: a caller refused learns nothing of the revision's secret names.
      guard?.({ next: target, existing: this.#fromRow(existing) });
      this.#checkRevision(existing, expectedRevision);
      this.#keepCurrentSecrets(existing, target, toRevision);
      return this.#replace(tx, existing, target, author, "Rollback", now);
    });
    return this.#shown(rolledBack);
  }

  /** The kept revisions of `id`, newest first. */
  async revisions(id: string, requestedPageSize: number, pageToken: string): Promise<Page<StoredRevision<MessageShape<Desc>>>> {
    const size = pageSize(requestedPageSize);
    const after = decodePageToken(pageToken);
    let query = this.#db
      .selectFrom("resource_revisions")
      .selectAll()
      .where("resource_type", "=", this.kind.type)
      .where("resource_id", "=", id)
      .orderBy("revision", "desc")
      .limit(size + 1);
    if (after !== undefined) {
      const revision = Number(after);
      if (!Number.isSafeInteger(revision)) throw new StoreError("invalid_argument", "page_token: not a token from a previous page", "page_token");
      query = query.where("revision", "<", revision);
    }
    const rows = await bodiesWithin(this.#db, query, "revision", "desc", this.#pageBytes);
    if (rows.length === 0 && after === undefined) await this.get(id); // NOT_FOUND for an unknown object
    return toPage(
      rows,
      size,
      (r) => String(r.revision),
      (r) => this.#fromRevisionRow(r),
      { of: (r) => r.body.length, max: this.#pageBytes },
    );
  }

  /** One kept revision; NOT_FOUND if the object or the revision is not (or no longer) kept. */
  async revision(id: string, revision: number): Promise<StoredRevision<MessageShape<Desc>>> {
    const row = await this.#db
      .selectFrom("resource_revisions")
      .selectAll()
      .where("resource_type", "=", this.kind.type)
      .where("resource_id", "=", id)
      .where("revision", "=", revision)
      .executeTakeFirst();
    if (!row) throw new StoreError("not_found", `${this.kind.field} ${JSON.stringify(id)} has no revision ${revision}`, "revision");
    return this.#fromRevisionRow(row);
  }

  /** The update of a locked row to `input`: a new revision unless nothing changes. */
  async #replace(tx: Tx, existing: ResourceTable, input: MessageShape<Desc>, author: ChangeAuthor, action: Action, now: number) {
    const id = existing.id;
    const stored = this.#withoutOutput(this.#fromRow(existing));
    for (const field of this.kind.immutable) {
      if (fieldOf(stored, field) !== fieldOf(input, field))
        throw new StoreError("invalid_argument", `${this.kind.field}.${field}: is immutable`, `${this.kind.field}.${field}`);
    }
    if (equals(this.kind.schema, stored, input)) return { result: this.#fromRow(existing), regions: [] };
    const regionIds = await this.#resolveRegions(tx, input);
    const row = this.#nextRevisionRow(existing, input, now);
    await tx.updateTable(this.kind.table).set(row).where("id", "=", id).execute();
    const placed = await this.#placementsChange(tx, id, regionIds);
    const revisions = { from: Number(existing.revision), to: row.revision, actor: author.actor };
    const regions = await this.#writeDesired(tx, id, input, stored, regionIds, now, revisions, placed ? regionIds.values() : []);
    if (placed) await this.#writePlacements(tx, id, regionIds, true);
    await this.#recordChange(tx, row, author, action, now);
    return { result: this.#fromRow(row), regions };
  }

  /**
   * The revision row (the last `historyLimit` kept; its secret values cleared, as no rollback
   * brings one back), the status event and the audit record of a write.
   */
  async #recordChange(tx: Tx, row: ResourceTable, author: ChangeAuthor, action: Action, now: number): Promise<void> {
    const revision = Number(row.revision);
    let body = row.body;
    if (this.kind.clearSecrets) {
      const resource = fromBinary(this.kind.schema, body) as MessageShape<Desc>;
      this.kind.clearSecrets(resource);
      body = toBinary(this.kind.schema, resource);
    }
    await tx
      .insertInto("resource_revisions")
      .values({
        resource_type: this.kind.type,
        resource_id: row.id,
        revision,
        body,
        actor: author.actor,
        message: author.message.slice(0, 1024),
        create_time: now,
      })
      .execute();
    await tx
      .deleteFrom("resource_revisions")
      .where("resource_type", "=", this.kind.type)
      .where("resource_id", "=", row.id)
      .where("revision", "<=", revision - this.#historyLimit)
      .execute();
    await StatusEvents.append(tx, [{ type: this.kind.type, id: row.id }], now);
    await this.#audit.record(
      { author, action: `${action}${this.kind.action}`, objectKind: this.kind.field, objectId: row.id, revision, project: row.project },
      tx,
      now,
    );
  }

  /** Deletes the resource; every region it was desired in gets a tombstone. */
  async delete(id: string, expectedRevision?: bigint, author: ChangeAuthor = ADMIN_AUTHOR, guard?: WriteGuard<MessageShape<Desc>>): Promise<void> {
    await this.#write(false, async (tx, now) => {
      const existing = await this.#lockRow(tx, id);
      if (!existing) throw this.#notFound(id);
      guard?.({ next: undefined, existing: this.#fromRow(existing) });
      this.#checkRevision(existing, expectedRevision);
      await tx.deleteFrom(this.kind.table).where("id", "=", id).execute();
      if (this.kind.strategy?.(this.#fromRow(existing)))
        await stageChange(tx, {
          id,
          supersede: true,
          strategy: undefined,
          fromRevision: Number(existing.revision),
          toRevision: 0,
          next: new Map(),
          regionIds: new Map(),
          actor: author.actor,
          now,
          decisions: this.kind.rollouts,
        });
      const regions = await writeDesired(tx, this.#dialect, this.kind.type, id, new Map(), now);
      await this.#writePlacements(tx, id, new Map(), true);
      await tx.deleteFrom("observations").where("resource_type", "=", this.kind.type).where("resource_id", "=", id).execute();
      // A later object of the same id starts its history at revision 1.
      await tx.deleteFrom("resource_revisions").where("resource_type", "=", this.kind.type).where("resource_id", "=", id).execute();
      await StatusEvents.append(tx, [{ type: this.kind.type, id }], now);
      await this.#audit.record(
        {
          author,
          action: `Delete${this.kind.action}`,
          objectKind: this.kind.field,
          objectId: id,
          revision: Number(existing.revision),
          project: existing.project,
        },
        tx,
        now,
      );
      return { result: undefined, regions };
    });
  }

  /**
   * Desired state of `resource` in its regions, the rows of the regions it changes and of
   * `alsoLock` (placements about to be written reference them) locked first. A kind with a
   * strategy stages the change (rollouts.ts): its first wave moves now, the other regions keep
   * what they hold until their wave starts. `stored`: the resource before this change
   * (undefined: a create).
   */
  async #writeDesired(
    tx: Tx,
    id: string,
    resource: MessageShape<Desc>,
    stored: MessageShape<Desc> | undefined,
    regionIds: ReadonlyMap<string, number>,
    now: number,
    revisions: { from: number; to: number; actor: string },
    alsoLock: Iterable<number>,
  ): Promise<number[]> {
    const next = await this.#desired(tx, resource, regionIds, revisions.to);
    const staged = this.kind.strategy
      ? await stageChange(tx, {
          id,
          // A deployment whose stored spec has no strategy has no active rollout (but one started
          // under a default strategy since removed: a change with a strategy supersedes it).
          supersede: (stored !== undefined && this.kind.strategy(stored) !== undefined) || this.kind.strategy(resource) !== undefined,
          strategy: this.kind.strategy(resource),
          fromRevision: revisions.from,
          toRevision: revisions.to,
          next,
          regionIds,
          actor: revisions.actor,
          now,
          decisions: this.kind.rollouts,
        })
      : undefined;
    return writeDesired(tx, this.#dialect, this.kind.type, id, staged?.desired ?? next, now, alsoLock);
  }

  /** The kind's desired state of `resource` (stored at `revision`) per region, its secret values sealed for each region's agent. */
  async #desired(tx: Tx, resource: MessageShape<Desc>, regionIds: ReadonlyMap<string, number>, revision: number): Promise<Map<number, DesiredResource>> {
    const desired = this.kind.desired(resource, regionIds, revision);
    await this.kind.sealForRegions?.(this.#secrets, desired, revision, async (ids) => {
      const rows = await tx.selectFrom("regions").select(["id", "secret_key_epoch"]).where("id", "in", ids).execute();
      return new Map(rows.map((r) => [r.id, Number(r.secret_key_epoch)]));
    });
    return desired;
  }

  /**
   * In `tx`, their rows locked already: the revision and desired state per placed region of
   * each of `ids` that exists, by id.
   */
  async desiredManyInTx(tx: Tx, ids: readonly string[]): Promise<Map<string, { revision: number; desired: Map<number, DesiredResource> }>> {
    const result = new Map<string, { revision: number; desired: Map<number, DesiredResource> }>();
    if (ids.length === 0) return result;
    const rows = await tx.selectFrom(this.kind.table).selectAll().where("id", "in", ids).execute();
    const resources = rows.map((row) => ({ row, resource: this.#withoutOutput(this.#fromRow(row)) }));
    const regionIds = await this.#regionIds(
      tx,
      resources.flatMap(({ resource }) => this.kind.placements(resource).map((p) => p.region)),
    );
    for (const { row, resource } of resources) {
      const revision = Number(row.revision);
      result.set(row.id, { revision, desired: await this.#desired(tx, resource, placed(this.kind.placements(resource), regionIds), revision) });
    }
    return result;
  }

  /**
   * In `tx`: a new revision carrying revision `toRevision`'s spec with the secret values stored
   * now (action Rollback, by `author`), whose desired state per region `shape` decides — a
   * rollout's way back, written at once, never staged. Returns the regions whose versions moved.
   */
  async reviseInTx(
    tx: Tx,
    id: string,
    toRevision: number,
    author: ChangeAuthor,
    now: number,
    shape: (next: Map<number, DesiredResource>) => Promise<Map<number, DesiredResource>>,
  ): Promise<number[]> {
    const existing = await this.#lockRow(tx, id);
    if (!existing) throw this.#notFound(id);
    const input = await this.#revisionSpec(tx, existing, toRevision);
    this.#keepCurrentSecrets(existing, input, toRevision);
    const regionIds = await this.#resolveRegions(tx, input);
    const row = this.#nextRevisionRow(existing, input, now);
    await tx.updateTable(this.kind.table).set(row).where("id", "=", id).execute();
    const placed = await this.#placementsChange(tx, id, regionIds);
    const next = await shape(await this.#desired(tx, input, regionIds, row.revision));
    const regions = await writeDesired(tx, this.#dialect, this.kind.type, id, next, now, placed ? regionIds.values() : []);
    if (placed) await this.#writePlacements(tx, id, regionIds, true);
    await this.#recordChange(tx, row, author, "Rollback", now);
    return regions;
  }

  /**
   * Revision `toRevision`'s spec with the secret values stored now (the row `existing`, bound to
   * its revision); FAILED_PRECONDITION naming each variable the spec has and no value is stored
   * for now, so a replaced value never comes back and nothing is written.
   */
  /** A kept revision's spec as a rollback writes it: in the object's project. */
  async #revisionSpec(tx: Tx, existing: ResourceTable, toRevision: number): Promise<MessageShape<Desc>> {
    return this.#inProjectOf(existing, fromBinary(this.kind.schema, await this.#revisionBody(tx, existing.id, toRevision)) as MessageShape<Desc>);
  }

  /** A rollback keeps the secret values stored now: a name of `target` without a current value fails it, naming the name. */
  #keepCurrentSecrets(existing: ResourceTable, target: MessageShape<Desc>, toRevision: number): void {
    const missing = this.kind.keepCurrentSecrets?.(target, this.#withoutOutput(this.#fromRow(existing))) ?? [];
    if (missing.length > 0) {
      throw new StoreError(
        "failed_precondition",
        `${this.kind.field} ${JSON.stringify(existing.id)} revision ${toRevision} has secret env ${missing.map((n) => JSON.stringify(n)).join(", ")}, which has no value now: a rollback keeps the values as they are, so set it first`,
        "to_revision",
      );
    }
  }

  /** A kept revision's spec; NOT_FOUND (naming to_revision) when it is no longer kept. */
  async #revisionBody(tx: Tx, id: string, revision: number): Promise<Uint8Array> {
    const target = await tx
      .selectFrom("resource_revisions")
      .select("body")
      .where("resource_type", "=", this.kind.type)
      .where("resource_id", "=", id)
      .where("revision", "=", revision)
      .executeTakeFirst();
    if (!target)
      throw new StoreError(
        "not_found",
        `${this.kind.field} ${JSON.stringify(id)} has no revision ${revision} (kept: the last ${this.#historyLimit})`,
        "to_revision",
      );
    return target.body;
  }

  /** Runs `body` in a transaction; with `dryRun`, every check and statement runs, then it rolls back. */
  async #write<T>(dryRun: boolean, body: (tx: Tx, now: number) => Promise<{ result: T; regions: number[] }>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        // READ COMMITTED (each connection's level, database.ts): every read that decides a write
        // is a locking read anyway, and it keeps InnoDB from taking gap locks that would
        // serialize unrelated creates.
        const { result, regions, written } = await this.#db.transaction().execute(async (tx) => {
          const done = await body(tx, Date.now());
          if (dryRun) throw new RolledBack(done.result);
          return { ...done, written: committedChanges(tx) };
        });
        this.#onCommit(regions, written);
        return result;
      } catch (error) {
        if (error instanceof RolledBack) return error.result as T;
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
    return placed(
      placements,
      await this.#regionIds(
        tx,
        placements.map((p) => p.region),
      ),
    );
  }

  /** Region name → id of these regions that exist. */
  async #regionIds(tx: Tx, names: string[]): Promise<Map<string, number>> {
    const unique = [...new Set(names)];
    if (unique.length === 0) return new Map();
    const rows = await tx.selectFrom("regions").select(["id", "name"]).where("name", "in", unique).execute();
    return new Map(rows.map((r) => [r.name, r.id]));
  }

  /**
   * Whether `id`'s stored placements differ from `regionIds`: only then are they written, and
   * their regions locked with the desired state's (the rows reference them), so a change of
   * one region's state locks that region alone.
   */
  async #placementsChange(tx: Tx, id: string, regionIds: ReadonlyMap<string, number>): Promise<boolean> {
    const rows = await tx.selectFrom("placements").select("region_id").where("resource_type", "=", this.kind.type).where("resource_id", "=", id).execute();
    const next = new Set(regionIds.values());
    return rows.length !== next.size || rows.some((r) => !next.has(r.region_id));
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
    (resource as { project?: string }).project = row.project;
    resource.createTime = timestampFromMs(Number(row.create_time));
    resource.updateTime = timestampFromMs(Number(row.update_time));
    return resource;
  }

  #fromRevisionRow(row: Database["resource_revisions"]): StoredRevision<MessageShape<Desc>> {
    const resource = fromBinary(this.kind.schema, row.body) as MessageShape<Desc> & { revision: bigint; project?: string };
    resource.revision = BigInt(row.revision);
    // Revisions written before projects name none: the object's project is the default one then.
    resource.project = projectOf(resource);
    this.kind.redact?.(resource);
    return { revision: Number(row.revision), resource, actor: row.actor, message: row.message, createTime: Number(row.create_time) };
  }

  /** `resource` as a reader may see it. */
  #shown(resource: MessageShape<Desc>): MessageShape<Desc> {
    this.kind.redact?.(resource);
    return resource;
  }

  /** The row of `existing`'s next revision, holding `input`. */
  #nextRevisionRow(existing: ResourceTable, input: MessageShape<Desc>, now: number): ResourceTable {
    const revision = Number(existing.revision) + 1;
    // The body holds the seals bound to the revision it becomes.
    this.kind.bind?.(this.#secrets, input, Number(existing.revision), revision);
    return {
      id: existing.id,
      project: existing.project,
      revision,
      body: toBinary(this.kind.schema, input),
      create_time: Number(existing.create_time),
      update_time: now,
    };
  }

  /** A kept revision's spec as it applies now: in the project of the object (revisions written before projects name none). */
  #inProjectOf(existing: ResourceTable, spec: MessageShape<Desc>): MessageShape<Desc> {
    (spec as { project?: string }).project = existing.project;
    return spec;
  }

  /** The project of each of these ids that exists, by id. */
  async projectsOf(ids: readonly string[]): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    for (let i = 0; i < ids.length; i += 1000) {
      const rows = await this.#db
        .selectFrom(this.kind.table)
        .select(["id", "project"])
        .where("id", "in", ids.slice(i, i + 1000))
        .execute();
      for (const row of rows) found.set(row.id, row.project);
    }
    return found;
  }

  /** What an operator wrote: output fields cleared, and the project named (the default one if none). */
  #withoutOutput(resource: MessageShape<Desc>): MessageShape<Desc> {
    const copy = clone(this.kind.schema, resource);
    this.kind.clearOutput(copy);
    (copy as { project?: string }).project = projectOf(copy);
    return copy;
  }

  #id(resource: MessageShape<Desc>): string {
    return (resource as unknown as { id: string }).id;
  }

  #notFound(id: string): StoreError {
    return new StoreError("not_found", `${this.kind.field} ${JSON.stringify(id)} not found`, "id");
  }
}

/** Thrown to roll a dry run's transaction back, carrying what the write would have returned. */
class RolledBack extends Error {
  readonly result: unknown;
  constructor(result: unknown) {
    super("dry run");
    this.result = result;
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

/** Region name → id of each placement's region; NOT_FOUND (naming the placement's field) for one that does not exist. */
function placed(placements: { region: string; field: string }[], regionIds: ReadonlyMap<string, number>): Map<string, number> {
  const ids = new Map<string, number>();
  for (const p of placements) {
    const id = regionIds.get(p.region);
    if (id === undefined) throw new StoreError("not_found", `${p.field}: region ${JSON.stringify(p.region)} not found`, p.field);
    ids.set(p.region, id);
  }
  return ids;
}
