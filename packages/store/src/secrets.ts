// Secret values at rest. A key ring holds the data keys of a key file (ctrl's
// --secrets-key-file), oldest first: a value is sealed under the newest (AES-256-GCM, bound
// to its deployment and name, @flotilla/runtime/sealed-values) and opened under whichever key
// sealed it, so a rotation only adds a key, re-seals (rotateSecrets) and then drops the old one.
// A fingerprint is an HMAC-SHA-256 of the value under a key derived from the newest data key:
// it shows that a value changed without being a plain hash anyone could match guesses against.
//
// The desired state of a region holds its values sealed for that region's agent, under a key
// derived from the data key for the region (id "k1/r7": data key k1, region row 7). The agent
// receives its region's keys (regionKeys) and nothing else, so it opens its own region's values
// and no other's, and ctrl streams stored bytes without opening anything. A region seal is
// deterministic (its nonce an HMAC of what it seals, as in SIV): the same value sealed again is
// the same bytes, so recomputing a region's desired state is no change.
import { createHmac, createSecretKey, hkdfSync, randomBytes, type KeyObject } from "node:crypto";
import { NONCE_BYTES, openValue, sealedKeyId, sealValue } from "@flotilla/runtime/sealed-values";

const KEY_BYTES = 32;
/** Hex digits of a fingerprint (64 bits: enough to tell values apart, too few to be a hash of record). */
const FINGERPRINT_DIGITS = 16;
const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
/** "k1/r7": data key k1's key for region row 7. */
const REGION_KEY_ID = /^(.+)\/r(\d+)$/;

interface DataKey {
  readonly id: string;
  /** Made once: preparing a raw key Buffer on every call was most of the cost of opening a value. */
  readonly key: KeyObject;
}

interface RegionKey extends DataKey {
  /** Keys the HMAC that makes a seal's nonce. */
  readonly nonceKey: KeyObject;
}

/** A key file's content, as `SecretKeyRing.parse` reads and `generateKeyFile` writes it. */
interface KeyFile {
  keys: { id: string; key: string }[];
}

export class SecretKeyRing {
  readonly #keys: Map<string, DataKey>;
  readonly #newest: DataKey;
  readonly #fingerprintKey: Buffer;
  /** Derived on first use, by region key id. */
  readonly #regionKeys = new Map<string, RegionKey>();

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

  /** The id of the key new values are sealed under for region row `regionId`'s agent. */
  newestRegionKeyId(regionId: number): string {
    return regionKeyId(this.#newest.id, regionId);
  }

  /** `value` sealed under the newest key, bound to `context` (which deployment and name). */
  seal(context: string, value: string): Uint8Array {
    return sealValue(this.#newest.id, this.#newest.key, randomBytes(NONCE_BYTES), context, value);
  }

  /** `value` (text or bytes) sealed for region row `regionId`'s agent under the newest key's region key; the same inputs give the same bytes. */
  sealForRegion(regionId: number, context: string, value: string | Uint8Array): Uint8Array {
    const key = this.#regionKey(this.#newest, regionId);
    const hmac = createHmac("sha256", key.nonceKey).update(context).update("\0");
    const nonce = (typeof value === "string" ? hmac.update(value, "utf8") : hmac.update(value)).digest().subarray(0, NONCE_BYTES);
    return sealValue(key.id, key.key, nonce, context, value);
  }

  /** The value `sealed` holds (a data key's seal or a region's), as text; throws naming the key when it is not in the ring or the seal is broken. */
  open(context: string, sealed: Uint8Array): string {
    return this.openBytes(context, sealed).toString("utf8");
  }

  /** open(), the bytes as they were sealed (the caller zeroes them once used). */
  openBytes(context: string, sealed: Uint8Array): Buffer {
    const id = sealedKeyId(sealed);
    const dataKey = this.#keys.get(dataKeyIdOf(id));
    if (!dataKey) throw new Error(`secret ${context} is sealed under key ${JSON.stringify(dataKeyIdOf(id))}, which the secrets key file does not hold`);
    const region = REGION_KEY_ID.exec(id);
    const key = region ? this.#regionKey(dataKey, Number(region[2])).key : dataKey.key;
    return openValue(key, context, sealed);
  }

  /** Every key that opens a value sealed for region row `regionId`: what its agent receives, and only it. */
  regionKeys(regionId: number): { id: string; key: Uint8Array }[] {
    return [...this.#keys.values()].map((dataKey) => {
      const { id, key } = this.#regionKey(dataKey, regionId);
      return { id, key: key.export() };
    });
  }

  /** The value's keyed fingerprint (hex). */
  fingerprint(value: string): string {
    return createHmac("sha256", this.#fingerprintKey).update(value, "utf8").digest("hex").slice(0, FINGERPRINT_DIGITS);
  }

  #regionKey(dataKey: DataKey, regionId: number): RegionKey {
    const id = regionKeyId(dataKey.id, regionId);
    let key = this.#regionKeys.get(id);
    if (!key) {
      const derive = (purpose: string) => createSecretKey(Buffer.from(hkdfSync("sha256", dataKey.key, Buffer.alloc(0), `${purpose} ${regionId}`, KEY_BYTES)));
      key = { id, key: derive("flotilla region secrets"), nonceKey: derive("flotilla region secret nonces") };
      this.#regionKeys.set(id, key);
    }
    return key;
  }
}

/** The id of the data key `keyId` is (a data key's) or is derived from (a region key's). */
export function dataKeyIdOf(keyId: string): string {
  return REGION_KEY_ID.exec(keyId)?.[1] ?? keyId;
}

function regionKeyId(dataKeyId: string, regionId: number): string {
  return `${dataKeyId}/r${regionId}`;
}

/** A new key file's content with one fresh key, or `existing`'s keys plus a fresh newest one. */
export function generateKeyFile(id: string, existing?: string): string {
  const file: KeyFile = existing ? (JSON.parse(existing) as KeyFile) : { keys: [] };
  file.keys.push({ id, key: randomBytes(KEY_BYTES).toString("base64") });
  return `${JSON.stringify(file, null, 2)}\n`;
}
