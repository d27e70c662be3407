// Unit tests of the pure modules: selectors, YAML decoding, JSON patch, field sets.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { humanDuration } from "../src/table.ts";
import { fieldsOf, fromFieldsV1, toFieldsV1 } from "../src/fields.ts";
import { jsonPatch, mergePatch, strategicMergePatch } from "../src/patch.ts";
import { parseFieldSelector, parseLabelSelector } from "../src/selectors.ts";
import type { KubeObject } from "../src/util.ts";
import { decodeBody } from "../src/yaml.ts";

const obj = (labels: Record<string, string>, name = "n", namespace = "ns"): KubeObject => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name, namespace, labels },
});

describe("label selectors", () => {
  const cases: [string, Record<string, string>, boolean][] = [
    ["a=b", { a: "b" }, true],
    ["a==b", { a: "c" }, false],
    ["a!=b", {}, true],
    ["a!=b", { a: "b" }, false],
    ["a in (x, y)", { a: "y" }, true],
    ["a in (x,y)", {}, false],
    ["a notin (x)", {}, true],
    ["a notin (x)", { a: "x" }, false],
    ["a", { a: "" }, true],
    ["!a", { a: "" }, false],
    ["!a,b=c", { b: "c" }, true],
    ["example.com/tier=front,env in (prod,staging)", { "example.com/tier": "front", env: "prod" }, true],
    ["a=", { a: "" }, true],
    ["n>3", { n: "4" }, true],
    ["", { x: "y" }, true],
  ];
  for (const [sel, labels, expected] of cases) {
    it(`${JSON.stringify(sel)} on ${JSON.stringify(labels)} → ${expected}`, () => {
      assert.equal(parseLabelSelector(sel)(obj(labels)), expected);
    });
  }
  it("rejects bad syntax", () => {
    for (const bad of ["a in x", "a in ()", "a=b,", "=b", "a b", "a=b=c", "Bad Key=1"]) {
      assert.throws(
        () => parseLabelSelector(bad),
        (e: { code?: number }) => e.code === 400,
        bad,
      );
    }
  });
});

describe("field selectors", () => {
  it("supports metadata.name and metadata.namespace", () => {
    assert.equal(parseFieldSelector("metadata.name=n")(obj({})), true);
    assert.equal(parseFieldSelector("metadata.name==n,metadata.namespace!=ns")(obj({})), false);
    assert.throws(() => parseFieldSelector("spec.x=1"), /field label not supported/);
  });
});

describe("YAML decoding", () => {
  it("parses block and flow YAML", () => {
    const doc = decodeBody(
      [
        "---",
        "a: 1",
        "b:",
        "  - x",
        "  - {k: v, num: 2}",
        "  - - nested",
        'c: "q: \\"x\\""',
        "d: 'it''s'",
        "e: |",
        "  line1",
        "  line2",
        "f: null",
        "g: true",
        "h: 1.5",
        'i: "8080"',
        "j:",
        "- same-indent",
        "k: {}",
        "l: []",
      ].join("\n"),
    );
    assert.deepEqual(doc, {
      a: 1,
      b: ["x", { k: "v", num: 2 }, ["nested"]],
      c: 'q: "x"',
      d: "it's",
      e: "line1\nline2\n",
      f: null,
      g: true,
      h: 1.5,
      i: "8080",
      j: ["same-indent"],
      k: {},
      l: [],
    });
  });
  it("follows YAML 1.1 like the server (yes/on are booleans, leading-zero octal, anchors)", () => {
    assert.deepEqual(decodeBody("a: yes\nb: on\nc: 0755\nd: &x {k: v}\ne: *x\n"), { a: true, b: true, c: 493, d: { k: "v" }, e: { k: "v" } });
  });
  it("parses sequences of mappings", () => {
    assert.deepEqual(decodeBody("items:\n- name: a\n  port: 1\n- name: b\n"), { items: [{ name: "a", port: 1 }, { name: "b" }] });
  });
  it("rejects malformed input", () => {
    for (const bad of ["a: [1, 2", "a: 1\n  b: 2", "a: 1\na: 2", "", '{"a": }x', "a: *missing"]) {
      assert.throws(() => decodeBody(bad), Error, JSON.stringify(bad));
    }
  });
});

describe("patches and field sets", () => {
  it("merge patch deletes with null and replaces lists", () => {
    assert.deepEqual(mergePatch({ a: 1, b: { c: 2, d: 3 }, l: [1] }, { b: { c: null }, l: [2] }), { a: 1, b: { d: 3 }, l: [2] });
  });
  it("strategic merge patch merges containers by name", () => {
    const target = {
      containers: [
        { name: "a", image: "1" },
        { name: "b", image: "1" },
      ],
    };
    assert.deepEqual(strategicMergePatch(target, { containers: [{ name: "b", image: "2" }] }), {
      containers: [
        { name: "a", image: "1" },
        { name: "b", image: "2" },
      ],
    });
  });
  it("json patch add/remove/move/copy/test", () => {
    const out = jsonPatch({ a: [1, 2], b: { c: 1 } }, [
      { op: "add", path: "/a/-", value: 3 },
      { op: "remove", path: "/a/0" },
      { op: "copy", from: "/b/c", path: "/d" },
      { op: "move", from: "/b", path: "/e" },
      { op: "test", path: "/d", value: 1 },
    ]);
    assert.deepEqual(out, { a: [2, 3], d: 1, e: { c: 1 } });
    assert.throws(
      () => jsonPatch({}, [{ op: "remove", path: "/x" }]),
      (e: { code?: number }) => e.code === 422,
    );
  });
  it("field sets round-trip through FieldsV1", () => {
    const o = { apiVersion: "v1", kind: "X", metadata: { name: "n", labels: { a: "b" } }, spec: { list: [{ name: "c", v: 1 }], atomic: [1, 2], empty: {} } };
    const set = fieldsOf(o, "main", false);
    const v1 = toFieldsV1(set);
    assert.deepEqual(v1, {
      "f:metadata": { "f:labels": { "f:a": {} } },
      "f:spec": { "f:atomic": {}, "f:empty": {}, "f:list": { 'k:{"name":"c"}': { ".": {}, "f:name": {}, "f:v": {} } } },
    });
    assert.deepEqual([...fromFieldsV1(v1).keys()].sort(), [...set.keys()].sort());
  });
});

it("humanDuration: ages as kubectl prints them (k8s.io/apimachinery/pkg/util/duration)", () => {
  const s = 1000;
  assert.deepEqual(
    [59 * s, 119 * s, 125 * s, 600 * s, 3 * 3600 * s + 5 * 60 * s, 30 * 3600 * s, 3 * 86_400 * s + 3600 * s, 400 * 86_400 * s, 800 * 86_400 * s].map(
      humanDuration,
    ),
    ["59s", "119s", "2m5s", "10m", "3h5m", "30h", "3d1h", "400d", "2y70d"],
  );
});
