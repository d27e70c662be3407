// Applies the versioned migrations of the repository's top-level migrations/ (their index
// imports each statically, so ctrl's bundle carries them).
import type { Kysely } from "kysely";
import { Migrator, type MigrationProvider, type MigrationResultSet } from "kysely/migration";
import { MIGRATIONS } from "../../../migrations/index.ts";

const provider: MigrationProvider = { getMigrations: async () => ({ ...MIGRATIONS }) };

/** Brings the schema to the newest migration. Safe to run concurrently from several ctrl replicas. */
export async function migrateToLatest(db: Kysely<any>): Promise<string[]> {
  const migrator = new Migrator({ db, provider });
  const result: MigrationResultSet = await migrator.migrateToLatest();
  if (result.error) {
    const failed = result.results?.find((r) => r.status === "Error");
    throw new Error(`migration ${failed?.migrationName ?? "?"} failed: ${String(result.error)}`, { cause: result.error });
  }
  return (result.results ?? []).filter((r) => r.status === "Success").map((r) => r.migrationName);
}

/** Names of the migrations not yet applied to the database (empty when its schema is current); throws when it cannot be read. */
export async function pendingMigrations(db: Kysely<any>): Promise<string[]> {
  const migrations = await new Migrator({ db, provider }).getMigrations();
  return migrations.filter((migration) => migration.executedAt === undefined).map((migration) => migration.name);
}
