// The sealed form of a secret value, shared by ctrl's store (which seals) and the agent (which
// opens what its region's stream delivers): AES-256-GCM, its additional data naming the
// deployment and variable it belongs to, so a seal copied to another place does not open.
//
//   sealed = length of key id (1 byte) ‖ key id ‖ nonce (12) ‖ ciphertext ‖ tag (16)
//
// The key id says which key opens it: a data key of ctrl's key file ("k1"), or the key derived
// from one for a region's agent ("k1/r7", see the store's SecretKeyRing).
//
// A region's desired state seals a workload's values as one (Workload.secret_env_sealed): the
// values packed in the order of their names (packValues), bound to the deployment and the
// names (secretEnvContext). One key id, nonce and tag a workload rather than a value, and no
// fingerprint beside each: a workload of five values in B1's mix takes 513 B rather than 733 B.
import { createCipheriv, createDecipheriv, createHash, type KeyObject } from "node:crypto";
import { readVarint, varintSize, writeVarint } from "./wire.ts";

export const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** What binds a sealed value to its place: another deployment's or name's seal does not open here. */
export function secretContext(deploymentId: string, name: string): string {
  return `${deploymentId}/${name}`;
}

/** What binds a workload's values sealed as one to its deployment and to its names, in order. */
export function secretEnvContext(deploymentId: string, names: readonly string[]): string {
  // A space: in neither an id nor a name, so no single value's context (secretContext) is one of these.
  return `${deploymentId} ${names.join(" ")}`;
}

/** `values` as one buffer: each its length (LEB128: 7 bits a byte, low bits first), then its bytes. */
export function packValues(values: readonly Uint8Array[]): Buffer {
  const packed = Buffer.alloc(values.reduce((size, value) => size + varintSize(value.length) + value.length, 0));
  let at = 0;
  for (const value of values) {
    at = writeVarint(packed, at, value.length);
    packed.set(value, at);
    at += value.length;
  }
  return packed;
}

/** The first `count` values packValues() packed into `packed`, as views of it; throws when it holds fewer. */
export function unpackValues(packed: Buffer, count: number): Buffer[] {
  const values: Buffer[] = [];
  let at = 0;
  while (values.length < count) {
    const length = readVarint(packed, at, packed.length);
    if (!length || length.next + length.value > packed.length) throw new Error(`sealed secret env holds ${values.length} values, want ${count}`);
    values.push(packed.subarray(length.next, length.next + length.value));
    at = length.next + length.value;
  }
  return values;
}

/**
 * The pod template's secret env checksum (flotilla.dev/secret-env-checksum): a digest of the
 * names and keyed fingerprints, so that a changed value (which changes no other field of the
 * template) rolls the pods, and shows none. 16 hex digits.
 */
export function secretEnvChecksum(secretEnv: readonly { name: string; fingerprint: string }[]): string {
  const lines = secretEnv.map(({ name, fingerprint }) => `${name}=${fingerprint}\n`).sort();
  return createHash("sha256").update(lines.join("")).digest("hex").slice(0, 16);
}

/** The id of the key `sealed` was sealed under. */
export function sealedKeyId(sealed: Uint8Array): string {
  return Buffer.from(sealed.buffer, sealed.byteOffset + 1, sealed[0]!).toString();
}

/** `value` (text, as UTF-8) sealed under `key` (named `keyId`) with `nonce`, bound to `context`. */
export function sealValue(keyId: string, key: KeyObject, nonce: Uint8Array, context: string, value: string | Uint8Array): Uint8Array {
  const id = Buffer.from(keyId);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(Buffer.from(context));
  const ciphertext = Buffer.concat([typeof value === "string" ? cipher.update(value, "utf8") : cipher.update(value), cipher.final()]);
  return Buffer.concat([Buffer.of(id.length), id, nonce, ciphertext, cipher.getAuthTag()]);
}

/**
 * The bytes of the value `sealed` holds, opened under `key` (the key of its id); throws naming
 * `context` and the key when the seal is broken or was made under another key of that id.
 */
export function openValue(key: KeyObject, context: string, sealed: Uint8Array): Buffer {
  const bytes = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
  const start = 1 + bytes[0]!;
  const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(start, start + NONCE_BYTES));
  decipher.setAAD(Buffer.from(context));
  decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(bytes.subarray(start + NONCE_BYTES, bytes.length - TAG_BYTES)), decipher.final()]);
  } catch {
    throw new Error(`secret ${context} does not open under key ${JSON.stringify(sealedKeyId(sealed))} (a different key of the same id?)`);
  }
}
