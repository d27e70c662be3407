// The desired table: a snapshot reaches the table only through replaceAll(), which leaves
// entries already at the snapshot's state alone and turns entries it lacks into deletes.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { DesiredResourceSchema, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { DesiredTable, desiredResource } from "../src/desired-table.ts";

const resource = (id: string, version: number, image = "app:1") =>
  create(DesiredResourceSchema, {
    type: ResourceType.DEPLOYMENT,
    id,
    version: BigInt(version),
    namespace: `ns-${id}`,
    spec: { case: "deployment", value: { workload: { image, port: 80 }, replicas: 2 } },
  });

/** The resource the table wants for `key` (fails unless it wants one). */
function wanted(table: DesiredTable, key: string) {
  const desired = table.get(key)?.desired;
  assert.ok(desired?.kind === "upsert", `${key} is desired`);
  return desiredResource(desired);
}

describe("DesiredTable", () => {
  test("keeps resources encoded and gives back the same message", () => {
    const table = new DesiredTable(() => {});
    const a = resource("a", 3);
    table.upsert(a, 3);
    assert.deepEqual(wanted(table, "deployment/a"), a);
  });

  test("attachments: in the key's entry while it has one (through new versions), in a side map otherwise, never both", () => {
    const table = new DesiredTable(() => {});
    const observed = table.attachment("observed");
    const reported = table.attachment("reported");
    observed.set("deployment/a", "seen before desired");
    table.upsert(resource("a", 1), 1);
    assert.equal(observed.get("deployment/a"), "seen before desired");
    assert.notEqual(table.get("deployment/a")?.attached, undefined, "taken into the new entry");
    reported.set("deployment/a", "digest");
    table.upsert(resource("a", 2, "app:2"), 2);
    assert.equal(reported.get("deployment/a"), "digest", "kept by the next version's entry");
    assert.equal(observed.get("deployment/a"), "seen before desired");
    observed.set("deployment/orphan", "not desired");
    assert.deepEqual(
      [...observed.entries()],
      [
        ["deployment/a", "seen before desired"],
        ["deployment/orphan", "not desired"],
      ],
    );
    table.remove({ type: ResourceType.DEPLOYMENT, id: "a", namespace: "ns-a", name: "a" } as never, 3);
    table.markDone("deployment/a", 3);
    assert.equal(table.get("deployment/a"), undefined, "the delete is done: the key left the table");
    assert.equal(observed.get("deployment/a"), "seen before desired", "its attachments went to the side map");
    assert.equal(reported.get("deployment/a"), "digest");
    observed.set("deployment/a", undefined);
    assert.deepEqual([...observed.entries()], [["deployment/orphan", "not desired"]]);
    table.upsert(resource("orphan", 4), 4);
    assert.notEqual(table.get("deployment/orphan")?.attached, undefined);
    assert.equal(observed.get("deployment/orphan"), "not desired");
    assert.deepEqual([...observed.entries()], [["deployment/orphan", "not desired"]], "not in the side map as well");
  });

  test("attachments: each part reads what it set, whatever the other holds (empty, absent, any character); entries keep them packed", () => {
    const table = new DesiredTable(() => {});
    const observed = table.attachment("observed");
    const reported = table.attachment("reported");
    const digest = String.fromCharCode(0, 1, 2, 0xff, 0x80, 0x7f, 6, 255);
    for (const [key, records, sent] of [
      ["deployment/a", "", digest],
      ["deployment/b", "records\u0001with\u0006marks", undefined],
      ["deployment/c", undefined, ""],
      ["deployment/d", "\u{1F600} wide", "x".repeat(300)],
    ] as const) {
      table.upsert(resource(key.slice("deployment/".length), 1), 1);
      observed.set(key, records);
      reported.set(key, sent);
      assert.equal(observed.get(key), records, key);
      assert.equal(reported.get(key), sent, key);
    }
    reported.set("deployment/a", undefined);
    assert.equal(observed.get("deployment/a"), "", "clearing one part keeps the other");
    observed.set("deployment/a", undefined);
    assert.equal(table.get("deployment/a")?.attached, undefined, "nothing left: nothing stored");
    // Records that repeat one another are stored in a fraction of their length.
    const record = (i: number) =>
      `0\u0003\u0001\u0004a\u0001${1000 + i}\u00011\u0001${i}\u0001\u00040\u0001\u00041\u0001\u0003\u0001\u0003\u0001registry.example.com/team/app:1.${i % 17}`;
    for (let i = 0; i < 200; i++) {
      table.upsert(resource(`r${i}`, 1), 1);
      observed.set(`deployment/r${i}`, record(i));
    }
    assert.equal(observed.get("deployment/r199"), record(199));
    assert.ok(table.get("deployment/r199")!.attached!.length < record(199).length / 2, "packed against the records before it");
  });

  test("replaceAll: unchanged entries stay as they are, changed ones are pending, absent ones become deletes", () => {
    const changed: string[] = [];
    const table = new DesiredTable((key) => changed.push(key));
    const first = table.stage();
    for (const r of [resource("same", 1), resource("moved", 2), resource("gone", 3)]) first.add(r);
    table.replaceAll(first, 3);
    for (const entry of table.entries()) table.markDone(entry.key, entry.version);
    changed.length = 0;

    const second = table.stage();
    for (const r of [resource("same", 1), resource("moved", 4, "app:2"), resource("new", 5)]) second.add(r);
    assert.equal(second.added, 3);
    assert.deepEqual(changed, [], "staging changes nothing");
    assert.equal(table.get("deployment/new"), undefined);
    table.replaceAll(second, 5);

    assert.deepEqual(changed.sort(), ["deployment/gone", "deployment/moved", "deployment/new"]);
    assert.equal(table.get("deployment/same")?.status, "done", "an unchanged resource is not applied again");
    const moved = table.get("deployment/moved")!;
    assert.equal(moved.status, "pending");
    assert.equal(moved.version, 4);
    assert.equal(moved.appliedVersion, 2);
    const spec = wanted(table, "deployment/moved").spec;
    assert.equal(spec.case === "deployment" && spec.value.workload?.image, "app:2");
    const gone = table.get("deployment/gone")!;
    assert.equal(gone.desired.kind, "delete");
    assert.equal(gone.version, 5);
    assert.deepEqual(gone.desired.kind === "delete" && [gone.desired.tombstone.namespace, gone.desired.tombstone.name], ["ns-gone", "gone"]);
  });
});
