// Rollout analysis (docs/rollout-analysis.md): each region's Prometheus address, which its
// agent queries, and the measurements agents report, one row per (bake, analysis, region,
// index) so that a measurement sent twice (a retried report, two agents) is kept once.
import type { Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("regions").addColumn("prometheus_address", "varchar(2048)").execute();
  await db.schema
    .createTable("analysis_measurements")
    .addColumn("rollout_id", "varchar(100)", (c) => c.notNull())
    .addColumn("wave", "integer", (c) => c.notNull())
    .addColumn("bake_start", "bigint", (c) => c.notNull())
    .addColumn("analysis", "varchar(63)", (c) => c.notNull())
    .addColumn("region", "varchar(63)", (c) => c.notNull())
    .addColumn("idx", "integer", (c) => c.notNull())
    .addColumn("revision", "bigint", (c) => c.notNull())
    .addColumn("taken_at", "bigint", (c) => c.notNull())
    .addColumn("value", "double precision")
    .addColumn("error", "varchar(1024)")
    .addPrimaryKeyConstraint("analysis_measurements_pk", ["rollout_id", "wave", "bake_start", "analysis", "region", "idx"])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable("analysis_measurements").execute();
  await db.schema.alterTable("regions").dropColumn("prometheus_address").execute();
}
