// Secret values at rest. A key ring holds the data keys of a key file (ctrl's
// --secrets-key-file), oldest first: a value is sealed under the newest (AES-256-GCM, bound
// to its deployment, name and revision, @flotilla/runtime/sealed-values) and opened under
// whichever key sealed it, so a rotation only adds a key, re-seals (rotateSecrets) and then
// drops the old one.
//
// A data key is never used as it is: HKDF derives from it, under labels of their own, the key
// that seals values, the key of fingerprints and each region's keys, so no key serves two
// purposes. A fingerprint is an HMAC of the deployment, the name and the value under the
// newest data key's fingerprint key: it shows that a value changed, but no one without the key
// can test a guess against it, and equal values in two places do not show as equal.
//
// The desired state of a region holds its values sealed for that region's agent, under a key
// derived from the data key for the region and its key epoch (id "k1/r7": data key k1, region
// row 7, epoch 0; "k1/r7e2" at epoch 2). The agent receives its region's keys (regionKeys) and
// nothing else, so it opens its own region's values and no other's, and ctrl streams stored
// bytes without opening anything. Revoking one of the region's agent tokens moves its epoch:
// what is sealed afterwards opens under keys the revoked agent never received. A region seal is
// deterministic (its nonce an HMAC of what it seals, as in SIV): the same value sealed again is
// the same bytes, so recomputing a region's desired state is no change.
//
// Seals of an earlier version (the data key used as it was, a context without the revision)
// open only where a caller passes their legacy context: the re-sealing pass ctrl runs when it
// starts (secret-rotation.ts).
import { createHmac, createSecretKey, hkdfSync, randomBytes, type KeyObject } from "node:crypto";
import { NONCE_BYTES, openValue, packValues, parseSeal, sealValue } from "@flotilla/runtime/sealed-values";

const KEY_BYTES = 32;
/** Hex digits of a fingerprint (64 bits: enough to tell values apart, too few to be a hash of record). */
const FINGERPRINT_DIGITS = 16;
const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
/** "k1/r7": data key k1's key for region row 7 at key epoch 0; "k1/r7e2" at epoch 2. */
const REGION_KEY_ID = /^(.+)\/r(\d+)(?:e(\d+))?$/;

interface DataKey {
  readonly id: string;
  /** Made once: preparing a raw key Buffer on every call was most of the cost of opening a value. */
  readonly key: KeyObject;
}

interface RingKey extends DataKey {
  /** The key a value is sealed under (HKDF of the data key); `key` itself only derives keys, and opens legacy seals. */
  readonly encryption: KeyObject;
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
  readonly #keys: Map<string, RingKey>;
  readonly #newest: RingKey;
  readonly #fingerprintKey: KeyObject;
  /** Derived on first use, by region key id. */
  readonly #regionKeys = new Map<string, RegionKey>();

