// Due deliveries looked up per notifier (store/notifications.ts claim): with one index over all
// notifiers, a dead receiver's backlog (never delivered, the oldest rows) was read past on every
// claim and filled the candidates, so the live notifiers' deliveries were claimed slower the
// longer it grew (B15).
import type { Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createIndex("notification_deliveries_due_by_notifier")
    .on("notification_deliveries")
    .columns(["notifier", "state", "next_attempt_at"])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex("notification_deliveries_due_by_notifier").on("notification_deliveries").execute();
}
