// A region's desired state keeps a workload's secret values, sealed as one for the region's
// agent, beside the resource rather than inside it: the snapshot reads the body alone, and the
// agent fetches the values it does not hold (GetSecretEnvSeals). Rows stored with the seal in
// their body are moved into the column when ctrl starts (the store's checkSecretKeys).
import { sql, type Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("desired_resources").addColumn("secret_env_sealed", sql`mediumblob`).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("desired_resources").dropColumn("secret_env_sealed").execute();
}
