// Since when each region's newest leader leads (the first report of its epoch): what the
// console's fleet view shows beside the leader's identity.
import type { Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("leader_epochs").addColumn("leader_since", "bigint").execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("leader_epochs").dropColumn("leader_since").execute();
}
