// The heart of ARCHITECTURE §2: region versions taken under a row lock held until commit,
// and one outbox row per changed resource per region carrying its full state or a tombstone.
import { clone, create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ChangeEventSchema, DesiredResourceSchema, type ChangeEvent, type DesiredResource, type ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Transaction } from "kysely";
import type { Dialect } from "./database.ts";
import { StoreError } from "./errors.ts";
import type { Database } from "./schema.ts";

export type Tx = Transaction<Database>;

/**
 * Increments each region's head version, in region-id order (so concurrent writers never
 * deadlock), and returns the new versions. The row locks are held until the transaction
 * ends, so within a region version order is commit order and a rollback leaves no gap.
 */
export async function takeVersions(tx: Tx, regionIds: Iterable<number>): Promise<Map<number, number>> {
  const versions = new Map<number, number>();
  for (const id of [...new Set(regionIds)].sort((a, b) => a - b)) {
    const result = await tx
      .updateTable("regions")
      .set((eb) => ({ head_version: eb("head_version", "+", 1) }))
      .where("id", "=", id)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) !== 1) throw new StoreError("not_found", `region ${id} was deleted meanwhile`);
    const row = await tx.selectFrom("regions").select("head_version").where("id", "=", id).executeTakeFirstOrThrow();
    versions.set(id, Number(row.head_version));
  }
  return versions;
}

interface PendingChange {
  regionId: number;
  /** Undefined for a tombstone. */
  desired: DesiredResource | undefined;
  namespace: string;
  rowExists: boolean;
}

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
 * Locks every region it may touch (see lockRegions) plus `alsoLock`, so call it before
 * writing rows that reference regions. Returns the ids of the regions whose version moved.
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
  const current = await tx
    .selectFrom("desired_resources")
    .select(["region_id", "namespace", "body"])
    .where("resource_type", "=", type)
    .where("resource_id", "=", id)
    .execute();
  await lockRegions(tx, [...current.map((r) => r.region_id), ...next.keys(), ...alsoLock], dialect);
  const changes: PendingChange[] = [];
  const seen = new Set<number>();
  for (const row of current) {
    seen.add(row.region_id);
    const desired = next.get(row.region_id);
    if (!desired) changes.push({ regionId: row.region_id, desired: undefined, namespace: row.namespace, rowExists: true });
    else if (!equals(DesiredResourceSchema, fromBinary(DesiredResourceSchema, row.body), desired))
      changes.push({ regionId: row.region_id, desired, namespace: desired.namespace, rowExists: true });
  }
  for (const [regionId, desired] of next) {
    if (!seen.has(regionId)) changes.push({ regionId, desired, namespace: desired.namespace, rowExists: false });
  }
  if (changes.length === 0) return [];

  const versions = await takeVersions(
    tx,
    changes.map((c) => c.regionId),
  );
  for (const change of changes) {
    const version = versions.get(change.regionId)!;
    let event: ChangeEvent;
    if (change.desired) {
      const body = toBinary(DesiredResourceSchema, change.desired);
      if (change.rowExists) {
        await tx
          .updateTable("desired_resources")
          .set({ namespace: change.namespace, version, body })
          .where("region_id", "=", change.regionId)
          .where("resource_type", "=", type)
          .where("resource_id", "=", id)
          .execute();
      } else {
        await tx
          .insertInto("desired_resources")
          .values({ region_id: change.regionId, resource_type: type, resource_id: id, namespace: change.namespace, version, body })
          .execute();
      }
      const upsert = clone(DesiredResourceSchema, change.desired);
      upsert.version = BigInt(version);
      event = create(ChangeEventSchema, { version: BigInt(version), change: { case: "upsert", value: upsert } });
    } else {
      await tx
        .deleteFrom("desired_resources")
        .where("region_id", "=", change.regionId)
        .where("resource_type", "=", type)
        .where("resource_id", "=", id)
        .execute();
      event = create(ChangeEventSchema, {
        version: BigInt(version),
        change: { case: "delete", value: { type, id, namespace: change.namespace, name: id } },
      });
    }
    await tx
      .insertInto("deployment_changes")
      .values({
        region_id: change.regionId,
        version,
        resource_type: type,
        resource_id: id,
        body: toBinary(ChangeEventSchema, event),
        create_time: now,
      })
      .execute();
  }
  return [...versions.keys()];
}
