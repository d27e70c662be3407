// Secret env values in the agent's memory. ctrl's streams carry a workload's values sealed as
// one for this region (@flotilla/runtime/sealed-values, under keys only this region's agent
// gets from GetSecretKeys; one by one from a ctrl of an earlier version), except a snapshot's
// pages: they carry the names and checksum, and the values the table does not hold already
// (heldSecretEnv()) are fetched with GetSecretEnvSeals (awaitsSecretEnvSeal()). The desired
// table keeps every resource for as long as it is desired, so a value kept with it would sit in
// the heap (and in a heap dump or core file) for the deployment's lifetime. So a workload's
// values are opened as it enters the table and sealed again at once, all in one seal, under a
// key that this process draws at start and never writes anywhere; they are opened only while
// the Secret's manifest is built (an apply, a drift check); and once the Secret holds them (the
// apply succeeded) they leave the table, which keeps only what tells whether a live Secret
// still holds them. A value the agent writes is only ever bytes, never a string: opened into
// Buffers, written in base64 into the request's bytes (secret-request.ts), and zeroed once sealed
// or sent. What the agent reads back is another matter: checking a live Secret (a Secret is read
// before it is written, and once applied to tell whether it still holds the values) parses the
// API server's answer, its data as base64 strings, which live until they are garbage.
//
// The table's form of a workload's secret env: every variable keeps only its name; the first
// also carries, in `sealed`, one of
//
//   held    = 0 ‖ checksum (8) ‖ digest (16) ‖ nonce (12) ‖ AES-256-GCM(packValues(values)) ‖ tag (16)
//   applied = 0 ‖ checksum (8) ‖ digest (16)
//
// * 0 stands where ctrl's seal has its key id's length (never 0): it tells the table's form from
//   one as delivered. The applied form is the held one cut after the digest (dropSecretEnvValues()).
// * The checksum (the additional data of the seal with that 0 and the digest) is the one
//   delivered with the values sealed as one, or computed from the names and keyed fingerprints
//   delivered with values sealed one by one (secretEnvChecksum()), which are not kept.
// * The digest is an HMAC of the names and values under a second key of this process: a live
//   Secret whose data gives the same digest holds the values (liveHoldsSecretEnv()), so checking
//   a Secret needs no value. One that does not (deleted, edited) makes the apply ask for the
//   values again (SecretValuesNeeded, GetSecretEnvSeals): repairing a Secret needs ctrl
//   reachable, holding every value for good would cost about 260 B per workload of five (B7).
// * One seal and one checksum per workload rather than a seal and a fingerprint per value:
//   about 200 B less per workload of five values while they are held.
// * The keys are KeyObjects: their bytes live outside the JavaScript heap.
// * A restarted agent has new keys and an empty table; ctrl delivers the values again.
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from "node:crypto";
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
/** The digest's key: a key of its own, not the sealing key used for a MAC too. */
const DIGEST_KEY = createSecretKey(randomBytes(32));
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
/** The first byte of the table's form (see above). */
const TABLE_FORM = 0;
const CHECKSUM_BYTES = 8;
const DIGEST_BYTES = 16;
/** The applied form's length: the checksum's bytes and the digest's follow the first byte. */
const APPLIED_FORM_BYTES = 1 + CHECKSUM_BYTES + DIGEST_BYTES;
/** Then, while the values are held, the nonce's. */
const CIPHERTEXT_START = APPLIED_FORM_BYTES + NONCE_BYTES;

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
    const head = Buffer.concat([Buffer.of(TABLE_FORM), Buffer.from(checksum, "hex"), secretEnvDigest(names, unpackValues(plain, names.length))]);
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
 * Gives `resource` (awaiting its values) the table's form `held` has (the same deployment at
 * another version: its values, or the digest of those applied), if they are the same: the same
 * names and checksum. Returns whether it did. A periodic full sync thus fetches only values
 * that changed.
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
 * directly. Throws when a value was not delivered, or left once applied (secretEnvApplied()).
 * The caller zeroes them once used.
 */