  private constructor(keys: DataKey[]) {
    this.#keys = new Map(keys.map((k) => [k.id, { ...k, encryption: derive(k.key, "flotilla secret encryption") }]));
    this.#newest = this.#keys.get(keys[keys.length - 1]!.id)!;
    this.#fingerprintKey = derive(this.#newest.key, "flotilla secret fingerprint of deployment, name and value");
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

  /** The id of the key new values are sealed under for region row `regionId`'s agent at key epoch `epoch`. */
  newestRegionKeyId(regionId: number, epoch: number): string {
    return regionKeyId(this.#newest.id, regionId, epoch);
  }

  /** `value` sealed under the newest key, bound to `context` (which deployment, name and revision: secretContext). */
  seal(context: string, value: string | Uint8Array): Uint8Array {
    return sealValue(this.#newest.id, this.#newest.encryption, randomBytes(NONCE_BYTES), context, value);
  }

  /** `value` (text or bytes) sealed for region row `regionId`'s agent under the newest key's region key at `epoch`; the same inputs give the same bytes. */
  sealForRegion(regionId: number, epoch: number, context: string, value: string | Uint8Array): Uint8Array {
    const key = this.#regionKey(this.#newest, regionId, epoch);
    const hmac = createHmac("sha256", key.nonceKey).update(context).update("\0");
    const nonce = (typeof value === "string" ? hmac.update(value, "utf8") : hmac.update(value)).digest().subarray(0, NONCE_BYTES);
    return sealValue(key.id, key.key, nonce, context, value);
  }

  /**
   * The value `sealed` holds (a data key's seal or a region's), as text; throws naming the key
   * when it is not in the ring or the seal is broken or bound elsewhere. A seal of an earlier
   * version opens only given `legacyContext`, what it was bound to then.
   */
  open(context: string, sealed: Uint8Array, legacyContext?: string): string {
    const bytes = this.openBytes(context, sealed, legacyContext);
    try {
      return bytes.toString("utf8");
    } finally {
      bytes.fill(0);
    }
  }

  /** open(), the bytes as they were sealed (the caller zeroes them once used). */
  openBytes(context: string, sealed: Uint8Array, legacyContext?: string): Buffer {
    const seal = parseSeal(sealed);
    const dataKeyId = dataKeyIdOf(seal.keyId);
    const dataKey = this.#keys.get(dataKeyId);
    if (!dataKey) throw new Error(`secret ${context} is sealed under key ${JSON.stringify(dataKeyId)}, which the secrets key file does not hold`);
    if (seal.legacy && legacyContext === undefined) {
      throw new Error(`secret ${context} is sealed as an earlier version of ctrl sealed it: ctrl re-seals such values when it starts`);
    }
    const region = REGION_KEY_ID.exec(seal.keyId);
    if (region) return openValue(this.#regionKey(dataKey, Number(region[2]), Number(region[3] ?? 0)).key, seal.legacy ? legacyContext! : context, seal);
    return seal.legacy ? openValue(dataKey.key, legacyContext!, seal) : openValue(dataKey.encryption, context, seal);
  }

  /** Whether `sealed` is sealed under the newest key (or its region key for `region`) in this version's form. */
  isCurrent(sealed: Uint8Array, region?: { id: number; epoch: number }): boolean {
    const seal = parseSeal(sealed);
    return !seal.legacy && seal.keyId === (region === undefined ? this.#newest.id : this.newestRegionKeyId(region.id, region.epoch));
  }

  /**
   * Every key that opens a value sealed for region row `regionId` up to key epoch `epoch`: what
   * its agent receives, and only it. A row keeps its seal until it is written again, so the
   * keys of earlier epochs stay; a revoked agent holds those already, and none of the current.
   */
  regionKeys(regionId: number, epoch: number): { id: string; key: Uint8Array }[] {
    return [...this.#keys.values()].flatMap((dataKey) =>
      Array.from({ length: epoch + 1 }, (_, e) => {
        const { id, key } = this.#regionKey(dataKey, regionId, e);
        return { id, key: key.export() };
      }),
    );
  }

  /** The keyed fingerprint (hex) of `value` as deployment `deploymentId`'s variable `name`. */
  fingerprint(deploymentId: string, name: string, value: string | Uint8Array): string {
    // Each part with its length (packValues): no two triples encode alike.
    const bytes = typeof value === "string" ? Buffer.from(value, "utf8") : value;
    const packed = packValues([Buffer.from(deploymentId), Buffer.from(name), bytes]);
    try {
      return createHmac("sha256", this.#fingerprintKey).update(packed).digest("hex").slice(0, FINGERPRINT_DIGITS);
    } finally {
      packed.fill(0);
      if (bytes !== value) bytes.fill(0);
    }
  }

  #regionKey(dataKey: DataKey, regionId: number, epoch: number): RegionKey {
    const id = regionKeyId(dataKey.id, regionId, epoch);
    let key = this.#regionKeys.get(id);
    if (!key) {
      // Epoch 0's labels are those from before epochs: the keys agents already hold.
      const scope = epoch === 0 ? `${regionId}` : `${regionId} epoch ${epoch}`;
      key = { id, key: derive(dataKey.key, `flotilla region secrets ${scope}`), nonceKey: derive(dataKey.key, `flotilla region secret nonces ${scope}`) };
      this.#regionKeys.set(id, key);
    }
    return key;
  }
}

/** The key HKDF derives from `key` for `purpose` (a label no other key uses). */
function derive(key: KeyObject, purpose: string): KeyObject {
  return createSecretKey(Buffer.from(hkdfSync("sha256", key, Buffer.alloc(0), purpose, KEY_BYTES)));
}

/** The id of the data key `keyId` is (a data key's) or is derived from (a region key's). */
export function dataKeyIdOf(keyId: string): string {
  return REGION_KEY_ID.exec(keyId)?.[1] ?? keyId;
}

function regionKeyId(dataKeyId: string, regionId: number, epoch: number): string {
  return `${dataKeyId}/r${regionId}${epoch === 0 ? "" : `e${epoch}`}`;
}

/** A new key file's content with one fresh key, or `existing`'s keys plus a fresh newest one. */
export function generateKeyFile(id: string, existing?: string): string {
  const file: KeyFile = existing ? (JSON.parse(existing) as KeyFile) : { keys: [] };
  file.keys.push({ id, key: randomBytes(KEY_BYTES).toString("base64") });
  return `${JSON.stringify(file, null, 2)}\n`;
}
