// The database URL of ctrl and `pnpm secrets`: a password in it on the command line shows in the
// process list to every user of the host (as --admin-token does), so it may come from a file
// (--database-url-file) or the environment (FLOTILLA_CTRL_DATABASE_URL) instead.
import { readFileSync } from "node:fs";

/** The URL: the first line of `file` when given, else `url`. */
export function databaseUrl(url: string | undefined, file: string | undefined): string | undefined {
  if (!file) return url;
  const fromFile = readFileSync(file, "utf8").split("\n")[0]!.trim();
  if (!fromFile) throw new Error(`--database-url-file ${file} is empty`);
  return fromFile;
}

/** The warning a --database-url carrying a password on the command line `argv` earns, if it does. */
export function databaseUrlWarning(argv: readonly string[]): string | undefined {
  const at = argv.findIndex((arg) => arg === "--database-url" || arg.startsWith("--database-url="));
  if (at < 0) return undefined;
  const value = argv[at]!.includes("=") ? argv[at]!.slice("--database-url=".length) : argv[at + 1];
  let password = "";
  try {
    password = new URL(value ?? "").password;
  } catch {
    return undefined;
  }
  if (!password) return undefined;
  return "--database-url shows the database password to every user of this host (process list); use --database-url-file or FLOTILLA_CTRL_DATABASE_URL";
}
