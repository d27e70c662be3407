// `pnpm migrate [--database-url <url>]`: applies pending migrations and exits.
import { parseArgs } from "node:util";
import { DEFAULT_DATABASE_URL, openDatabase } from "./database.ts";
import { migrateToLatest } from "./migrate.ts";

const { values } = parseArgs({ options: { "database-url": { type: "string" }, help: { type: "boolean" } } });
if (values.help) {
  console.log(`usage: pnpm migrate [--database-url <url>]   (env FLOTILLA_CTRL_DATABASE_URL; default ${DEFAULT_DATABASE_URL})`);
  process.exit(0);
}
const database = openDatabase(values["database-url"] ?? process.env.FLOTILLA_CTRL_DATABASE_URL ?? process.env.FLOTILLA_DATABASE_URL ?? DEFAULT_DATABASE_URL);
try {
  const applied = await migrateToLatest(database.db);
  console.log(applied.length ? `applied: ${applied.join(", ")}` : "schema is up to date");
} finally {
  await database.close();
}
