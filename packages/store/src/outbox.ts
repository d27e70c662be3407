// The heart of ARCHITECTURE §2: region versions taken under a row lock held until commit,
// and one outbox row per changed resource per region carrying its full state or a tombstone.
import { clone, create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ChangeEventSchema, DesiredResourceSchema, type ChangeEvent, type DesiredResource, type ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { sql, type Transaction } from "kysely";
import type { Dialect } from "./database.ts";
import { clearSecretEnvSeals, storedParts, wholeResource } from "./desired-seals.ts";
import { StoreError } from "./errors.ts";
import type { CommittedChange } from "./changes.ts";
import type { Database, DeploymentChangesTable, DesiredResourcesTable } from "./schema.ts";

export type Tx = Transaction<Database>;

/**
 * Outbox rows a transaction wrote, up to COMMITTED_CHANGES_MAX (null past it), for its commit
 * listeners: ctrl's poller fans a local commit's changes out from these, with no read of the
 * outbox, when they follow on from what it has sent. A larger transaction's are read back.
 */
const writtenIn = new WeakMap<Tx, CommittedChange[] | null>();
export const COMMITTED_CHANGES_MAX = 64;

function recordWritten(tx: Tx, events: readonly DeploymentChangesTable[]): void {
  const written = writtenIn.get(tx);
  if (written === null) return;
  const all = [...(written ?? []), ...events.map((e) => ({ regionId: e.region_id, version: e.version, body: e.body }))];
  writtenIn.set(tx, all.length > COMMITTED_CHANGES_MAX ? null : all);
}

/** The outbox rows `tx` wrote (see writtenIn): undefined when there were too many to hand over. */
export function committedChanges(tx: Tx): readonly CommittedChange[] | undefined {
  const written = writtenIn.get(tx);
  return written === null ? undefined : (written ?? []);
}

/**
 * Increments each region's head version, in region-id order (so concurrent writers never
 * deadlock), and returns the new versions. The row locks are held until the transaction
 * ends, so within a region version order is commit order and a rollback leaves no gap.
 */
export async function takeVersions(tx: Tx, regionIds: Iterable<number>, dialect: Dialect): Promise<Map<number, number>> {
  const counts = new Map([...regionIds].map((id) => [id, 1]));
  return lockTakingVersions(tx, counts.keys(), counts, dialect);
}

/**
 * Locks the regions' rows in id order (as lockRegions) and takes `count` versions of each
 * region in `counts` (region id → count) on the way, its UPDATE being its lock: returns the
 * last of each such region's new versions; the range is the `count` versions up to it.
 */
async function lockTakingVersions(tx: Tx, regionIds: Iterable<number>, counts: ReadonlyMap<number, number>, dialect: Dialect): Promise<Map<number, number>> {
  const versions = new Map<number, number>();
  for (const id of [...new Set([...regionIds, ...counts.keys()])].sort((a, b) => a - b)) {
    const count = counts.get(id);
    if (count !== undefined) versions.set(id, await takeVersion(tx, id, count, dialect));
    else await lockRegions(tx, [id], dialect);
  }
  return versions;
}

/** Adds `count` to region `id`'s head version; returns the new head. One statement: the row is locked and read at once. */
async function takeVersion(tx: Tx, id: number, count: number, dialect: Dialect): Promise<number> {
  let head: number | undefined;
  if (dialect.name === "mysql") {
    // LAST_INSERT_ID(expr) makes the new head the statement's insert id, which its answer carries.
    const result = await sql`update regions set head_version = last_insert_id(head_version + ${count}) where id = ${id}`.execute(tx);
    if (Number(result.numAffectedRows) === 1) head = Number(result.insertId);
  } else {
    const row = await tx
      .updateTable("regions")
      .set((eb) => ({ head_version: eb("head_version", "+", count) }))
      .where("id", "=", id)
      .returning("head_version")
      .executeTakeFirst();
    head = row && Number(row.head_version);
  }
  if (head === undefined) throw new StoreError("not_found", `region ${id} was deleted meanwhile`);
  return head;
}

interface PendingChange {
  id: string;
  regionId: number;
  /** Undefined for a tombstone. */
  desired: DesiredResource | undefined;
  namespace: string;
  rowExists: boolean;
  /** The stored row's values sealed as one, if any: once replaced, older outbox rows lose them (purgeReplacedSeals). */
  storedSeal?: Uint8Array | null;
}

/** A resource's desired state in every region: region id → desired state (version unset). */
export interface DesiredWrite {
  id: string;
  next: ReadonlyMap<number, DesiredResource>;
  /** Regions absent from `next` keep what they hold (no tombstone). */
  keepOthers?: boolean;
}

/** Rows a multi-row statement carries at most, and the bytes of bodies it carries at most (one larger body goes alone). */
export const ROWS_PER_STATEMENT = 500;
const BYTES_PER_STATEMENT = 4 * 1024 * 1024;

/**
 * Locks the regions' rows in id order. Every write locks all the regions it will touch here,
 * before any other region lock (foreign-key checks included), so writers never deadlock.
 */
export async function lockRegions(tx: Tx, regionIds: Iterable<number>, dialect: Dialect): Promise<void> {
  if (!dialect.locksRows) return;
  for (const id of [...new Set(regionIds)].sort((a, b) => a - b)) {
    const row = await tx.selectFrom("regions").select("id").where("id", "=", id).forUpdate().executeTakeFirst();
    if (!row) throw new StoreError("not_found", `region ${id} was deleted meanwhile`);
  }
}

/**
 * Makes the desired state of resource (type, id) equal `next` (region id → desired state,
 * version unset) in every region, writing an outbox row for each region whose state
 * actually changed: a full upsert, or a tombstone where the resource left the region.
 * Locks the regions whose state changes (see lockRegions) plus `alsoLock`, so call it before
 * writing rows that reference regions, naming theirs in `alsoLock`. Returns the ids of the
 * regions whose version moved.
 */
export async function writeDesired(
  tx: Tx,
  dialect: Dialect,
  type: ResourceType,
  id: string,
  next: ReadonlyMap<number, DesiredResource>,
  now: number,
  alsoLock: Iterable<number> = [],
): Promise<number[]> {
  return writeDesiredMany(tx, dialect, type, [{ id, next }], now, alsoLock);
}

/**
 * Whether two desired states of a resource are equal, the deployment revision they were
 * written from aside (and, with `versionsAside`, their region versions): a change that leaves
 * a region's spec as it was keeps the older revision there, so its pods (labelled with it)
 * do not roll for nothing.
 */
export function sameDesired(a: DesiredResource, b: DesiredResource, versionsAside = false): boolean {
  const specA = a.spec.case === "deployment" ? a.spec.value : undefined;
  const specB = b.spec.case === "deployment" ? b.spec.value : undefined;
  const [revisionB, versionB] = [specB?.revision, b.version];
  try {
    if (specA && specB) specB.revision = specA.revision;
    if (versionsAside) b.version = a.version;
    return equals(DesiredResourceSchema, a, b);
  } finally {
    if (specB) specB.revision = revisionB!;
    b.version = versionB;
  }
}

/**
 * writeDesired of several resources of one type in one go (distinct ids): every region any
 * of them touches is locked once and its version row taken once, for all of their changes
 * in that region (consecutive versions, in the order of `writes`).
 */
export async function writeDesiredMany(
  tx: Tx,
  dialect: Dialect,
  type: ResourceType,
  writes: readonly DesiredWrite[],
  now: number,
  alsoLock: Iterable<number> = [],
): Promise<number[]> {
  const current = new Map<string, { region_id: number; namespace: string; body: Uint8Array; secret_env_sealed: Uint8Array | null }[]>(
    writes.map((w) => [w.id, []]),
  );
  for (let i = 0; i < writes.length; i += ROWS_PER_STATEMENT) {
    const rows = await tx
      .selectFrom("desired_resources")
      .select(["resource_id", "region_id", "namespace", "body", "secret_env_sealed"])
      .where("resource_type", "=", type)
      .where(
        "resource_id",
        "in",
        writes.slice(i, i + ROWS_PER_STATEMENT).map((w) => w.id),
      )
      .execute();
    for (const row of rows) current.get(row.resource_id)?.push(row);
  }
  const changes: PendingChange[] = [];
  for (const { id, next, keepOthers } of writes) {
    const seen = new Set<number>();
    for (const row of current.get(id)!) {
      seen.add(row.region_id);
      const desired = next.get(row.region_id);
      if (!desired) {
        if (!keepOthers)
          changes.push({ id, regionId: row.region_id, desired: undefined, namespace: row.namespace, rowExists: true, storedSeal: row.secret_env_sealed });
      } else if (!sameDesired(wholeResource(row), desired))
        changes.push({ id, regionId: row.region_id, desired, namespace: desired.namespace, rowExists: true, storedSeal: row.secret_env_sealed });
    }
    for (const [regionId, desired] of next) {
      if (!seen.has(regionId)) changes.push({ id, regionId, desired, namespace: desired.namespace, rowExists: false });
    }
  }
  // The rows read above cannot change meanwhile: every writer of a resource holds its row's lock.
  const counts = new Map<number, number>();
  for (const c of changes) counts.set(c.regionId, (counts.get(c.regionId) ?? 0) + 1);
  const last = await lockTakingVersions(tx, alsoLock, counts, dialect);
  if (changes.length === 0) return [];
  // Each region's range, handed out in the order of the changes.
  const nextVersion = new Map([...last].map(([regionId, version]) => [regionId, version - counts.get(regionId)! + 1]));
  const rows: DesiredResourcesTable[] = [];
  const events: DeploymentChangesTable[] = [];
  const replacedSeals: ReplacedSeal[] = [];
  for (const change of changes) {
    const version = nextVersion.get(change.regionId)!;
    nextVersion.set(change.regionId, version + 1);
    const nextSeal = change.desired && storedParts(change.desired).secret_env_sealed;
    if (change.storedSeal && change.storedSeal.length > 0 && !sameBytes(change.storedSeal, nextSeal)) {
      replacedSeals.push({ regionId: change.regionId, type, id: change.id, before: version, kept: nextSeal ?? undefined });
    }
    let event: ChangeEvent;
    if (change.desired) {
      rows.push({
        region_id: change.regionId,
        resource_type: type,
        resource_id: change.id,
        namespace: change.namespace,
        version,
        ...storedParts(change.desired),
      });
      const upsert = clone(DesiredResourceSchema, change.desired);
      upsert.version = BigInt(version);
      event = create(ChangeEventSchema, { version: BigInt(version), change: { case: "upsert", value: upsert } });
    } else {
      event = create(ChangeEventSchema, {
        version: BigInt(version),
        change: { case: "delete", value: { type, id: change.id, namespace: change.namespace, name: change.id } },
      });
    }
    events.push({
      region_id: change.regionId,
      version,
      resource_type: type,
      resource_id: change.id,
      body: toBinary(ChangeEventSchema, event),
      create_time: now,
    });
  }
  // A changed row is written anew (one statement for the old rows, one for the new) rather than updated row by row.
  const replaced = changes.filter((c) => c.rowExists);
  for (let i = 0; i < replaced.length; i += ROWS_PER_STATEMENT) {
    await tx
      .deleteFrom("desired_resources")
      .where("resource_type", "=", type)
      .where((eb) => eb.or(replaced.slice(i, i + ROWS_PER_STATEMENT).map((c) => eb.and([eb("region_id", "=", c.regionId), eb("resource_id", "=", c.id)]))))
      .execute();
  }
  for (const chunk of chunks(rows)) await tx.insertInto("desired_resources").values(chunk).execute();
  for (const chunk of chunks(events)) await tx.insertInto("deployment_changes").values(chunk).execute();
  recordWritten(tx, events);
  await purgeReplacedSeals(tx, replacedSeals);
  return [...last.keys()];
}

/** A resource's values in a region replaced (or gone) at version `before`; `kept`: the new seal. */
interface ReplacedSeal {
  regionId: number;
  type: ResourceType;
  id: string;
  before: number;
  kept: Uint8Array | undefined;
}

/**
 * Clears, in the outbox rows of each resource before its change, the values it replaced: nothing
 * needs them (an agent catching up applies the newer row; one that gets the older row without
 * values is told so, and the newer row supersedes it), and a dump then holds live values only.
 * The names and the checksum stay. Rare (a value changed, a key rotated, a deployment gone), so
 * these rows are found by resource rather than through an index of their own.
 */
async function purgeReplacedSeals(tx: Tx, replaced: readonly ReplacedSeal[]): Promise<void> {
  for (const { regionId, type, id, before, kept } of replaced) {
    const rows = await tx
      .selectFrom("deployment_changes")
      .select(["version", "body"])
      .where("region_id", "=", regionId)
      .where("resource_type", "=", type)
      .where("resource_id", "=", id)
      .where("version", "<", before)
      .execute();
    for (const row of rows) {
      const event = fromBinary(ChangeEventSchema, row.body);
      if (event.change.case !== "upsert") continue;
      const workload = event.change.value.spec.case === "deployment" ? event.change.value.spec.value.workload : undefined;
      if (kept && workload && sameBytes(workload.secretEnvSealed, kept)) continue;
      if (!clearSecretEnvSeals(event.change.value)) continue;
      // This transaction's own rows may be among them: its listeners then read the rows back.
      writtenIn.set(tx, null);
      await tx
        .updateTable("deployment_changes")
        .set({ body: toBinary(ChangeEventSchema, event) })
        .where("region_id", "=", regionId)
        .where("version", "=", Number(row.version))
        .execute();
    }
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array | null | undefined): boolean {
  return b !== null && b !== undefined && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);
}

/** `rows` in runs a multi-row statement may carry (ROWS_PER_STATEMENT, BYTES_PER_STATEMENT). */
function* chunks<R extends { body: Uint8Array; secret_env_sealed?: Uint8Array | null }>(rows: R[]): Generator<R[]> {
  let chunk: R[] = [];
  let bytes = 0;
  for (const row of rows) {
    const size = row.body.length + (row.secret_env_sealed?.length ?? 0);
    if (chunk.length > 0 && (chunk.length >= ROWS_PER_STATEMENT || bytes + size > BYTES_PER_STATEMENT)) {
      yield chunk;
      chunk = [];
      bytes = 0;
    }
    chunk.push(row);
    bytes += size;
  }
  if (chunk.length > 0) yield chunk;
}
