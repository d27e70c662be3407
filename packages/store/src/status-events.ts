// "This object's status may have changed" events, appended in the transaction of every
// write that can change a projected status (a spec change, a delete, an observation). The
// operators' status stream reads them in order and re-reads the objects' statuses: level-
// triggered, so events may be coalesced or repeated without harm.
import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";

export interface StatusEvent {
  seq: number;
  type: number;
  id: string;
}

export class StatusEvents {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /** Appends one event per object, in `tx`. */
  static async append(tx: Kysely<Database>, objects: { type: number; id: string }[], now: number): Promise<void> {
    if (objects.length === 0) return;
    await tx
      .insertInto("status_events")
      .values(objects.map((o) => ({ resource_type: o.type, resource_id: o.id, create_time: now })))
      .execute();
  }

  /** Events after `seq`, in order, at most `limit`. */
  async read(after: number, limit: number): Promise<StatusEvent[]> {
    const rows = await this.#db
      .selectFrom("status_events")
      .select(["seq", "resource_type", "resource_id"])
      .where("seq", ">", after)
      .orderBy("seq")
      .limit(limit)
      .execute();
    return rows.map((r) => ({ seq: Number(r.seq), type: r.resource_type, id: r.resource_id }));
  }

  /** The events of these numbers that exist (looking again for numbers skipped earlier). */
  async readSome(seqs: number[]): Promise<StatusEvent[]> {
    const found: StatusEvent[] = [];
    for (let i = 0; i < seqs.length; i += 1000) {
      const rows = await this.#db
        .selectFrom("status_events")
        .select(["seq", "resource_type", "resource_id"])
        .where("seq", "in", seqs.slice(i, i + 1000))
        .execute();
      for (const r of rows) found.push({ seq: Number(r.seq), type: r.resource_type, id: r.resource_id });
    }
    return found;
  }

  /** The newest event's seq (0: none), and the highest pruned (events after it are all kept). */
  async bounds(): Promise<{ head: number; prunedThrough: number }> {
    const head = await this.#db
      .selectFrom("status_events")
      .select((eb) => eb.fn.max("seq").as("head"))
      .executeTakeFirst();
    const pruned = await this.#db.selectFrom("status_events_pruned").select("through_seq").where("id", "=", 1).executeTakeFirst();
    return { head: Number(head?.head ?? 0), prunedThrough: Number(pruned?.through_seq ?? 0) };
  }

  /** Deletes events older than `maxAgeMs`, keeping the newest (so the head stays known); how many. */
  async prune(maxAgeMs: number, now = Date.now()): Promise<number> {
    return this.#db.transaction().execute(async (tx) => {
      const { head } = await new StatusEvents(tx).bounds();
      const last = await tx
        .selectFrom("status_events")
        .select((eb) => eb.fn.max("seq").as("seq"))
        .where("create_time", "<", now - maxAgeMs)
        .where("seq", "<", head)
        .executeTakeFirst();
      const through = Number(last?.seq ?? 0);
      if (through === 0) return 0;
      // Marked first: a stream checking its cursor against the mark never misses a deleted event.
      await tx.updateTable("status_events_pruned").set({ through_seq: through }).where("id", "=", 1).where("through_seq", "<", through).execute();
      const result = await tx.deleteFrom("status_events").where("seq", "<=", through).executeTakeFirst();
      return Number(result.numDeletedRows);
    });
  }
}
