// Projects in the store: what names none belongs to "default" (as everything written before
// projects does, by the migration, checked on rows written under the schema before it), lists
// filter by project, a resource's project never changes, a guard that refuses a write leaves
// nothing written, and a project that still owns resources is not deleted.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create, toBinary } from "@bufbuild/protobuf";
import type { Kysely } from "kysely";
import { Migrator } from "kysely/migration";
import { MIGRATIONS } from "../../../migrations/index.ts";
import { openDatabase, Store } from "@flotilla/store";
import { ProjectSchema } from "@flotilla/proto/ctrl/v1/project_pb.js";
import { DeploymentSchema, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";

const web = (project: string, image = "app:1") =>
  create(DeploymentSchema, { id: `web-${project || "none"}`, project, namespace: "demo", image, regions: [{ region: "east", replicas: 1 }] });

for (const { db, skip } of await testDatabases()) {
  test(`resources belong to one project; lists filter by it; guards write nothing (${db.name})`, { skip }, async (t) => {
    const { store, cleanup } = await freshStore(db);
    t.after(cleanup);
    assert.deepEqual(
      (await store.projects.all()).map((p) => [p.name, p.namespaces, p.regions?.names]),
      [["default", ["*"], ["*"]]],
      "the migration makes the default project: every namespace, every region",
    );
    await store.regions.create("east");
    await store.projects.create(create(ProjectSchema, { name: "team-a", namespaces: ["demo"], regions: { names: ["east"] } }));
    assert.equal((await store.deployments.create(web(""))).project, "default");
    await store.deployments.create(web("team-a"));
    const ids = async (visible?: ReadonlySet<string>) => (await store.deployments.list(100, "", visible)).items.map((d) => d.id);
    assert.deepEqual(await ids(), ["web-none", "web-team-a"]);
    assert.deepEqual(await ids(new Set(["team-a"])), ["web-team-a"]);
    assert.deepEqual(await ids(new Set()), []);

    const moved = create(DeploymentSchema, { ...web("team-a", "app:2"), id: "web-none" });
    await assert.rejects(store.deployments.update(moved), /deployment\.project: is immutable/);

    const refuse = () => {
      throw new Error("refused");
    };
    await assert.rejects(store.deployments.update(web("team-a", "app:3"), undefined, undefined, false, refuse), /refused/);
    await assert.rejects(store.deployments.delete("web-team-a", undefined, undefined, refuse), /refused/);
    await assert.rejects(store.deployments.create(web("team-b"), undefined, false, refuse), /refused/);
    const kept = await store.deployments.get("web-team-a");
    assert.equal(kept.image, "app:1");
    assert.equal(kept.revision, 1n);
    assert.deepEqual(await ids(), ["web-none", "web-team-a"], "nothing was written");

    const audit = await store.audit.list({ projects: new Set(["team-a"]) }, 100, "");
    assert.deepEqual(
      audit.items.map((e) => [e.action, e.objectId, e.project]),
      [["CreateDeployment", "web-team-a", "team-a"]],
    );
    await assert.rejects(store.projects.delete("team-a"), /still owns deployments "web-team-a"/);
    await assert.rejects(store.projects.delete("default"), /never deleted/);
    await store.deployments.delete("web-team-a");
    await store.projects.delete("team-a");
    assert.deepEqual(
      (await store.projects.all()).map((p) => p.name),
      ["default"],
    );
  });
}

for (const { db, skip } of await testDatabases()) {
  test(`the migration puts every resource written before projects in "default" (${db.name})`, { skip }, async (t) => {
    const { url, drop } = await db.create();
    t.after(drop);
    const before = openDatabase(url);
    const earlier = Object.fromEntries(Object.entries(MIGRATIONS).filter(([name]) => name < "0013_projects"));
    const migrated = await new Migrator({ db: before.db, provider: { getMigrations: async () => earlier } }).migrateToLatest();
    assert.equal(migrated.error, undefined);
    const body = toBinary(DeploymentSchema, create(DeploymentSchema, { id: "old", namespace: "demo", image: "app:1" }));
    await (before.db as Kysely<any>).insertInto("deployments").values({ id: "old", revision: 1, body, create_time: 1, update_time: 1 }).execute();
    await (before.db as Kysely<any>)
      .insertInto("resource_revisions")
      .values({ resource_type: ResourceType.DEPLOYMENT, resource_id: "old", revision: 1, body, actor: "admin", message: "", create_time: 1 })
      .execute();
    await before.close();

    const store = await Store.open(url);
    t.after(() => store.close());
    const old = await store.deployments.get("old");
    assert.equal(old.project, "default");
    assert.deepEqual(
      (await store.deployments.list(100, "", new Set(["default"]))).items.map((d) => d.id),
      ["old"],
    );
    assert.deepEqual(
      (await store.deployments.revisions("old", 10, "")).items.map((r) => r.resource.project),
      ["default"],
      "a revision written before projects is of the default project",
    );
  });
}
