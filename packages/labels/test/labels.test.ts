// Label syntax and selectors, against the rules and examples of k8s.io/apimachinery.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { labelKeyProblem, labelSelectorFromObject, LabelSelectorError, labelValueProblem, parseLabelSelector } from "../src/index.ts";

describe("label keys", () => {
  it("accepts names with an optional DNS subdomain prefix", () => {
    for (const key of ["tier", "Tier_1.a-b", "a", "x".repeat(63), "example.com/tier", "flotilla.dev/region", `${"a".repeat(253)}/b`]) {
      assert.equal(labelKeyProblem(key), undefined, key);
    }
  });
  it("refuses what Kubernetes refuses, saying why", () => {
    const cases: [string, RegExp][] = [
      ["", /name part must be non-empty/],
      ["bad key", /name part must consist of alphanumeric characters/],
      ["-tier", /name part must consist/],
      ["tier.", /name part must consist/],
      ["x".repeat(64), /name part must be no more than 63 characters/],
      ["/tier", /prefix part must be non-empty/],
      ["Example.com/tier", /prefix part a lowercase RFC 1123 subdomain/],
      [`${"a".repeat(254)}/b`, /prefix part must be no more than 253 characters/],
      ["example.com/", /name part must be non-empty/],
      ["a/b/c", /a qualified name must consist/],
    ];
    for (const [key, problem] of cases) assert.match(labelKeyProblem(key) ?? "(accepted)", problem, key);
  });
});

describe("label values", () => {
  it("accepts the empty value and names of up to 63 characters", () => {
    for (const value of ["", "eu", "EU-west_1.a", "v".repeat(63)]) assert.equal(labelValueProblem(value), undefined, value);
  });
  it("refuses other characters, bad ends and long values", () => {
    assert.match(labelValueProblem("v".repeat(64)) ?? "", /must be no more than 63 characters/);
    for (const value of ["a b", "-eu", "eu-", "eu/west", "é"]) assert.match(labelValueProblem(value) ?? "", /a valid label must be an empty string/, value);
  });
});

describe("label selectors", () => {
  const region = { tier: "canary", geo: "eu", "example.com/zone": "a", n: "4", empty: "" };
  const cases: [string, boolean][] = [
    ["", true],
    ["tier=canary", true],
    ["tier==canary", true],
    ["tier=stable", false],
    ["tier!=stable", true],
    ["tier!=canary", false],
    ["missing!=x", true],
    ["geo in (eu,us)", true],
    ["geo in ( us , asia )", false],
    ["missing in (eu)", false],
    ["geo notin (us)", true],
    ["geo notin (eu,us)", false],
    ["missing notin (eu)", true],
    ["tier", true],
    ["missing", false],
    ["!missing", true],
    ["!tier", false],
    ["empty", true],
    ["empty=", true],
    ["tier=canary,geo in (eu,us)", true],
    ["tier=canary,geo=us", false],
    ["example.com/zone=a", true],
    ["n>3", true],
    ["n<3", false],
    ["missing>3", false],
  ];
  for (const [selector, expected] of cases) {
    it(`${JSON.stringify(selector)} → ${expected}`, () => assert.equal(parseLabelSelector(selector)(region), expected));
  }

  it("throws LabelSelectorError with the API server's message on bad syntax", () => {
    const cases: [string, string][] = [
      ["geo in eu", "found 'eu', expected: '('"],
      ["geo in ()", "for 'in', 'notin' operators, values set can't be empty"],
      ["tier=canary,", "found '', expected: identifier"],
      ["=canary", "found '=', expected: identifier"],
      ["tier canary", "found 'canary', expected: in, notin, =, ==, !=, gt, lt"],
      ["tier=a=b", "found '=', expected: ',' or 'end of string'"],
      ["bad key=1", "found 'key', expected: in, notin, =, ==, !=, gt, lt"],
      ["Bad_/key=1", 'invalid label key "Bad_/key"'],
      ["tier=-x", 'invalid label value: "-x"'],
      ["n>x", "for 'Gt', 'Lt' operators, the value must be an integer"],
      ["!tier=x", "found '=', expected: ',' or 'end of string'"],
    ];
    for (const [selector, detail] of cases) {
      assert.throws(
        () => parseLabelSelector(selector),
        (e: unknown) => e instanceof LabelSelectorError && e.message === `unable to parse requirement: ${detail} (selector: ${JSON.stringify(selector)})`,
        selector,
      );
    }
  });

  it("reads LabelSelector objects (matchLabels and matchExpressions)", () => {
    const selector = labelSelectorFromObject({ matchLabels: { tier: "canary" }, matchExpressions: [{ key: "geo", operator: "In", values: ["eu", "us"] }] });
    assert.equal(selector(region), true);
    assert.equal(selector({ ...region, geo: "asia" }), false);
    assert.equal(labelSelectorFromObject({ matchExpressions: [{ key: "tier", operator: "DoesNotExist" }] })(region), false);
  });
});
