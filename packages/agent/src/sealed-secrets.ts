// Secret env values in the agent's memory. The region's stream delivers them in plain text; the
// desired table keeps every resource for as long as it is desired, so a value would otherwise
// sit in the heap (and in a heap dump or core file) for the deployment's lifetime. Each value is
// sealed as it enters the table, under a key that this process draws at start and never writes
// anywhere, and opened only while the Secret's manifest is built for an apply or a drift check.
//
// * AES-256-GCM, a random 96-bit nonce per value: sealed = nonce ‖ ciphertext ‖ tag, kept in
//   SecretEnvVar.sealed (ctrl's own seal is stripped before a value leaves it, so the field is free).
// * The key is a KeyObject: its bytes live outside the JavaScript heap.
// * A restarted agent has a new key and an empty table; ctrl delivers the values again.
import { createCipheriv, createDecipheriv, createSecretKey, randomBytes } from "node:crypto";
import type { DesiredResource, SecretEnvVar } from "@flotilla/proto/ctrl/v1/resources_pb.js";

const PROCESS_KEY = createSecretKey(randomBytes(32));
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** Seals, in place, every plain secret env value of `resource` (a value already sealed stays so). */
export function sealSecretValues(resource: DesiredResource): void {
  if (resource.spec.case !== "deployment") return;
  for (const secret of resource.spec.value.workload?.secretEnv ?? []) {
    if (secret.value === undefined) continue;
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv("aes-256-gcm", PROCESS_KEY, nonce);
    secret.sealed = Buffer.concat([nonce, cipher.update(secret.value, "utf8"), cipher.final(), cipher.getAuthTag()]);
    secret.value = undefined;
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
