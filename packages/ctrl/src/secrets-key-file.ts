// ctrl's secrets key file (--secrets-key-file): read, checked, and made. It is kept as ssh keeps
// a private key: made with an exclusive create and mode 0600, refused when its group or others
// may read it, and replaced whole (a temporary file written, fsynced and renamed over it) so that
// a crash while a key is added leaves the old file as it was rather than no key at all.
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, fstatSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { generateKeyFile, SecretKeyRing } from "@flotilla/store";

/** The key ring of `file`; an unreadable, malformed or group- or world-readable file is an error naming the flag. Empty: none. */
export function secretKeyRing(file: string): SecretKeyRing | undefined {
  if (file === "") return undefined;
  return SecretKeyRing.parse(readOwnerOnly(file, `--secrets-key-file ${file}`), `--secrets-key-file ${file}`);
}

/**
 * The text of `file`, read through one descriptor whose mode is checked first; throws naming
 * `what` and the mode when its group or others have any access (chmod 600 fixes it).
 */
function readOwnerOnly(file: string, what: string): string {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (error) {
    throw new Error(`${what}: ${error instanceof Error ? error.message : String(error)}`);
  }
  try {
    const mode = fstatSync(fd).mode & 0o777;
    if ((mode & 0o077) !== 0) {
      throw new Error(`${what}: mode ${mode.toString(8).padStart(4, "0")} lets its group or others read it; a key file must be owner-only: chmod 600 ${file}`);
    }
    return readFileSync(fd, "utf8");
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes a key file with one fresh key at `file` (exclusive create, owner-only), or with `add`
 * replaces it by one with a fresh newest key appended (the first step of a rotation): the new
 * content goes to a temporary file beside it, fsynced, then renamed over it. Returns the new
 * key's id.
 */
export function writeSecretsKeyFile(file: string, add: boolean): string {
  // When it was made, and a random tail: two keys made in one second still differ.
  const id = `k${new Date().toISOString().replace(/[-:]/g, "").replace(/\..*/, "")}-${randomBytes(2).toString("hex")}`;
  if (!add) {
    writeExclusive(file, generateKeyFile(id), (error) =>
      (error as NodeJS.ErrnoException).code === "EEXIST" ? new Error(`${file} exists: --add appends a new key to it`) : error,
    );
    return id;
  }
  if (!existsSync(file)) throw new Error(`${file} does not exist: without --add a new file is made`);
  const existing = readOwnerOnly(file, file);
  SecretKeyRing.parse(existing, file);
  const temporary = `${file}.${randomBytes(6).toString("hex")}.tmp`;
  writeExclusive(temporary, generateKeyFile(id, existing), (error) => error);
  try {
    renameSync(temporary, file);
  } catch (error) {
    unlinkSync(temporary);
    throw error;
  }
  // The rename itself is durable once the directory is.
  const dir = openSync(dirname(file), "r");
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
  return id;
}

/** Creates `file` (never an existing one) owner-only with `text`, fsynced; a failed create is `refusal(error)`, a failed write removes it. */
function writeExclusive(file: string, text: string, refusal: (error: unknown) => unknown): void {
  let fd: number;
  try {
    fd = openSync(file, "wx", 0o600);
  } catch (error) {
    throw refusal(error);
  }
  try {
    const bytes = Buffer.from(text);
    for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at);
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    unlinkSync(file);
    throw error;
  }
  closeSync(fd);
}
