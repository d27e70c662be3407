// The audit trail records who was behind each entry as the authorization saw it — an
// operator (static token) or a person signed in with OIDC, with the identity provider's
// groups — and the decision: accepted writes are "allowed", refused attempts "denied".
import type { Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable("audit_events")
    .addColumn("principal_groups", "varchar(2048)", (c) => c.notNull().defaultTo(""))
    .execute();
  await db.schema
    .alterTable("audit_events")
    .addColumn("decision", "varchar(16)", (c) => c.notNull().defaultTo("allowed"))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("audit_events").dropColumn("decision").execute();
  await db.schema.alterTable("audit_events").dropColumn("principal_groups").execute();
}
