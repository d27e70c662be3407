// Region labels on both databases: set at create and replaced by UpdateRegion (audited, admin
// only, NOT_FOUND for an unknown region); a bad key or value, or too many labels, is
// INVALID_ARGUMENT naming the label, with nothing written; CreateRegion of an existing region
// leaves its labels as they are; ListRegions' label_selector (=, ==, !=, in, notin, exists,
// !key) picks regions across keyset pages, and bad syntax is INVALID_ARGUMENT naming it.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { HistoryService } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { rowCounts, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { LIMITS } from "../src/validate.ts";

/** The code and message a call fails with. */
async function refusal(call: Promise<unknown>): Promise<{ code: Code; message: string }> {
  try {
    await call;
  } catch (error) {
    const e = ConnectError.from(error);
    return { code: e.code, message: e.rawMessage };
  }
  assert.fail("the call succeeded");
}

/** Every region's name a selector picks, read page by page. */
async function selected(regions: Client<typeof RegionService>, labelSelector: string, pageSize = 2): Promise<string[]> {
  const names: string[] = [];
  let pageToken = "";
  do {
    const page = await regions.listRegions({ labelSelector, pageSize, pageToken });
    assert.ok(page.regions.length <= pageSize);
    names.push(...page.regions.map((r) => r.name));
    pageToken = page.nextPageToken;
  } while (pageToken !== "");
  return names;
}

