// Seals as a ctrl of an earlier version made them (no format byte, the data key used as it was,
// the additional data the context alone, a fingerprint of the value alone): what tests of the
// upgrade put into a database to see ctrl re-seal it.
import { createCipheriv, createHmac, createSecretKey, hkdfSync, randomBytes } from "node:crypto";

/** The raw data key `id` of a key file's text. */
function rawKey(keyFile: string, id: string): Buffer {
  const entry = (JSON.parse(keyFile) as { keys: { id: string; key: string }[] }).keys.find((k) => k.id === id);
  if (!entry) throw new Error(`no key ${id} in the key file`);
  return Buffer.from(entry.key, "base64");
}

/** `value` sealed as an earlier version did under data key `keyId`, or its key for `regionId`. */
export function legacySeal(keyFile: string, keyId: string, context: string, value: string | Uint8Array, regionId?: number): Uint8Array {
  let key = rawKey(keyFile, keyId);
  let id = keyId;
  if (regionId !== undefined) {
    key = Buffer.from(hkdfSync("sha256", createSecretKey(key), Buffer.alloc(0), `flotilla region secrets ${regionId}`, 32));
    id = `${keyId}/r${regionId}`;
  }
  const nonce = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(Buffer.from(context));
  const ciphertext = Buffer.concat([cipher.update(value), cipher.final()]);
  return Buffer.concat([Buffer.of(id.length), Buffer.from(id), nonce, ciphertext, cipher.getAuthTag()]);
}

/** An earlier version's fingerprint: of the value alone, so equal values showed alike everywhere. */
export function legacyFingerprint(keyFile: string, keyId: string, value: string): string {
  const key = Buffer.from(hkdfSync("sha256", createSecretKey(rawKey(keyFile, keyId)), Buffer.alloc(0), "flotilla secret fingerprint", 32));
  return createHmac("sha256", key).update(value, "utf8").digest("hex").slice(0, 16);
}
