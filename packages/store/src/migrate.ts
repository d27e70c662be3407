// Applies the versioned migrations of packages/store/migrations/ (shipped with the package,
// so a production bundle of ctrl carries them).
import { readdir } from "node:fs/promises";
import { fileURLToPath, pathToFileURL } from "node:url";
import { basename, extname, join } from "node:path";
import type { Kysely } from "kysely";
import { Migrator, type Migration, type MigrationProvider, type MigrationResultSet } from "kysely/migration";

const MIGRATIONS_DIR = fileURLToPath(new URL("../migrations/", import.meta.url));
/** The migrations are in this module's language: .ts in the sources, .js in a production bundle (deploy/to-javascript.ts). */
const MIGRATION_EXTENSION = extname(fileURLToPath(import.meta.url));

const directoryProvider = (dir: string): MigrationProvider => ({
  async getMigrations() {
    const migrations: Record<string, Migration> = {};
    for (const file of (await readdir(dir)).filter((f) => f.endsWith(MIGRATION_EXTENSION)).sort()) {
      migrations[basename(file, MIGRATION_EXTENSION)] = await import(pathToFileURL(join(dir, file)).href);
    }
    return migrations;
  },
});

/** Brings the schema to the newest migration. Safe to run concurrently from several ctrl replicas. */
export async function migrateToLatest(db: Kysely<any>): Promise<string[]> {
  const migrator = new Migrator({ db, provider: directoryProvider(MIGRATIONS_DIR) });
  const result: MigrationResultSet = await migrator.migrateToLatest();
  if (result.error) {
    const failed = result.results?.find((r) => r.status === "Error");
    throw new Error(`migration ${failed?.migrationName ?? "?"} failed: ${String(result.error)}`, { cause: result.error });
  }
  return (result.results ?? []).filter((r) => r.status === "Success").map((r) => r.migrationName);
}

/** Names of the migrations not yet applied to the database (empty when its schema is current); throws when it cannot be read. */
export async function pendingMigrations(db: Kysely<any>): Promise<string[]> {
  const migrations = await new Migrator({ db, provider: directoryProvider(MIGRATIONS_DIR) }).getMigrations();
  return migrations.filter((migration) => migration.executedAt === undefined).map((migration) => migration.name);
}
