// What authorization decides from: namespace and region globs, a project's bindings compiled
// (the highest role of a subject counts), and the catalog's copy of the projects, which a
// write through this replica replaces at once, even while an older read is under way.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { ProjectSchema } from "@flotilla/proto/ctrl/v1/project_pb.js";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";
import { compile, ProjectCatalog } from "../src/authorization/catalog.ts";
import { globMatcher } from "../src/authorization/glob.ts";

const [{ db }] = await testDatabases();

test("globs: * is any run of characters; everything else stands for itself", () => {
  assert.ok(globMatcher("a-*")("a-web"));
  assert.ok(globMatcher("a-*")("a-"));
  assert.ok(!globMatcher("a-*")("b-a-web"));
  assert.ok(globMatcher("*-prod")("eu-prod"));
  assert.ok(globMatcher("*")("anything"));
  assert.ok(globMatcher("web")("web"));
  assert.ok(!globMatcher("web")("webs"));
  assert.ok(!globMatcher("a.b")("axb"), "a dot is a dot");
});

test("a project compiled: namespaces, regions by name or selector, the highest role of each subject", () => {
  const project = compile(
    create(ProjectSchema, {
      name: "team-a",
      namespaces: ["a-*"],
      regions: { names: ["eu-*"], selector: "tier=canary" },
      roles: [
        { role: Role.VIEWER, operators: ["alice"], groups: ["team-a"] },
        { role: Role.DEPLOYER, operators: ["alice"] },
      ],
    }),
  );
  assert.ok(project.namespaceAllowed("a-web") && !project.namespaceAllowed("b-web"));
  assert.ok(project.regionAllowed("eu-west", {}));
  assert.ok(project.regionAllowed("us-east", { tier: "canary" }));
  assert.ok(!project.regionAllowed("us-east", { tier: "prod" }));
  assert.equal(project.operatorRoles.get("alice"), Role.DEPLOYER);
  assert.equal(project.groupRoles.get("team-a"), Role.VIEWER);
});

test("the catalog: kept for its age, replaced at once on invalidate, a read begun before an invalidation not kept", async (t) => {
  const { store, cleanup } = await freshStore(db);
  t.after(cleanup);
  const catalog = new ProjectCatalog(store, 60_000);
  assert.deepEqual([...(await catalog.current()).projects.keys()], ["default"]);
  await store.projects.create(create(ProjectSchema, { name: "team-a", namespaces: ["a-*"] }));
  assert.deepEqual([...(await catalog.current()).projects.keys()], ["default"], "kept for its age");
  catalog.invalidate();
  assert.deepEqual([...(await catalog.current()).projects.keys()], ["default", "team-a"]);

  // A read under way when a write invalidates the catalog may have missed the write.
  const stale = new ProjectCatalog(store, 60_000);
  const before = stale.current();
  await store.projects.create(create(ProjectSchema, { name: "team-b", namespaces: ["b-*"] }));
  stale.invalidate();
  await before;
  assert.ok((await stale.current()).projects.has("team-b"), "the next call reads again");
});
