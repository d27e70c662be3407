// Each region's labels (Kubernetes label syntax), which label selectors pick regions by: a JSON
// object of strings. Nullable, NULL meaning none: MySQL gives a TEXT column no literal default.
import type { Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("regions").addColumn("labels", "text").execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("regions").dropColumn("labels").execute();
}
