// Reading and pruning the outbox (deployment_changes).
import { fromBinary } from "@bufbuild/protobuf";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import { ChangeEventSchema, type ChangeEvent } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";

/**
 * One change as it travels from the outbox to every watch stream's socket: decoded for
 * filtering and metadata, and its one encoding, framed once. Every stream of the region
 * sends these same bytes.
 */
export interface Change {
  readonly version: number;
  readonly event: ChangeEvent;
  /**
   * The stored protobuf encoding of `event` with its length prefix: an element of a
   * repeated `ChangeEvent` field as it sits in a response (ctrl's verbatim.ts).
   */
  readonly bytes: Uint8Array;
}

/** The Change of an outbox row's body (what a read of the outbox and a commit's own rows give alike). */
export function changeOf(body: Uint8Array): Change {
  const event = fromBinary(ChangeEventSchema, body);
  return { version: Number(event.version), event, bytes: new BinaryWriter().bytes(body).finish() };
}

/** An outbox row a transaction of this process wrote, handed to commit listeners after it committed. */
export interface CommittedChange {
  readonly regionId: number;
  readonly version: number;
  /** The row's body: a ChangeEvent's encoding (changeOf makes it a Change). */
  readonly body: Uint8Array;
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
  async read(regionId: number, after: number, limit: number): Promise<Change[]> {
    const rows = await this.#db
      .selectFrom("deployment_changes")
      .select("body")
      .where("region_id", "=", regionId)
      .where("version", ">", after)
      .orderBy("version")
      .limit(limit)
      .execute();
    return rows.map((r) => changeOf(r.body));
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
