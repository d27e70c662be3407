// Notifications (docs/guides/notifications.md): notifiers, the events written in the
// transaction of the transition that caused them, and one delivery row per (event, notifier),
// claimed by any ctrl replica with a compare-and-set on its generation. `agents.lost_seen` is
// the last_seen of the silence an agent.lost event was written for (one event per silence,
// whichever replica notices it first).
import { sql, type Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("notifiers")
    .addColumn("name", "varchar(63)", (c) => c.primaryKey())
    .addColumn("spec", "text", (c) => c.notNull())
    // The signing secret: sealed under ctrl's secrets key file when it has one (secret_sealed 1).
    .addColumn("secret", sql`mediumblob`, (c) => c.notNull())
    .addColumn("secret_sealed", "integer", (c) => c.notNull())
    // A Slack notifier's webhook URL, whose path is Slack's credential: stored as `secret` is
    // (the same secret_sealed), its spec keeping the URL with the path cut off.
    .addColumn("url_secret", sql`mediumblob`)
    .addColumn("secret_time", "bigint", (c) => c.notNull())
    .addColumn("create_time", "bigint", (c) => c.notNull())
    .addColumn("update_time", "bigint", (c) => c.notNull())
    .execute();
  await db.schema
    .createTable("notification_events")
    .addColumn("id", "varchar(64)", (c) => c.primaryKey())
    .addColumn("event", "integer", (c) => c.notNull())
    .addColumn("subject", "varchar(255)", (c) => c.notNull())
    .addColumn("data", "text", (c) => c.notNull())
    .addColumn("time", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("notification_events_by_time").on("notification_events").column("time").execute();
  await db.schema
    .createTable("notification_deliveries")
    .addColumn("id", "integer", (c) => c.primaryKey().autoIncrement())
    .addColumn("event_id", "varchar(64)", (c) => c.notNull())
    .addColumn("notifier", "varchar(63)", (c) => c.notNull())
    .addColumn("state", "integer", (c) => c.notNull())
    .addColumn("generation", "bigint", (c) => c.notNull())
    .addColumn("attempts", "integer", (c) => c.notNull())
    .addColumn("next_attempt_at", "bigint", (c) => c.notNull())
    .addColumn("last_status", "integer", (c) => c.notNull())
    .addColumn("last_error", "varchar(1024)", (c) => c.notNull())
    .addColumn("create_time", "bigint", (c) => c.notNull())
    .addColumn("update_time", "bigint", (c) => c.notNull())
    .execute();
  await db.schema.createIndex("notification_deliveries_due").on("notification_deliveries").columns(["state", "next_attempt_at"]).execute();
  await db.schema.createIndex("notification_deliveries_by_notifier").on("notification_deliveries").columns(["notifier", "id"]).execute();
  await db.schema.createIndex("notification_deliveries_by_event").on("notification_deliveries").column("event_id").execute();
  await db.schema.alterTable("agents").addColumn("lost_seen", "bigint").execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("agents").dropColumn("lost_seen").execute();
  await db.schema.dropTable("notification_deliveries").execute();
  await db.schema.dropTable("notification_events").execute();
  await db.schema.dropTable("notifiers").execute();
}
