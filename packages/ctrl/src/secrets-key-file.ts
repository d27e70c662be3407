// ctrl's secrets key file (--secrets-key-file): read, checked, and made.
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { generateKeyFile, SecretKeyRing } from "@flotilla/store";

/** The key ring of `file`; an unreadable or malformed file is an error naming the flag. Empty: none. */
export function secretKeyRing(file: string): SecretKeyRing | undefined {
  if (file === "") return undefined;
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new Error(`--secrets-key-file ${file}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return SecretKeyRing.parse(text, `--secrets-key-file ${file}`);
}

/**
 * Writes a key file with one fresh key at `file` (owner-only), or with `add` appends a fresh
 * newest key to the existing one (the first step of a rotation). Returns the new key's id.
 */
export function writeSecretsKeyFile(file: string, add: boolean): string {
  const existing = existsSync(file) ? readFileSync(file, "utf8") : undefined;
  if (existing !== undefined && !add) throw new Error(`${file} exists: --add appends a new key to it`);
  if (existing === undefined && add) throw new Error(`${file} does not exist: without --add a new file is made`);
  if (existing !== undefined) SecretKeyRing.parse(existing, file);
  // When it was made, and a random tail: two keys made in one second still differ.
  const id = `k${new Date().toISOString().replace(/[-:]/g, "").replace(/\..*/, "")}-${randomBytes(2).toString("hex")}`;
  writeFileSync(file, generateKeyFile(id, existing), { mode: 0o600 });
  return id;
}
