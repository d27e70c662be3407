// Staged rollouts (ARCHITECTURE §9): one row per rollout, its plan and progress as JSON,
// changed only by compare-and-set on (id, generation); `due_at` is when a gate must be looked
// at again without an observation (a bake's end, a wave's deadline), so one indexed query
// finds the next one due. Each transition is kept, in order, for the record.
import type { Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("rollouts")
    .addColumn("id", "varchar(100)", (c) => c.primaryKey())
    .addColumn("deployment_id", "varchar(63)", (c) => c.notNull())
    .addColumn("to_revision", "bigint", (c) => c.notNull())
    .addColumn("from_revision", "bigint", (c) => c.notNull())
    .addColumn("state", "integer", (c) => c.notNull())
    .addColumn("current_wave", "integer", (c) => c.notNull())
    .addColumn("generation", "bigint", (c) => c.notNull())
    .addColumn("on_failure", "integer", (c) => c.notNull())
    .addColumn("reason", "varchar(1024)", (c) => c.notNull())
    .addColumn("plan", "text", (c) => c.notNull())
    .addColumn("due_at", "bigint")
    .addColumn("create_time", "bigint", (c) => c.notNull())
    .addColumn("update_time", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("rollouts_by_deployment").on("rollouts").columns(["deployment_id", "create_time"]).execute();
  await db.schema.createIndex("rollouts_by_state").on("rollouts").columns(["state", "create_time"]).execute();
  await db.schema.createIndex("rollouts_by_due").on("rollouts").column("due_at").execute();
  await db.schema
    .createTable("rollout_transitions")
    .addColumn("id", "integer", (c) => c.primaryKey().autoIncrement())
    .addColumn("rollout_id", "varchar(100)", (c) => c.notNull())
    .addColumn("generation", "bigint", (c) => c.notNull())
    .addColumn("from_state", "integer", (c) => c.notNull())
    .addColumn("to_state", "integer", (c) => c.notNull())
    .addColumn("wave", "integer", (c) => c.notNull())
    .addColumn("action", "varchar(32)", (c) => c.notNull())
    .addColumn("actor", "varchar(255)", (c) => c.notNull())
    .addColumn("reason", "varchar(1024)", (c) => c.notNull())
    .addColumn("time", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("rollout_transitions_by_rollout").on("rollout_transitions").columns(["rollout_id", "id"]).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable("rollout_transitions").execute();
  await db.schema.dropTable("rollouts").execute();
}
