// The highest leader epoch (the Lease's leaseTransitions) each region's agents have reported
// with, and its holder: ctrl refuses reports of older epochs (fencing a deposed leader).
import type { Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("leader_epochs")
    .addColumn("region_id", "integer", (c) => c.primaryKey())
    .addColumn("epoch", "bigint", (c) => c.notNull())
    // A Lease's holderIdentity is at most 253 characters (its validation in Kubernetes).
    .addColumn("holder_identity", "varchar(253)", (c) => c.notNull())
    .addColumn("updated_at", "bigint", (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable("leader_epochs").execute();
}