for (const { db, skip } of await testDatabases()) {
  describe(`region labels (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    let regions: Client<typeof RegionService>;
    before(async () => {
      t = await startTestCtrl(db);
      regions = t.client(RegionService);
    });
    after(() => t.close());

    test("set at create, returned by Get and List, replaced by UpdateRegion, audited", async () => {
      const labels = { tier: "canary", "example.com/geo": "eu", empty: "" };
      const created = await regions.createRegion({ region: { name: "lab", labels } });
      assert.deepEqual(created.region?.labels, labels);
      assert.deepEqual((await regions.getRegion({ name: "lab" })).region?.labels, labels);
      const updated = await regions.updateRegion({ region: { name: "lab", labels: { tier: "stable" } } });
      assert.deepEqual(updated.region?.labels, { tier: "stable" });
      assert.deepEqual((await regions.getRegion({ name: "lab" })).region?.labels, { tier: "stable" });
      await regions.updateRegion({ region: { name: "lab", labels: {} } });
      assert.deepEqual((await regions.getRegion({ name: "lab" })).region?.labels, {});
      // Newest first.
      const audit = (await t.client(HistoryService).listAuditEvents({ pageSize: 1000 })).events.filter((e) => e.objectId === "lab").reverse();
      assert.deepEqual(
        audit.map((e) => [e.action, e.objectKind]),
        [
          ["CreateRegion", "region"],
          ["UpdateRegion", "region"],
          ["UpdateRegion", "region"],
        ],
      );
    });

    test("CreateRegion of an existing region returns it with its labels unchanged", async () => {
      await regions.createRegion({ region: { name: "again", labels: { tier: "canary" } } });
      const again = await regions.createRegion({ region: { name: "again", labels: { tier: "stable" } } });
      assert.deepEqual(again.region?.labels, { tier: "canary" });
      assert.deepEqual((await regions.getRegion({ name: "again" })).region?.labels, { tier: "canary" });
    });

    test("UpdateRegion of an unknown region is NOT_FOUND", async () => {
      const before = await rowCounts(t.store);
      const { code, message } = await refusal(regions.updateRegion({ region: { name: "nowhere", labels: { tier: "canary" } } }));
      assert.equal(code, Code.NotFound);
      assert.equal(message, 'region "nowhere" not found');
      assert.deepEqual(await rowCounts(t.store), before);
      assert.equal((await refusal(regions.updateRegion({}))).code, Code.InvalidArgument);
    });

    test("bad labels are INVALID_ARGUMENT naming the label; nothing is written", async () => {
      await regions.createRegion({ region: { name: "kept", labels: { tier: "canary" } } });
      const tooMany = Object.fromEntries(Array.from({ length: LIMITS.regionLabels + 1 }, (_, i) => [`k${i}`, "v"]));
      const cases: [Record<string, string>, RegExp][] = [
        [{ "bad key": "x" }, /^region\.labels\["bad key"\]: name part must consist of alphanumeric characters/],
        [{ "-tier": "x" }, /^region\.labels\["-tier"\]: name part must consist/],
        [{ ["x".repeat(64)]: "x" }, /^region\.labels\["x{64}"\]: name part must be no more than 63 characters/],
        [{ "Example.com/tier": "x" }, /^region\.labels\["Example\.com\/tier"\]: prefix part a lowercase RFC 1123 subdomain/],
        [{ "/tier": "x" }, /^region\.labels\["\/tier"\]: prefix part must be non-empty/],
        [{ tier: "can ary" }, /^region\.labels\["tier"\]: a valid label must be an empty string/],
        [{ tier: "v".repeat(64) }, /^region\.labels\["tier"\]: must be no more than 63 characters/],
        [tooMany, new RegExp(`^region\\.labels: at most ${LIMITS.regionLabels} labels, got ${LIMITS.regionLabels + 1}`)],
      ];
      const before = await rowCounts(t.store);
      for (const [labels, problem] of cases) {
        for (const call of [regions.createRegion({ region: { name: "refused", labels } }), regions.updateRegion({ region: { name: "kept", labels } })]) {
          const { code, message } = await refusal(call);
          assert.equal(code, Code.InvalidArgument, message);
          assert.match(message, problem);
        }
      }
      assert.deepEqual(await rowCounts(t.store), before, "no region, no audit event");
      assert.deepEqual((await regions.getRegion({ name: "kept" })).region?.labels, { tier: "canary" });
      const most = Object.fromEntries(Array.from({ length: LIMITS.regionLabels }, (_, i) => [`example.com/k${i}`, "v".repeat(63)]));
      assert.equal(Object.keys((await regions.updateRegion({ region: { name: "kept", labels: most } })).region!.labels).length, LIMITS.regionLabels);
    });

    test("label_selector picks regions across pages", async () => {
      const fleet: Record<string, Record<string, string>> = {
        "sel-a": { tier: "canary", geo: "eu" },
        "sel-b": {},
        "sel-c": { tier: "stable", geo: "us" },
        "sel-d": { tier: "stable", geo: "asia" },
        "sel-e": {},
        "sel-f": { tier: "stable", geo: "eu", gpu: "" },
        "sel-g": { tier: "canary", geo: "us" },
      };
      for (const [name, labels] of Object.entries(fleet)) await regions.createRegion({ region: { name, labels } });
      const inFleet = async (selector: string, pageSize?: number) => (await selected(regions, selector, pageSize)).filter((n) => n.startsWith("sel-"));
      assert.deepEqual(await inFleet("tier=canary"), ["sel-a", "sel-g"]);
      assert.deepEqual(await inFleet("tier==stable"), ["sel-c", "sel-d", "sel-f"]);
      assert.deepEqual(await inFleet("tier!=stable"), ["sel-a", "sel-b", "sel-e", "sel-g"]);
      assert.deepEqual(await inFleet("geo in (eu,us)"), ["sel-a", "sel-c", "sel-f", "sel-g"]);
      assert.deepEqual(await inFleet("geo notin (eu,us)"), ["sel-b", "sel-d", "sel-e"]);
      assert.deepEqual(await inFleet("gpu"), ["sel-f"]);
      assert.deepEqual(await inFleet("!tier"), ["sel-b", "sel-e"]);
      assert.deepEqual(await inFleet("tier=stable, geo in (eu, asia)"), ["sel-d", "sel-f"]);
      assert.deepEqual(await inFleet("tier=canary", 1), ["sel-a", "sel-g"]);
      assert.deepEqual(await inFleet("tier=canary", 1000), ["sel-a", "sel-g"]);
      assert.deepEqual(await inFleet(""), Object.keys(fleet));
      // A page reads page_size regions: it may hold fewer matches, and the token goes on after them.
      const first = await regions.listRegions({ labelSelector: "tier=canary", pageSize: 1, pageToken: "" });
      const all = await regions.listRegions({ pageSize: 1000 });
      assert.deepEqual(
        first.regions.map((r) => r.name),
        all.regions[0]!.labels.tier === "canary" ? [all.regions[0]!.name] : [],
      );
      assert.notEqual(first.nextPageToken, "");
    });

    test("a selector that does not parse is INVALID_ARGUMENT naming label_selector", async () => {
      for (const bad of ["geo in eu", "tier=canary,", "=canary", "tier canary", "bad key=x", "tier=-x", "geo in ()"]) {
        const { code, message } = await refusal(regions.listRegions({ labelSelector: bad }));
        assert.equal(code, Code.InvalidArgument, bad);
        assert.match(message, /^label_selector: unable to parse requirement: /, bad);
      }
    });
  });
}
