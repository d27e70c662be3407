// The sealed form of a secret value, shared by ctrl's store (which seals) and the agent (which
// opens what its region's stream delivers): AES-256-GCM, its additional data naming the
// deployment and variable it belongs to, so a seal copied to another place does not open.
//
//   sealed = length of key id (1 byte) ‖ key id ‖ nonce (12) ‖ ciphertext ‖ tag (16)
//
// The key id says which key opens it: a data key of ctrl's key file ("k1"), or the key derived
// from one for a region's agent ("k1/r7", see the store's SecretKeyRing).
import { createCipheriv, createDecipheriv, type KeyObject } from "node:crypto";

export const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** What binds a sealed value to its place: another deployment's or name's seal does not open here. */
export function secretContext(deploymentId: string, name: string): string {
  return `${deploymentId}/${name}`;
}

/** The id of the key `sealed` was sealed under. */
export function sealedKeyId(sealed: Uint8Array): string {
  return Buffer.from(sealed.buffer, sealed.byteOffset + 1, sealed[0]!).toString();
}

/** `value` sealed under `key` (named `keyId`) with `nonce`, bound to `context`. */
export function sealValue(keyId: string, key: KeyObject, nonce: Uint8Array, context: string, value: string): Uint8Array {
  const id = Buffer.from(keyId);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(Buffer.from(context));
  const ciphertext = Buffer.concat([cipher.update(value, "utf8"), cipher.final()]);
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
