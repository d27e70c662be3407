// Secret values at rest. A key ring holds the data keys of a key file (ctrl's
// --secrets-key-file), oldest first: a value is sealed under the newest (AES-256-GCM, bound
// to its deployment and name) and opened under whichever key sealed it, so a rotation only
// adds a key, re-seals (rotateSecrets) and then drops the old one. A fingerprint is an
// HMAC-SHA-256 of the value under a key derived from the newest data key: it shows that a
// value changed without being a plain hash anyone could match guesses against.
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync, randomBytes, type KeyObject } from "node:crypto";

const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
/** Hex digits of a fingerprint (64 bits: enough to tell values apart, too few to be a hash of record). */
const FINGERPRINT_DIGITS = 16;
const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;

interface DataKey {
  readonly id: string;
  /** Made once: preparing a raw key Buffer on every call was most of the cost of opening a value. */
  readonly key: KeyObject;
}

/** A key file's content, as `SecretKeyRing.parse` reads and `generateKeyFile` writes it. */
interface KeyFile {
  keys: { id: string; key: string }[];
}

export class SecretKeyRing {
  readonly #keys: Map<string, DataKey>;
  readonly #newest: DataKey;
  readonly #fingerprintKey: Buffer;

  private constructor(keys: DataKey[]) {
    this.#keys = new Map(keys.map((k) => [k.id, k]));
    this.#newest = keys[keys.length - 1]!;
    this.#fingerprintKey = Buffer.from(hkdfSync("sha256", this.#newest.key, Buffer.alloc(0), "flotilla secret fingerprint", KEY_BYTES));
  }

  /**
   * Reads a key file: JSON {"keys": [{"id", "key": base64 of 32 bytes}, …]}, oldest first.
   * Throws an error naming `source` and what is wrong.
   */
  static parse(text: string, source: string): SecretKeyRing {
    let file: KeyFile;
    try {
      file = JSON.parse(text) as KeyFile;
    } catch {
      throw new Error(`${source}: not a secrets key file (JSON {"keys": [{"id", "key"}]})`);
    }
    if (!Array.isArray(file?.keys) || file.keys.length === 0) throw new Error(`${source}: "keys" must list at least one key`);
    const seen = new Set<string>();
    const keys = file.keys.map((entry, i) => {
      const id = entry?.id;
      if (typeof id !== "string" || !KEY_ID.test(id)) throw new Error(`${source}: keys[${i}].id must be 1 to 64 of A-Z a-z 0-9 . _ -`);
      if (seen.has(id)) throw new Error(`${source}: keys[${i}].id ${JSON.stringify(id)} appears twice`);
      seen.add(id);
      const key = typeof entry.key === "string" ? Buffer.from(entry.key, "base64") : Buffer.alloc(0);
      if (key.length !== KEY_BYTES) throw new Error(`${source}: keys[${i}].key must be ${KEY_BYTES} bytes, base64`);
      return { id, key: createSecretKey(key) };
    });
    return new SecretKeyRing(keys);
  }

  /** The id of the key new values are sealed under. */
  get newestKeyId(): string {
    return this.#newest.id;
  }

  /** `value` sealed under the newest key, bound to `context` (which deployment and name). */
  seal(context: string, value: string): Uint8Array {
    const id = Buffer.from(this.#newest.id);
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.#newest.key, nonce);
    cipher.setAAD(Buffer.from(context));
    const ciphertext = Buffer.concat([cipher.update(value, "utf8"), cipher.final()]);
    return Buffer.concat([Buffer.of(id.length), id, nonce, ciphertext, cipher.getAuthTag()]);
  }

  /** The value `sealed` holds; throws naming the key when it is not in the ring or the seal is broken. */
  open(context: string, sealed: Uint8Array): string {
    const bytes = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
    const id = sealedKeyId(bytes);
    const key = this.#keys.get(id);
    if (!key) throw new Error(`secret ${context} is sealed under key ${JSON.stringify(id)}, which the secrets key file does not hold`);
    const start = 1 + bytes[0]!;
    const nonce = bytes.subarray(start, start + NONCE_BYTES);
    const tag = bytes.subarray(bytes.length - TAG_BYTES);
    const decipher = createDecipheriv("aes-256-gcm", key.key, nonce);
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([decipher.update(bytes.subarray(start + NONCE_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString("utf8");
    } catch {
      throw new Error(`secret ${context} does not open under key ${JSON.stringify(id)} (a different key of the same id?)`);
    }
  }

  /** The value's keyed fingerprint (hex). */
  fingerprint(value: string): string {
    return createHmac("sha256", this.#fingerprintKey).update(value, "utf8").digest("hex").slice(0, FINGERPRINT_DIGITS);
  }
}

/** The id of the key `sealed` was sealed under. */
export function sealedKeyId(sealed: Uint8Array): string {
  return Buffer.from(sealed.subarray(1, 1 + sealed[0]!)).toString();
}

/** A new key file's content with one fresh key, or `existing`'s keys plus a fresh newest one. */
export function generateKeyFile(id: string, existing?: string): string {
  const file: KeyFile = existing ? (JSON.parse(existing) as KeyFile) : { keys: [] };
  file.keys.push({ id, key: randomBytes(KEY_BYTES).toString("base64") });
  return `${JSON.stringify(file, null, 2)}\n`;
}
