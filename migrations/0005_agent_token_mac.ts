// Agent tokens carry a MAC under a key of this deployment, so that ctrl refuses a forged
// token from the token alone, without a query. The key is made here, once, and shared by
// every replica through the database. Tokens minted before have no MAC (token_format 1);
// ctrl recognises them by their hash.
import { randomBytes } from "node:crypto";
import type { Kysely } from "kysely";

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("server_keys")
    .addColumn("name", "varchar(64)", (c) => c.primaryKey())
    .addColumn("key_hex", "varchar(128)", (c) => c.notNull())
    .execute();
  await db
    .insertInto("server_keys")
    .values({ name: "agent_token_mac", key_hex: randomBytes(32).toString("hex") })
    .execute();
  await db.schema
    .alterTable("agent_tokens")
    .addColumn("token_format", "integer", (c) => c.notNull().defaultTo(1))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable("agent_tokens").dropColumn("token_format").execute();
  await db.schema.dropTable("server_keys").execute();
}
