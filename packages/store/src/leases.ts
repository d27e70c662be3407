// Named leases in the database: at most one holder at a time, until its expiry. A holder
// renews before its lease expires; anyone may take a lease that has expired. The clocks of
// the replicas are compared through the times they write, so they must agree to well within
// the lease's duration (as for any lease).
import type { Kysely } from "kysely";
import { isDuplicateKey } from "./regions.ts";
import type { Database } from "./schema.ts";

export class Leases {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /**
   * Takes or renews lease `name` for `holder` until `now + durationMs`: true if `holder`
   * holds it now, false if another holder's lease has not expired.
   */
  async acquire(name: string, holder: string, durationMs: number, now = Date.now()): Promise<boolean> {
    const taken = await this.#db
      .updateTable("leases")
      .set({ holder, expires_at: now + durationMs })
      .where("name", "=", name)
      .where((eb) => eb.or([eb("holder", "=", holder), eb("expires_at", "<", now)]))
      .executeTakeFirst();
    if (Number(taken.numUpdatedRows) === 1) return true;
    try {
      await this.#db
        .insertInto("leases")
        .values({ name, holder, expires_at: now + durationMs })
        .execute();
      return true;
    } catch (error) {
      if (isDuplicateKey(error)) return false;
      throw error;
    }
  }

  /** Gives lease `name` up if `holder` holds it, so that another may take it at once. */
  async release(name: string, holder: string): Promise<void> {
    await this.#db.updateTable("leases").set({ expires_at: 0 }).where("name", "=", name).where("holder", "=", holder).execute();
  }
}
