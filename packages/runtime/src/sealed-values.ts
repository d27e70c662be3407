// The sealed form of a secret value, shared by ctrl's store (which seals) and the agent (which
// opens what its region's stream delivers): AES-256-GCM, its additional data naming the format,
// the key id and the place it belongs to (deployment, variable, and what binds it to its row:
// the store's secretContext), so a seal copied to another place does not open.
//
//   sealed = 0xF2 ‖ length of key id (1 byte) ‖ key id ‖ nonce (12) ‖ ciphertext ‖ tag (16)
//
// A seal of an earlier version lacks the first byte (it starts with the key id's length, never
// above MAX_KEY_ID_BYTES) and its additional data is the context alone: parseSeal() tells
// them apart ("legacy"), and the store opens those only to re-seal them (secret-rotation.ts).
// Parsing checks every length before reading: a seal is bytes from a database or a network,
// and an error never shows them (only a key id that is one: printable, bounded).
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
/** The first byte of a seal in this format; a legacy seal's first byte is its key id's length. */
const SEAL_FORMAT = 0xf2;
/** A data key id (64) and a region's suffix ("/r" and a row id and epoch) fit. */
export const MAX_KEY_ID_BYTES = 96;
const KEY_ID_CHARS = /^[A-Za-z0-9._/-]+$/;

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

/** A seal's parts, as views of it. */
export interface ParsedSeal {
  /** Sealed by an earlier version: its additional data is the context alone. */
  legacy: boolean;
  keyId: string;
  nonce: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
}

/**
 * The parts of `sealed`; throws when it cannot be a seal (too short for its key id, nonce and
 * tag; a key id empty, too long or not printable). The message names what is wrong and never
 * shows the bytes.
 */
export function parseSeal(sealed: Uint8Array): ParsedSeal {
  const bytes = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
  const legacy = bytes[0] !== SEAL_FORMAT;
  const idAt = legacy ? 1 : 2;
  if (bytes.length < idAt) throw new Error(`malformed seal: ${bytes.length} bytes`);
  const idLength = bytes[idAt - 1]!;
  if (idLength === 0 || idLength > MAX_KEY_ID_BYTES) throw new Error(`malformed seal: a key id of ${idLength} bytes (1 to ${MAX_KEY_ID_BYTES})`);
  const nonceAt = idAt + idLength;
  const tagAt = bytes.length - TAG_BYTES;
  if (tagAt < nonceAt + NONCE_BYTES) throw new Error(`malformed seal: ${bytes.length} bytes, too short for its key id, nonce and tag`);
  const keyId = bytes.subarray(idAt, nonceAt).toString("latin1");
  if (!KEY_ID_CHARS.test(keyId)) throw new Error("malformed seal: its key id is not one (A-Z a-z 0-9 . _ / -)");
  return {
    legacy,
    keyId,
    nonce: bytes.subarray(nonceAt, nonceAt + NONCE_BYTES),
    ciphertext: bytes.subarray(nonceAt + NONCE_BYTES, tagAt),
    tag: bytes.subarray(tagAt),
  };
}

/** The id of the key `sealed` was sealed under; throws as parseSeal() does. */
export function sealedKeyId(sealed: Uint8Array): string {
  return parseSeal(sealed).keyId;
}

/** `value` (text, as UTF-8) sealed under `key` (named `keyId`) with `nonce`, bound to `context`. */
export function sealValue(keyId: string, key: KeyObject, nonce: Uint8Array, context: string, value: string | Uint8Array): Uint8Array {
  const id = Buffer.from(keyId, "latin1");
  if (id.length === 0 || id.length > MAX_KEY_ID_BYTES || !KEY_ID_CHARS.test(keyId)) throw new Error(`key id ${JSON.stringify(keyId)} cannot be sealed under`);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(additionalData(false, keyId, context));
  const ciphertext = Buffer.concat([typeof value === "string" ? cipher.update(value, "utf8") : cipher.update(value), cipher.final()]);
  return Buffer.concat([Buffer.of(SEAL_FORMAT, id.length), id, nonce, ciphertext, cipher.getAuthTag()]);
}

/**
 * The bytes of the value `sealed` holds, opened under `key` (the key of its id); throws naming
 * `context` and the key when the seal is broken, bound elsewhere or made under another key of
 * that id, and as parseSeal() when it is no seal.
 */
export function openValue(key: KeyObject, context: string, sealed: Uint8Array | ParsedSeal): Buffer {
  const seal = sealed instanceof Uint8Array ? parseSeal(sealed) : sealed;
  const decipher = createDecipheriv("aes-256-gcm", key, seal.nonce, { authTagLength: TAG_BYTES });
  decipher.setAAD(additionalData(seal.legacy, seal.keyId, context));
  decipher.setAuthTag(seal.tag);
  const plain = decipher.update(seal.ciphertext);
  try {
    decipher.final();
    return plain;
  } catch {
    plain.fill(0);
    throw new Error(`secret ${context} does not open under key ${JSON.stringify(seal.keyId)} (a different key of the same id, or a seal of another place)`);
  }
}

/** What a seal is bound to: the format and key id too, so neither can be swapped. */
function additionalData(legacy: boolean, keyId: string, context: string): Buffer {
  return legacy ? Buffer.from(context) : Buffer.from(`flotilla seal v2\0${keyId}\0${context}`);
}
