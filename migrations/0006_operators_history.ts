// Operator accounts (named tokens with a role), the revisions of every operator-owned
// object, the audit trail of writes, and the status events the status stream follows.
import { sql, type Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("operators")
    .addColumn("name", "varchar(63)", (c) => c.primaryKey())
    .addColumn("role", "integer", (c) => c.notNull())
    .addColumn("token_hash", "char(64)", (c) => c.notNull().unique())
    .addColumn("create_time", "bigint", (c) => c.notNull())
    .addColumn("expire_time", "bigint")
    .addColumn("last_use_time", "bigint")
    .addColumn("created_by", "varchar(63)", (c) => c.notNull())
    .execute();
  await db.schema
    .createTable("resource_revisions")
    .addColumn("resource_type", "integer", (c) => c.notNull())
    .addColumn("resource_id", "varchar(63)", (c) => c.notNull())
    .addColumn("revision", "bigint", (c) => c.notNull())
    .addColumn("body", sql`mediumblob`, (c) => c.notNull())
    .addColumn("actor", "varchar(63)", (c) => c.notNull())
    .addColumn("message", "varchar(1024)", (c) => c.notNull())
    .addColumn("create_time", "bigint", (c) => c.notNull())
    .addPrimaryKeyConstraint("resource_revisions_pk", ["resource_type", "resource_id", "revision"])
    .execute();
  await db.schema
    .createTable("audit_events")
    .addColumn("id", "integer", (c) => c.primaryKey().autoIncrement())
    .addColumn("time", "bigint", (c) => c.notNull())
    .addColumn("actor", "varchar(63)", (c) => c.notNull())
    .addColumn("action", "varchar(63)", (c) => c.notNull())
    .addColumn("object_kind", "varchar(32)", (c) => c.notNull())
    .addColumn("object_id", "varchar(255)", (c) => c.notNull())
    .addColumn("revision", "bigint", (c) => c.notNull())
    .addColumn("message", "varchar(1024)", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("audit_events_by_time").on("audit_events").column("time").execute();
  await db.schema
    .createTable("status_events")
    .addColumn("seq", "integer", (c) => c.primaryKey().autoIncrement())
    .addColumn("resource_type", "integer", (c) => c.notNull())
    .addColumn("resource_id", "varchar(63)", (c) => c.notNull())
    .addColumn("create_time", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("status_events_by_time").on("status_events").column("create_time").execute();
  // The highest status event pruned: a stream resumed from an older cursor must start again.
  await db.schema
    .createTable("status_events_pruned")
    .addColumn("id", "integer", (c) => c.primaryKey())
    .addColumn("through_seq", "bigint", (c) => c.notNull())
    .execute();
  await db.insertInto("status_events_pruned").values({ id: 1, through_seq: 0 }).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable("status_events_pruned").execute();
  await db.schema.dropTable("status_events").execute();
  await db.schema.dropTable("audit_events").execute();
  await db.schema.dropTable("resource_revisions").execute();
  await db.schema.dropTable("operators").execute();
}
