// FanOutMemo: a value made once per key, the last key's at hand; no value kept for undefined.
import { test } from "node:test";
import assert from "node:assert/strict";
import { FanOutMemo } from "../src/streaming/fan-out-memo.ts";

test("a value is made once per key, whatever the order of the keys asked for", () => {
  const memo = new FanOutMemo<object, string>();
  const [a, b] = [{}, {}];
  let made = 0;
  const make = (key: object) => `${key === a ? "a" : "b"}${++made}`;
  assert.deepEqual([memo.get(a, make), memo.get(a, make), memo.get(b, make), memo.get(a, make), memo.get(b, make)], ["a1", "a1", "b2", "a1", "b2"]);
  assert.equal(made, 2);
});

test("undefined is given back and kept for no key: the next ask makes it again", () => {
  const memo = new FanOutMemo<object, string>();
  const key = {};
  let asked = 0;
  assert.equal(
    memo.get(key, () => {
      asked++;
      return undefined;
    }),
    undefined,
  );
  assert.equal(
    memo.get(key, () => `made after ${++asked}`),
    "made after 2",
  );
  assert.equal(
    memo.get(key, () => "not again"),
    "made after 2",
  );
});
