// Agent token lifecycle: an optional expiry and when a token was last used (to a minute).
// Revoking a token deletes its row.
import type { Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("agent_tokens").addColumn("expire_time", "bigint").execute();
  await db.schema.alterTable("agent_tokens").addColumn("last_use_time", "bigint").execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("agent_tokens").dropColumn("last_use_time").execute();
  await db.schema.alterTable("agent_tokens").dropColumn("expire_time").execute();
}
