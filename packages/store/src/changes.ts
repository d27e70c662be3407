// Reading and pruning the outbox (deployment_changes).
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { ChangeEventSchema, type ChangeEvent } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";

/** The stored bytes of events read from the outbox: streams size and send them without encoding. */
const encodings = new WeakMap<ChangeEvent, Uint8Array>();

/** The event's protobuf encoding: as stored when it came from the outbox, else encoded once. */
export function encodedChange(event: ChangeEvent): Uint8Array {
  let bytes = encodings.get(event);
  if (bytes === undefined) encodings.set(event, (bytes = toBinary(ChangeEventSchema, event)));
  return bytes;
}

export interface RetentionPolicy {
  /** Rows older than this are pruned. 0 disables. */
  maxAgeMs: number;
  /** At most this many rows per region are kept. 0 disables. */
  maxRows: number;
}

export class ChangeLog {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /** Up to `limit` changes of the region with version > `after`, in version order. */
  async read(regionId: number, after: number, limit: number): Promise<ChangeEvent[]> {
    const rows = await this.#db
      .selectFrom("deployment_changes")
      .select("body")
      .where("region_id", "=", regionId)
      .where("version", ">", after)
      .orderBy("version")
      .limit(limit)
      .execute();
    return rows.map((r) => {
      const event = fromBinary(ChangeEventSchema, r.body);
      encodings.set(event, r.body);
      return event;
    });
  }

  /** Head version of each region that still exists. One query for any number of regions. */
  async heads(regionIds: number[]): Promise<Map<number, number>> {
    if (regionIds.length === 0) return new Map();
    const rows = await this.#db.selectFrom("regions").select(["id", "head_version"]).where("id", "in", regionIds).execute();
    return new Map(rows.map((r) => [r.id, Number(r.head_version)]));
  }

  /**
   * Deletes the changes outside the retention window in batches of `batchSize`, never a
   * region's newest change. Returns how many rows were deleted.
   */
  async prune(policy: RetentionPolicy, now: number, batchSize = 1000): Promise<number> {
    let deleted = 0;
    const regions = await this.#db.selectFrom("regions").select(["id", "head_version"]).execute();
    for (const region of regions) {
      const head = Number(region.head_version);
      let upTo = 0;
      if (policy.maxAgeMs > 0) {
        const old = await this.#db
          .selectFrom("deployment_changes")
          .select((eb) => eb.fn.max<number>("version").as("v"))
          .where("region_id", "=", region.id)
          .where("create_time", "<", now - policy.maxAgeMs)
          .executeTakeFirst();
        upTo = Math.max(upTo, Number(old?.v ?? 0));
      }
      if (policy.maxRows > 0) upTo = Math.max(upTo, head - policy.maxRows);
      upTo = Math.min(upTo, head - 1);
      const oldest = await this.#db
        .selectFrom("deployment_changes")
        .select((eb) => eb.fn.min<number>("version").as("v"))
        .where("region_id", "=", region.id)
        .executeTakeFirst();
      // Small batches over the primary key keep each delete's locks short.
      for (let from = Number(oldest?.v ?? upTo + 1); from <= upTo; from += batchSize) {
        const result = await this.#db
          .deleteFrom("deployment_changes")
          .where("region_id", "=", region.id)
          .where("version", "<=", Math.min(upTo, from + batchSize - 1))
          .executeTakeFirst();
        deleted += Number(result.numDeletedRows);
      }
    }
    return deleted;
  }
}
