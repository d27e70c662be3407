// Desired state, the commit-ordered outbox and agent tokens. Portable across SQLite and
// MySQL: type names are ones both accept (SQLite maps `mediumblob` to BLOB affinity).
import { sql, type Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("regions")
    .addColumn("id", "integer", (c) => c.primaryKey().autoIncrement())
    .addColumn("name", "varchar(63)", (c) => c.notNull().unique())
    .addColumn("head_version", "bigint", (c) => c.notNull().defaultTo(0))
    .addColumn("create_time", "bigint", (c) => c.notNull())
    .execute();

  for (const table of ["deployments", "sentinels", "network_policies"]) {
    await db.schema
      .createTable(table)
      .addColumn("id", "varchar(63)", (c) => c.primaryKey())
      .addColumn("revision", "bigint", (c) => c.notNull())
      .addColumn("body", sql`mediumblob`, (c) => c.notNull())
      .addColumn("create_time", "bigint", (c) => c.notNull())
      .addColumn("update_time", "bigint", (c) => c.notNull())
      .execute();
  }

  await db.schema
    .createTable("placements")
    .addColumn("resource_type", "integer", (c) => c.notNull())
    .addColumn("resource_id", "varchar(63)", (c) => c.notNull())
    .addColumn("region_id", "integer", (c) => c.notNull().references("regions.id"))
    .addPrimaryKeyConstraint("placements_pk", ["resource_type", "resource_id", "region_id"])
    .execute();
  // Region deletion asks "does anything still live here?".
  await db.schema.createIndex("placements_by_region").on("placements").column("region_id").execute();

  await db.schema
    .createTable("desired_resources")
    .addColumn("region_id", "integer", (c) => c.notNull().references("regions.id"))
    .addColumn("resource_type", "integer", (c) => c.notNull())
    .addColumn("resource_id", "varchar(63)", (c) => c.notNull())
    .addColumn("namespace", "varchar(63)", (c) => c.notNull())
    .addColumn("version", "bigint", (c) => c.notNull())
    .addColumn("body", sql`mediumblob`, (c) => c.notNull())
    // The snapshot's keyset order.
    .addPrimaryKeyConstraint("desired_resources_pk", ["region_id", "resource_type", "resource_id"])
    .execute();
  // A write reads a resource's rows in every region.
  await db.schema.createIndex("desired_resources_by_resource").on("desired_resources").columns(["resource_type", "resource_id"]).execute();

  await db.schema
    .createTable("deployment_changes")
    .addColumn("region_id", "integer", (c) => c.notNull())
    .addColumn("version", "bigint", (c) => c.notNull())
    .addColumn("resource_type", "integer", (c) => c.notNull())
    .addColumn("resource_id", "varchar(63)", (c) => c.notNull())
    .addColumn("body", sql`mediumblob`, (c) => c.notNull())
    .addColumn("create_time", "bigint", (c) => c.notNull())
    // Watch reads `region_id = ? AND version > ? ORDER BY version`.
    .addPrimaryKeyConstraint("deployment_changes_pk", ["region_id", "version"])
    .execute();
  // Retention finds the newest version older than the window.
  await db.schema.createIndex("deployment_changes_by_time").on("deployment_changes").columns(["region_id", "create_time"]).execute();

  await db.schema
    .createTable("agent_tokens")
    .addColumn("id", "varchar(32)", (c) => c.primaryKey())
    .addColumn("region_id", "integer", (c) => c.notNull().references("regions.id"))
    .addColumn("token_hash", "char(64)", (c) => c.notNull().unique())
    .addColumn("create_time", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("agent_tokens_by_region").on("agent_tokens").column("region_id").execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ["agent_tokens", "deployment_changes", "desired_resources", "placements", "network_policies", "sentinels", "deployments", "regions"]) {
    await db.schema.dropTable(table).execute();
  }
}
