// Secret env values in the agent's memory. ctrl's streams carry a workload's values sealed as
// one for this region (@flotilla/runtime/sealed-values, under keys only this region's agent
// gets from GetSecretKeys; one by one from a ctrl of an earlier version), except a snapshot's
// pages: they carry the names and checksum, and the values the table does not hold already
// (heldSecretEnv()) are fetched with GetSecretEnvSeals (awaitsSecretEnvSeal()); the desired table
// keeps every resource for as long as it is desired, so a value would otherwise sit in the
// heap (and in a heap dump or core file) for the deployment's lifetime. A workload's values are opened as it enters the table and sealed again at once, all
// in one seal, under a key that this process draws at start and never writes anywhere; they are
// opened only while the Secret's manifest is built for an apply or a drift check. A value is
// only ever bytes here, never a string, and the bytes are zeroed once sealed.
//
// The table's form of a workload's secret env (sealSecretEnv()): every variable keeps only its
// name; the first also carries, in `sealed`, the checksum the pod template needs and every value:
//
//   sealed = 0 ‖ checksum (8) ‖ nonce (12) ‖ AES-256-GCM(packValues(values)) ‖ tag (16)
//
// * 0 stands where ctrl's seal has its key id's length (never 0): it tells the table's form from
//   one as delivered.
// * The checksum (the additional data of the seal with that 0) is the one delivered with the
//   values sealed as one, or computed from the names and keyed fingerprints delivered with
//   values sealed one by one (secretEnvChecksum()), which are not kept.
// * One seal and one checksum per workload rather than a seal and a fingerprint per value:
//   about 200 B less per workload of five values (B7 with a service mix).
// * The keys are KeyObjects: their bytes live outside the JavaScript heap.
// * A restarted agent has a new key and an empty table; ctrl delivers the values again.
import { createCipheriv, createDecipheriv, createSecretKey, randomBytes, type KeyObject } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { SecretEnvVarSchema, type DesiredResource, type SecretEnvVar } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import {
  openValue,
  packValues,
  sealedKeyId,
  secretContext,
  secretEnvChecksum as checksumOf,
  secretEnvContext,
  unpackValues,
} from "@flotilla/runtime/sealed-values";

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
 * Turns, in place, the secret env of `resource` as a stream delivered it (the values sealed by
 * ctrl as one, or one by one, opened with `regionKeys`; or in plain text from a ctrl of an
 * earlier version) into the table's form (see above). A secret env already in that form is
 * left as it is.
 */
export function sealSecretEnv(resource: DesiredResource, regionKeys: RegionSecretKeys): void {
  if (resource.spec.case !== "deployment") return;
  const workload = resource.spec.value.workload;
  if (!workload || workload.secretEnv.length === 0 || inTableForm(workload.secretEnv)) return;
  const { secretEnv, secretEnvSealed } = workload;
  const names = secretEnv.map((secret) => secret.name);
  let plain: Buffer | undefined;
  let checksum: string;
  if (secretEnvSealed.length > 0) {
    checksum = workload.secretEnvChecksum;
    if (!/^[0-9a-f]{16}$/.test(checksum)) throw new Error(`secret env of ${resource.id} came sealed without its checksum`);
    plain = regionKeys.open(secretEnvContext(resource.id, names), secretEnvSealed);
  } else {
    // Delivered without values (to a credential other than the region's agent token): kept as
    // names, and openSecretEnv() refuses to build the Secret.
    if (secretEnv.some((secret) => secret.value === undefined && secret.sealed.length === 0)) return;
    const values = secretEnv.map((secret) =>
      secret.value !== undefined ? Buffer.from(secret.value, "utf8") : regionKeys.open(secretContext(resource.id, secret.name), secret.sealed),
    );
    plain = packValues(values);
    for (const value of values) value.fill(0);
    checksum = checksumOf(secretEnv);
  }
  let sealed: Buffer;
  try {
    // Checked here rather than when the Secret is built: a seal that holds fewer values than names is ctrl's bug.
    unpackValues(plain, names.length);
    const head = Buffer.concat([Buffer.of(TABLE_FORM), Buffer.from(checksum, "hex")]);
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv("aes-256-gcm", PROCESS_KEY, nonce);
    cipher.setAAD(head);
    sealed = Buffer.concat([head, nonce, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
  } finally {
    plain.fill(0);
  }
  workload.secretEnv = names.map((name, i) => create(SecretEnvVarSchema, i === 0 ? { name, sealed } : { name }));
  workload.secretEnvSealed = new Uint8Array(0);
  workload.secretEnvChecksum = "";
}

/**
 * Whether `resource` came without its values, to be fetched (GetSecretEnvSeals): a snapshot
 * page's deployment with secret names and their checksum, but neither seal nor value.
 */
export function awaitsSecretEnvSeal(resource: DesiredResource): boolean {
  const workload = resource.spec.case === "deployment" ? resource.spec.value.workload : undefined;
  return (
    workload !== undefined &&
    workload.secretEnv.length > 0 &&
    workload.secretEnvSealed.length === 0 &&
    workload.secretEnvChecksum !== "" &&
    workload.secretEnv.every((secret) => secret.value === undefined && secret.sealed.length === 0)
  );
}

/**
 * Gives `resource` (awaiting its values) the values `held` (the table's form of the same
 * deployment at another version) holds, if they are the same: the same names and checksum.
 * Returns whether it did. A periodic full sync thus fetches only values that changed.
 */
export function heldSecretEnv(resource: DesiredResource, held: DesiredResource): boolean {
  if (resource.spec.case !== "deployment" || held.spec.case !== "deployment") return false;
  const workload = resource.spec.value.workload!;
  const kept = held.spec.value.workload?.secretEnv ?? [];
  if (!inTableForm(kept) || secretEnvChecksum(kept) !== workload.secretEnvChecksum) return false;
  if (kept.length !== workload.secretEnv.length || kept.some((secret, i) => secret.name !== workload.secretEnv[i]!.name)) return false;
  workload.secretEnv = kept;
  workload.secretEnvChecksum = "";
  return true;
}

/**
 * The values of a workload's secret env, in its order, as the bytes of their UTF-8 form: opened
 * if sealSecretEnv() sealed them, else the plain values of a resource handed to a target
 * directly. Throws when a value was not delivered. The caller zeroes them once used.
 */
export function openSecretEnv(secretEnv: readonly SecretEnvVar[]): Buffer[] {
  if (!inTableForm(secretEnv)) {
    return secretEnv.map(({ name, value }) => {
      if (value === undefined) {
        throw new Error(
          `secret env ${name} came without its value: only the region's own agent token receives values, and a version replaced before its values were fetched gets them with the next`,
        );
      }
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
  return unpackValues(plain, secretEnv.length);
}

/**
 * The pod template's secret env checksum (@flotilla/runtime/sealed-values): of the table's form,
 * the one its seal carries.
 */
export function secretEnvChecksum(secretEnv: readonly SecretEnvVar[]): string {
  if (inTableForm(secretEnv)) return Buffer.from(secretEnv[0]!.sealed.subarray(1, 1 + CHECKSUM_BYTES)).toString("hex");
  return checksumOf(secretEnv);
}

function inTableForm(secretEnv: readonly SecretEnvVar[]): boolean {
  const sealed = secretEnv[0]?.sealed;
  return sealed !== undefined && sealed.length > 0 && sealed[0] === TABLE_FORM;
}
