// Secret env values in the agent's memory. ctrl's streams carry each value sealed for this
// region (@flotilla/runtime/sealed-values, under keys only this region's agent gets from
// GetSecretKeys); the desired table keeps every resource for as long as it is desired, so a
// value would otherwise sit in the heap (and in a heap dump or core file) for the deployment's
// lifetime. A workload's values are opened as it enters the table and sealed again at once, all
// in one seal, under a key that this process draws at start and never writes anywhere; they are
// opened only while the Secret's manifest is built for an apply or a drift check. A value is
// only ever bytes here, never a string, and the bytes are zeroed once sealed.
//
// The table's form of a workload's secret env (sealSecretEnv()): every variable keeps only its
// name; the first also carries, in `sealed`, the checksum the pod template needs and every value:
//
//   sealed = 0 ‖ checksum (8) ‖ nonce (12) ‖ AES-256-GCM(each value: length (varint) ‖ bytes) ‖ tag (16)
//
// * 0 stands where ctrl's seal has its key id's length (never 0): it tells the table's form from
//   one as delivered.
// * The checksum (the additional data of the seal with that 0) is computed from the names and
//   keyed fingerprints as delivered (secretEnvChecksum()), which are not kept.
// * One seal and one checksum per workload rather than a seal and a fingerprint per value:
//   about 200 B less per workload of five values (B7 with a service mix).
// * The keys are KeyObjects: their bytes live outside the JavaScript heap.
// * A restarted agent has a new key and an empty table; ctrl delivers the values again.
import { createCipheriv, createDecipheriv, createHash, createSecretKey, randomBytes, type KeyObject } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { SecretEnvVarSchema, type DesiredResource, type SecretEnvVar } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { openValue, sealedKeyId, secretContext } from "@flotilla/runtime/sealed-values";

const PROCESS_KEY = createSecretKey(randomBytes(32));
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
/** The first byte of the table's form (see above). */
const TABLE_FORM = 0;
const CHECKSUM_BYTES = 8;
/** The checksum's bytes and the nonce's follow the first byte. */
const CIPHERTEXT_START = 1 + CHECKSUM_BYTES + NONCE_BYTES;

/** The keys that open the values ctrl sealed for this agent's region, by id. */
export class RegionSecretKeys {
  #keys = new Map<string, KeyObject>();

  /** Holds exactly `keys` (ctrl's answer to GetSecretKeys) from now on. */
  set(keys: readonly { id: string; key: Uint8Array }[]): void {
    this.#keys = new Map(keys.map(({ id, key }) => [id, createSecretKey(key)]));
  }

  /** The bytes of the value ctrl sealed as `sealed` for `context`; throws naming the key when this agent lacks it. */
  open(context: string, sealed: Uint8Array): Buffer {
    const id = sealedKeyId(sealed);
    const key = this.#keys.get(id);
    if (!key) throw new Error(`secret ${context} is sealed under key ${JSON.stringify(id)}, which ctrl did not give this agent (GetSecretKeys)`);
    return openValue(key, context, sealed);
  }
}

/**
 * Turns, in place, the secret env of `resource` as a stream delivered it (each value sealed by
 * ctrl, opened with `regionKeys`, or in plain text from a ctrl of an earlier version) into the
 * table's form (see above). A secret env already in that form is left as it is.
 */
export function sealSecretEnv(resource: DesiredResource, regionKeys: RegionSecretKeys): void {
  if (resource.spec.case !== "deployment") return;
  const workload = resource.spec.value.workload;
  if (!workload || workload.secretEnv.length === 0 || inTableForm(workload.secretEnv)) return;
  // Delivered without values (to a credential other than the region's agent token): kept as
  // names and fingerprints, and openSecretEnv() refuses to build the Secret.
  if (workload.secretEnv.some((secret) => secret.value === undefined && secret.sealed.length === 0)) return;
  const { secretEnv } = workload;
  const values: Buffer[] = [];
  let plain: Buffer | undefined;
  let sealed: Buffer;
  try {
    for (const secret of secretEnv) {
      if (secret.value !== undefined) values.push(Buffer.from(secret.value, "utf8"));
      else values.push(regionKeys.open(secretContext(resource.id, secret.name), secret.sealed));
    }
    plain = Buffer.concat(values.flatMap((value) => [varint(value.length), value]));
    const head = Buffer.concat([Buffer.of(TABLE_FORM), Buffer.from(secretEnvChecksum(secretEnv), "hex")]);
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv("aes-256-gcm", PROCESS_KEY, nonce);
    cipher.setAAD(head);
    sealed = Buffer.concat([head, nonce, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
  } finally {
    plain?.fill(0);
    for (const value of values) value.fill(0);
  }
  workload.secretEnv = secretEnv.map(({ name }, i) => create(SecretEnvVarSchema, i === 0 ? { name, sealed } : { name }));
}

/**
 * The values of a workload's secret env, in its order, as the bytes of their UTF-8 form: opened
 * if sealSecretEnv() sealed them, else the plain values of a resource handed to a target
 * directly. Throws when a value was not delivered. The caller zeroes them once used.
 */
export function openSecretEnv(secretEnv: readonly SecretEnvVar[]): Buffer[] {
  if (!inTableForm(secretEnv)) {
    return secretEnv.map(({ name, value }) => {
      if (value === undefined) throw new Error(`secret env ${name} came without its value: only the region's own agent token receives values`);
      return Buffer.from(value, "utf8");
    });
  }
  const sealed = secretEnv[0]!.sealed;
  const decipher = createDecipheriv("aes-256-gcm", PROCESS_KEY, sealed.subarray(1 + CHECKSUM_BYTES, CIPHERTEXT_START));
  decipher.setAAD(sealed.subarray(0, 1 + CHECKSUM_BYTES));
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
  // GCM's final() adds no bytes: the values stay in the one buffer the caller zeroes.
  const plain = decipher.update(sealed.subarray(CIPHERTEXT_START, sealed.length - TAG_BYTES));
  try {
    decipher.final();
  } catch (error) {
    plain.fill(0);
    throw error;
  }
  const values: Buffer[] = [];
  let at = 0;
  while (values.length < secretEnv.length) {
    let length = 0;
    for (let shift = 0; ; shift += 7) {
      const byte = plain[at++]!;
      length += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) break;
    }
    values.push(plain.subarray(at, at + length));
    at += length;
  }
  return values;
}

/**
 * The pod template's secret env checksum: a digest of the names and keyed fingerprints, so that a
 * changed value (which changes no other field of the template) rolls the pods, and shows none.
 * Of the table's form, the one its seal carries.
 */
export function secretEnvChecksum(secretEnv: readonly SecretEnvVar[]): string {
  if (inTableForm(secretEnv)) return Buffer.from(secretEnv[0]!.sealed.subarray(1, 1 + CHECKSUM_BYTES)).toString("hex");
  const lines = secretEnv.map(({ name, fingerprint }) => `${name}=${fingerprint}\n`).sort();
  return createHash("sha256")
    .update(lines.join(""))
    .digest("hex")
    .slice(0, 2 * CHECKSUM_BYTES);
}

function inTableForm(secretEnv: readonly SecretEnvVar[]): boolean {
  const sealed = secretEnv[0]?.sealed;
  return sealed !== undefined && sealed.length > 0 && sealed[0] === TABLE_FORM;
}

/** `n` in LEB128: 7 bits a byte, low bits first. */
function varint(n: number): Buffer {
  const bytes: number[] = [];
  for (; n >= 0x80; n = Math.floor(n / 0x80)) bytes.push((n % 0x80) | 0x80);
  bytes.push(n);
  return Buffer.from(bytes);
}