export function openSecretEnv(secretEnv: readonly SecretEnvVar[]): Buffer[] {
  if (!inTableForm(secretEnv)) {
    checkSecretEnvDelivered(secretEnv);
    return secretEnv.map(({ value }) => Buffer.from(value!, "utf8"));
  }
  const sealed = secretEnv[0]!.sealed;
  if (secretEnvApplied(secretEnv)) throw new Error("secret env values left the agent's memory once applied: fetch them again (SecretValuesNeeded)");
  const decipher = createDecipheriv("aes-256-gcm", PROCESS_KEY, sealed.subarray(APPLIED_FORM_BYTES, CIPHERTEXT_START));
  decipher.setAAD(sealed.subarray(0, APPLIED_FORM_BYTES));
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
 * Throws if a value of the secret env was not delivered (a plain form without it), as
 * openSecretEnv() would, without opening anything.
 */
export function checkSecretEnvDelivered(secretEnv: readonly SecretEnvVar[]): void {
  if (inTableForm(secretEnv)) return;
  const missing = secretEnv.find(({ value }) => value === undefined);
  if (missing) {
    throw new Error(
      `secret env ${missing.name} came without its value: only the region's own agent token receives values, and a version replaced before its values were fetched gets them with the next`,
    );
  }
}

/** Whether the secret env is in the applied form: its values left once applied (see above). */
export function secretEnvApplied(secretEnv: readonly SecretEnvVar[]): boolean {
  return inTableForm(secretEnv) && secretEnv[0]!.sealed.length === APPLIED_FORM_BYTES;
}

/**
 * Turns, in place, the held form of `resource`'s secret env into the applied form (its values
 * leave; see above). Returns whether it did: false for any other form.
 */
export function dropSecretEnvValues(resource: DesiredResource): boolean {
  const secretEnv = resource.spec.case === "deployment" ? (resource.spec.value.workload?.secretEnv ?? []) : [];
  if (!inTableForm(secretEnv) || secretEnvApplied(secretEnv)) return false;
  const applied = secretEnv[0]!.sealed.slice(0, APPLIED_FORM_BYTES);
  secretEnv[0] = create(SecretEnvVarSchema, { name: secretEnv[0]!.name, sealed: applied });
  return true;
}

/**
 * Gives `resource`, its secret env in the applied form, the values ctrl sealed as one (`sealed`,
 * from GetSecretEnvSeals for its version), as a stream delivers them: sealSecretEnv() then turns
 * them into the held form. Throws if they are not the values the applied form was made from.
 */
export function withSecretEnvSeal(resource: DesiredResource, sealed: Uint8Array, regionKeys: RegionSecretKeys): void {
  const workload = resource.spec.case === "deployment" ? resource.spec.value.workload : undefined;
  if (!workload || !secretEnvApplied(workload.secretEnv)) throw new Error(`secret env of ${resource.id} is not in the applied form`);
  const kept = workload.secretEnv[0]!.sealed;
  workload.secretEnv = workload.secretEnv.map(({ name }) => create(SecretEnvVarSchema, { name }));
  workload.secretEnvSealed = sealed;
  workload.secretEnvChecksum = Buffer.from(kept.subarray(1, 1 + CHECKSUM_BYTES)).toString("hex");
  sealSecretEnv(resource, regionKeys);
  const digest = kept.subarray(1 + CHECKSUM_BYTES, APPLIED_FORM_BYTES);
  if (!timingSafeEqual(workload.secretEnv[0]!.sealed.subarray(1 + CHECKSUM_BYTES, APPLIED_FORM_BYTES), digest)) {
    throw new Error(`secret env values ctrl gave again for ${resource.id} at version ${resource.version} are not the ones applied`);
  }
}

/**
 * Whether a live Secret's `data` (base64, as the API server serves it) holds the values of the
 * secret env: in the table's form, the digest of its values under our names is the one kept.
 * Keys beyond ours do not count (as when a Secret is compared with what would be applied).
 */
export function liveHoldsSecretEnv(secretEnv: readonly SecretEnvVar[], data: Readonly<Record<string, unknown>> | undefined): boolean {
  const values: Buffer[] = [];
  try {
    for (const { name } of secretEnv) {
      const value = data?.[name];
      if (typeof value !== "string") return false;
      values.push(Buffer.from(value, "base64"));
    }
    // A plain form (a resource handed to a target directly): compared value by value.
    if (!inTableForm(secretEnv)) return secretEnv.every(({ value }, i) => value !== undefined && values[i]!.equals(Buffer.from(value, "utf8")));
    const kept = secretEnv[0]!.sealed.subarray(1 + CHECKSUM_BYTES, APPLIED_FORM_BYTES);
    return timingSafeEqual(
      secretEnvDigest(
        secretEnv.map(({ name }) => name),
        values,
      ),
      kept,
    );
  } finally {
    for (const value of values) value.fill(0);
  }
}

/** The keyed digest of a secret env's names and values (see above). */
function secretEnvDigest(names: readonly string[], values: readonly Uint8Array[]): Buffer {
  const packed = packValues([...names.map((name) => Buffer.from(name, "utf8")), ...values]);
  try {
    return createHmac("sha256", DIGEST_KEY).update(packed).digest().subarray(0, DIGEST_BYTES);
  } finally {
    packed.fill(0);
  }
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
