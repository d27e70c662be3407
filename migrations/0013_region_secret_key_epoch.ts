// A region's secret key epoch: the keys ctrl derives for the region's agent (the store's
// SecretKeyRing) depend on it, and revoking one of the region's agent tokens moves it, so a
// revoked agent's keys open no value sealed since. Existing regions start at 0, whose keys are
// the ones derived before epochs existed: every stored seal still opens.
import type { Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable("regions")
    .addColumn("secret_key_epoch", "integer", (c) => c.notNull().defaultTo(0))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("regions").dropColumn("secret_key_epoch").execute();
}
