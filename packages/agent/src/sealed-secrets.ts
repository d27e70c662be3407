// Secret env values in the agent's memory. ctrl's streams carry each value sealed for this
// region (@flotilla/runtime/sealed-values, under keys only this region's agent gets from
// GetSecretKeys); the desired table keeps every resource for as long as it is desired, so a
// value would otherwise sit in the heap (and in a heap dump or core file) for the deployment's
// lifetime. Each value is opened as it enters the table and sealed again at once, under a key
// that this process draws at start and never writes anywhere; it is opened only while the
// Secret's manifest is built for an apply or a drift check. A value is only ever bytes here,
// never a string, and the bytes are zeroed once sealed.
//
// * AES-256-GCM, a random 96-bit nonce per value: sealed = nonce ‖ ciphertext ‖ tag, kept in
//   SecretEnvVar.sealed in place of ctrl's seal.
// * The keys are KeyObjects: their bytes live outside the JavaScript heap.
// * A restarted agent has a new key and an empty table; ctrl delivers the values again.
import { createCipheriv, createDecipheriv, createSecretKey, randomBytes, type KeyObject } from "node:crypto";
import type { DesiredResource, SecretEnvVar } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { openValue, sealedKeyId, secretContext } from "@flotilla/runtime/sealed-values";

const PROCESS_KEY = createSecretKey(randomBytes(32));
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

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
 * Seals under this process's key, in place, every secret env value of `resource` as a stream
 * delivered it: sealed by ctrl (opened with `regionKeys`), or in plain text (from a ctrl of an
 * earlier version).
 */
export function sealSecretValues(resource: DesiredResource, regionKeys: RegionSecretKeys): void {
  if (resource.spec.case !== "deployment") return;
  for (const secret of resource.spec.value.workload?.secretEnv ?? []) {
    let value: Buffer;
    if (secret.value !== undefined) value = Buffer.from(secret.value, "utf8");
    else if (secret.sealed.length > 0) value = regionKeys.open(secretContext(resource.id, secret.name), secret.sealed);
    else continue;
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv("aes-256-gcm", PROCESS_KEY, nonce);
    secret.sealed = Buffer.concat([nonce, cipher.update(value), cipher.final(), cipher.getAuthTag()]);
    secret.value = undefined;
    value.fill(0);
  }
}

/**
 * The value as the bytes of its UTF-8 form: opened if sealSecretValues() sealed it, else the
 * plain value of a resource handed to a target directly (empty if none was delivered).
 */
export function openSecretValue(secret: SecretEnvVar): Buffer {
  const { sealed } = secret;
  if (sealed.length === 0) return Buffer.from(secret.value ?? "", "utf8");
  const decipher = createDecipheriv("aes-256-gcm", PROCESS_KEY, sealed.subarray(0, NONCE_BYTES));
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
  return Buffer.concat([decipher.update(sealed.subarray(NONCE_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
}
