// Projects (ctrl.v1.Project): a team's slice of the fleet. Each operator-owned resource
// belongs to one, by a `project` column that lists filter on; every resource written before
// projects existed belongs to "default", which this migration creates with every namespace and
// every region and no role bindings (fleet-wide roles reach it as they reach everything). The
// audit trail records each event's project, so that a project's members read only theirs.
import type { Kysely } from "kysely";

const RESOURCE_TABLES = ["deployments", "sentinels", "network_policies"] as const;
/** The proto3 JSON of ctrl.v1.Project without name and times: what a project row's `spec` holds. */
const DEFAULT_PROJECT_SPEC = JSON.stringify({
  description: "Everything created before projects, and what names no project.",
  namespaces: ["*"],
  regions: { names: ["*"] },
});

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("projects")
    .addColumn("name", "varchar(63)", (c) => c.primaryKey())
    .addColumn("spec", "text", (c) => c.notNull())
    .addColumn("create_time", "bigint", (c) => c.notNull())
    .addColumn("update_time", "bigint", (c) => c.notNull())
    .execute();
  const now = Date.now();
  await db.insertInto("projects").values({ name: "default", spec: DEFAULT_PROJECT_SPEC, create_time: now, update_time: now }).execute();
  for (const table of RESOURCE_TABLES) {
    await db.schema
      .alterTable(table)
      .addColumn("project", "varchar(63)", (c) => c.notNull().defaultTo("default"))
      .execute();
    await db.schema.createIndex(`${table}_by_project`).on(table).columns(["project", "id"]).execute();
  }
  await db.schema
    .alterTable("audit_events")
    .addColumn("project", "varchar(63)", (c) => c.notNull().defaultTo(""))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("audit_events").dropColumn("project").execute();
  for (const table of RESOURCE_TABLES) {
    await db.schema.dropIndex(`${table}_by_project`).on(table).execute();
    await db.schema.alterTable(table).dropColumn("project").execute();
  }
  await db.schema.dropTable("projects").execute();
}
