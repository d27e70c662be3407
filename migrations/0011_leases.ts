// Named leases held by one ctrl replica at a time (the rollout driver's): who holds it, and
// until when; a holder renews before then, another takes it once it has expired.
import type { Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("leases")
    .addColumn("name", "varchar(63)", (c) => c.primaryKey())
    .addColumn("holder", "varchar(255)", (c) => c.notNull())
    .addColumn("expires_at", "bigint", (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable("leases").execute();
}
