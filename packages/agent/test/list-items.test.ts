// The list splitter hands out exactly the items JSON.parse would find, whatever the chunking.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ListItemSplitter } from "../src/list-items.ts";

const LIST = {
  kind: "DeploymentList",
  apiVersion: "apps/v1",
  metadata: { resourceVersion: "42", continue: "abc{[" },
  items: [
    { metadata: { name: "a", annotations: { tricky: 'braces } ] { [ and "quotes" \\ and \\" escapes' } }, spec: { replicas: 2, list: [1, [2, { x: 3 }]] } },
    { metadata: { name: "b", labels: { items: "[not the items]" } }, status: {} },
    { metadata: { name: "ü — multibyte ✓" }, items: [{ nested: "items inside an item are not the list's" }] },
  ],
};

function split(text: string, chunkSize: number): { items: unknown[]; rest: Record<string, unknown> } {
  const items: unknown[] = [];
  const splitter = new ListItemSplitter((item) => items.push(item));
  for (let i = 0; i < text.length; i += chunkSize) splitter.push(text.slice(i, i + chunkSize));
  return { items, rest: splitter.end() };
}

test("ListItemSplitter: every chunk size, items in order and the rest with items: []", () => {
  for (const text of [JSON.stringify(LIST), JSON.stringify(LIST, null, 2)]) {
    for (let size = 1; size <= text.length; size += size < 40 ? 1 : 97) {
      const { items, rest } = split(text, size);
      assert.deepEqual(items, LIST.items, `chunk size ${size}`);
      assert.deepEqual(rest, { ...LIST, items: [] }, `chunk size ${size}`);
    }
  }
});

test("ListItemSplitter: metadata after the items, an empty list, no items field", () => {
  const after = `{"items":[{"a":1},{"b":"}"}],"metadata":{"resourceVersion":"7"},"kind":"ServiceList"}`;
  assert.deepEqual(split(after, 5), { items: [{ a: 1 }, { b: "}" }], rest: { items: [], metadata: { resourceVersion: "7" }, kind: "ServiceList" } });
  assert.deepEqual(split(`{"kind":"List","items":[]}`, 3), { items: [], rest: { kind: "List", items: [] } });
  assert.deepEqual(split(`{"kind":"List","items":null}`, 3), { items: [], rest: { kind: "List", items: [] } });
});

test("ListItemSplitter: a text cut short or not JSON fails", () => {
  const text = JSON.stringify(LIST);
  assert.throws(() => split(text.slice(0, text.length - 30), 64), /ends before its object does/);
  assert.throws(() => split(text.slice(0, 60), 64), /ends before its object does|JSON/);
  assert.throws(() => split(`{"items":[{"a":tru}]}`, 4), SyntaxError);
});
