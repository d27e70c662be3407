// SharedDictionary: every packed string unpacks to what was packed, for any characters and
// lengths, also after the dictionary filled; similar strings pack small; a string of one-byte
// characters packs into one; nothing grows by more than a character per 128.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SharedDictionary } from "../src/shared-dictionary.ts";

/** A deterministic pseudo-random generator (so a failure can be reproduced). */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
}

function randomString(next: () => number, length: number, highestCode: number): string {
  return String.fromCharCode(...Array.from({ length }, () => Math.floor(next() * (highestCode + 1))));
}

const oneByte = (value: string) => [...value].every((char) => char.charCodeAt(0) <= 0xff);

test("every string unpacks to itself: random, empty, long, with characters above 255, before and after the dictionary fills", () => {
  const next = random(7);
  const dictionary = new SharedDictionary(2048);
  const packed: [string, string][] = [];
  const values = [
    "",
    "a",
    "abc",
    "abcd",
    "x".repeat(1000),
    "\u0000\u00ff\u0100\uffff\ud83d\ude00",
    ...Array.from({ length: 300 }, (_, i) => randomString(next, Math.floor(next() * 400), i % 3 === 0 ? 0xffff : i % 3 === 1 ? 0xff : 3)),
  ];
  for (const value of values) packed.push([value, dictionary.pack(value)]);
  assert.ok(dictionary.size > 1500 && dictionary.size <= 2048, `the dictionary filled up to its capacity (${dictionary.size})`);
  for (const value of values) packed.push([value, dictionary.pack(value)]);
  for (const [value, packedValue] of packed) assert.equal(dictionary.unpack(packedValue), value);
});

test("strings that repeat earlier ones pack small; one-byte strings pack into one-byte strings", () => {
  const dictionary = new SharedDictionary();
  const record = (i: number) =>
    `\u0001deployment/svc-${String(i).padStart(6, "0")}\u0002team-${i % 50}\u0002registry.example.com/team-${i % 7}/app:1.${i % 17}\u0002LOG_LEVEL=info\u0002FEATURE_FLAGS=a,b,c`;
  let raw = 0;
  let packedLength = 0;
  for (let i = 0; i < 2000; i++) {
    const packed = dictionary.pack(record(i));
    assert.ok(oneByte(packed), "one-byte in, one-byte out");
    assert.equal(dictionary.unpack(packed), record(i));
    if (i >= 1000) {
      raw += record(i).length;
      packedLength += packed.length;
    }
  }
  assert.ok(packedLength < raw * 0.35, `similar strings pack to ${packedLength} of ${raw} characters`);
});

test("a string with nothing in common with the dictionary grows by at most one character per 128", () => {
  const next = random(11);
  const dictionary = new SharedDictionary(0);
  for (const length of [1, 127, 128, 129, 1000, 5000]) {
    const value = randomString(next, length, 0xffff);
    const packed = dictionary.pack(value);
    assert.ok(packed.length <= length + Math.ceil(length / 128), `${length} characters packed into ${packed.length}`);
    assert.equal(dictionary.unpack(packed), value);
  }
  assert.equal(dictionary.size, 0, "a dictionary of capacity 0 stays empty");
});

test("the capacity is bounded by the two-byte offsets", () => {
  assert.throws(() => new SharedDictionary(65_537), RangeError);
  assert.throws(() => new SharedDictionary(-1), RangeError);
  const full = new SharedDictionary(65_536);
  const value = "0123456789abcdef".repeat(4096);
  full.pack(value);
  assert.equal(full.size, 65_536);
  assert.equal(full.unpack(full.pack(`${value}!`)), `${value}!`, "copies reach the dictionary's last character");
});
