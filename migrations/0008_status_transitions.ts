// Each change of a resource's phase in a region, as ctrl projected it: what `flotilla describe`
// shows as the recent transitions. Kept as long as the audit trail (--audit-max-age).
import type { Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("status_transitions")
    .addColumn("id", "integer", (c) => c.primaryKey().autoIncrement())
    .addColumn("region_id", "integer", (c) => c.notNull())
    .addColumn("resource_type", "integer", (c) => c.notNull())
    .addColumn("resource_id", "varchar(63)", (c) => c.notNull())
    .addColumn("time", "bigint", (c) => c.notNull())
    .addColumn("from_phase", "integer", (c) => c.notNull())
    .addColumn("to_phase", "integer", (c) => c.notNull())
    .addColumn("reason", "varchar(1024)", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("status_transitions_by_resource").on("status_transitions").columns(["resource_type", "resource_id", "id"]).execute();
  await db.schema.createIndex("status_transitions_by_time").on("status_transitions").column("time").execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable("status_transitions").execute();
}
