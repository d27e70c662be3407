// The request body of a Secret of secret env values, built as bytes. A JSON body made with
// JSON.stringify would hold every value as a base64 string, which JavaScript cannot zero: it
// stays in the heap (and in a heap dump or core file) until it is garbage. Here the values are
// opened into Buffers, written in base64 straight into the body's Buffer, and zeroed at once;
// the body itself is zeroed by the client once the request is done (KubeClient.applyBytes()).
// Buffers live outside the JavaScript heap: a heap snapshot taken while the request is in flight
// holds no value (packages/agent/test/secret-memory.test.ts).
import { secretEnvData, type KubeObject } from "./manifests.ts";

const BASE64_ALPHABET = Buffer.from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", "latin1");
const PAD = "=".charCodeAt(0);

/**
 * The apply body of `secret` (a manifest of a secret env, its values held: secretEnvData().open)
 * with its `data`, as JSON bytes. The caller zeroes the body once sent. Throws if the manifest
 * carries no values to write.
 */
export function secretRequestBody(secret: KubeObject): Buffer {
  const open = secretEnvData(secret)?.open;
  if (!open) throw new Error(`${secret.metadata.name}: a Secret without values to write`);
  const { keys } = secretEnvData(secret)!;
  const values = open();
  try {
    // The manifest's JSON without its closing brace, then `"data":{"KEY":"<base64>",…}}`.
    const head = JSON.stringify(secret);
    const parts = keys.map((key, i) => Buffer.from(`${i === 0 ? "" : ","}${JSON.stringify(key)}:"`, "utf8"));
    const opening = Buffer.from(`${head.slice(0, -1)},"data":{`, "utf8");
    let length = opening.length + 2;
    for (const [i, value] of values.entries()) length += parts[i]!.length + base64Length(value.length) + 1;
    const body = Buffer.alloc(length);
    let at = opening.copy(body, 0);
    for (const [i, value] of values.entries()) {
      at += parts[i]!.copy(body, at);
      at = writeBase64(value, body, at);
      body[at++] = 0x22; // "
    }
    body.write("}}", at, "latin1");
    return body;
  } finally {
    for (const value of values) value.fill(0);
  }
}

function base64Length(bytes: number): number {
  return Math.ceil(bytes / 3) * 4;
}

/** Writes `bytes` in padded base64 into `target` at `at`; returns the offset after it. */
function writeBase64(bytes: Uint8Array, target: Buffer, at: number): number {
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    target[at++] = BASE64_ALPHABET[n >> 18]!;
    target[at++] = BASE64_ALPHABET[(n >> 12) & 63]!;
    target[at++] = BASE64_ALPHABET[(n >> 6) & 63]!;
    target[at++] = BASE64_ALPHABET[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest > 0) {
    const n = (bytes[i]! << 16) | (rest === 2 ? bytes[i + 1]! << 8 : 0);
    target[at++] = BASE64_ALPHABET[n >> 18]!;
    target[at++] = BASE64_ALPHABET[(n >> 12) & 63]!;
    target[at++] = rest === 2 ? BASE64_ALPHABET[(n >> 6) & 63]! : PAD;
    target[at++] = PAD;
  }
  return at;
}
