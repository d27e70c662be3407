// What agents observe, per resource and region, with the status ctrl last projected from
// it; and each region's agent liveness.
import { sql, type Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("observations")
    .addColumn("region_id", "integer", (c) => c.notNull())
    .addColumn("resource_type", "integer", (c) => c.notNull())
    .addColumn("resource_id", "varchar(63)", (c) => c.notNull())
    // ctrl.v1.ResourceObservation as last reported.
    .addColumn("body", sql`mediumblob`, (c) => c.notNull())
    .addColumn("observed_at", "bigint", (c) => c.notNull())
    // The last projection: the previous status the next projection starts from.
    .addColumn("phase", "integer", (c) => c.notNull())
    .addColumn("reason", "varchar(1024)", (c) => c.notNull())
    .addPrimaryKeyConstraint("observations_pk", ["region_id", "resource_type", "resource_id"])
    .execute();
  // Get/List read a resource's observations in every region.
  await db.schema.createIndex("observations_by_resource").on("observations").columns(["resource_type", "resource_id"]).execute();

  await db.schema
    .createTable("agents")
    .addColumn("region_id", "integer", (c) => c.primaryKey())
    .addColumn("last_seen", "bigint", (c) => c.notNull())
    .addColumn("applied_version", "bigint", (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable("agents").execute();
  await db.schema.dropTable("observations").execute();
}
