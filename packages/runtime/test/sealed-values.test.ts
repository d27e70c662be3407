// Seal parsing takes bytes from a database or a network: every length is checked before it is
// read, and an error never shows the bytes. A property test feeds it random and mutated seals.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createSecretKey, randomBytes } from "node:crypto";
import { MAX_KEY_ID_BYTES, openValue, parseSeal, sealedKeyId, sealValue } from "@flotilla/runtime/sealed-values";

const KEY = createSecretKey(randomBytes(32));
const CONTEXT = "api/DB_PASSWORD@3";
/** What a parse or open error may say: the fixed sentences, a key id only when it is one. */
const ALLOWED = [
  /^malformed seal: \d+ bytes$/,
  /^malformed seal: a key id of \d+ bytes \(1 to \d+\)$/,
  /^malformed seal: \d+ bytes, too short for its key id, nonce and tag$/,
  /^malformed seal: its key id is not one \(A-Z a-z 0-9 \. _ \/ -\)$/,
  /^secret api\/DB_PASSWORD@3 does not open under key "[A-Za-z0-9._/-]+" \(a different key of the same id, or a seal of another place\)$/,
];

function assertCleanError(error: unknown, input: Uint8Array): void {
  assert.ok(error instanceof Error);
  assert.ok(
    ALLOWED.some((pattern) => pattern.test(error.message)),
    `unexpected error: ${error.message}`,
  );
  // No run of the input's bytes beyond a key id shows: compare its hex and latin1 forms.
  const hex = Buffer.from(input).toString("hex");
  const tail = Buffer.from(input.subarray(Math.min(input.length, 2 + MAX_KEY_ID_BYTES))).toString("latin1");
  if (hex.length >= 16) assert.ok(!error.message.includes(hex.slice(-16)), "the error shows the seal's bytes (hex)");
  if (tail.length >= 8) assert.ok(!error.message.includes(tail.slice(0, 8)), "the error shows the seal's bytes");
}

test("a seal shorter than its key id, nonce and 16-byte tag, or with an empty, long or unprintable key id, is malformed, never read past its end", () => {
  const good = sealValue("k1", KEY, randomBytes(12), CONTEXT, "v");
  assert.equal(sealedKeyId(good), "k1");
  assert.equal(openValue(KEY, CONTEXT, good).toString(), "v");
  for (const cut of [0, 1, 2, 3, 4, 4 + 12, 4 + 12 + 15]) {
    assert.throws(() => parseSeal(good.subarray(0, cut)), /^Error: malformed seal: \d+ bytes/, `cut at ${cut}`);
  }
  // A key id length pointing past the end (the old parser read it anyway).
  assert.throws(() => sealedKeyId(Buffer.of(0xf2, 200, 0x6b)), /a key id of 200 bytes/);
  assert.throws(() => sealedKeyId(Buffer.of(0xf2, 0, ...randomBytes(40))), /a key id of 0 bytes/);
  assert.throws(() => sealedKeyId(Buffer.concat([Buffer.of(0xf2, 4), Buffer.from("k\n\0x"), randomBytes(28)])), /its key id is not one/);
  assert.throws(() => sealValue("x".repeat(MAX_KEY_ID_BYTES + 1), KEY, randomBytes(12), CONTEXT, "v"), /cannot be sealed under/);
});

test("a seal opens only bound to its context, its key id and its format: a changed byte, context or key id does not open", () => {
  const sealed = Buffer.from(sealValue("k1", KEY, randomBytes(12), CONTEXT, "value"));
  assert.throws(() => openValue(KEY, "api/DB_PASSWORD@4", sealed), /does not open under key "k1"/);
  const renamed = Buffer.from(sealed);
  renamed[3] = "2".charCodeAt(0); // "k2": the key id is in the additional data
  assert.throws(() => openValue(KEY, CONTEXT, renamed), /does not open under key "k2"/);
  // The same bytes without the format byte read as an earlier version's seal, whose additional data differs.
  assert.throws(() => openValue(KEY, CONTEXT, sealed.subarray(1)), /does not open/);
});

test("fuzz: random bytes and mutated seals either open to the value or fail with a fixed sentence that shows none of their bytes", () => {
  const good = Buffer.from(sealValue("k1/r7", KEY, randomBytes(12), CONTEXT, "the value"));
  for (let i = 0; i < 20_000; i++) {
    let input: Buffer;
    const mode = i % 4;
    if (mode === 0) input = randomBytes(Math.floor(Math.random() * 80));
    else if (mode === 1) input = Buffer.concat([Buffer.of(0xf2, Math.floor(Math.random() * 256)), randomBytes(Math.floor(Math.random() * 120))]);
    else if (mode === 2) {
      input = Buffer.from(good);
      for (let n = 1 + Math.floor(Math.random() * 3); n > 0; n--) input[Math.floor(Math.random() * input.length)] = Math.floor(Math.random() * 256);
    } else input = good.subarray(0, Math.floor(Math.random() * good.length));
    try {
      const opened = openValue(KEY, CONTEXT, input);
      assert.equal(opened.toString(), "the value", "only the real seal opens");
    } catch (error) {
      assertCleanError(error, input);
    }
  }
});
