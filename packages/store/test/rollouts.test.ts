// Rollout transitions written in batches (rollouts.ts transitionMany): several rollouts' wave
// starts are one transaction that takes each region's version once for all of them; each is
// still a compare-and-set of its own, so one moved meanwhile by another writer is left out
// and the others are written; the steps of one look are one compare-and-set, recorded one by
// one. A write locks only the regions whose state it changes. A rollout whose deployment
// moved on without superseding it (a default strategy removed since) moves nothing: its next
// transition supersedes it.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { create, fromBinary } from "@bufbuild/protobuf";
import { DeploymentSchema, DesiredResourceSchema, RolloutState, RolloutStrategySchema, type RolloutStrategy } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { Store, type RolloutStep, type StoredRollout } from "../src/index.ts";
import { freshStore, storeDecisions, testDatabases } from "@flotilla/testkit/databases";

const TWO_WAVES = create(RolloutStrategySchema, { waves: [{ name: "first", regions: ["r1"] }, { name: "rest" }] });

for (const { db, skip } of await testDatabases()) {
  describe(`rollout transitions in batches (${db.name})`, { skip }, () => {
    let store: Store;
    let url: string;
    let cleanup: () => Promise<void>;
    const regionIds = new Map<string, number>();

    before(async () => {
      ({ store, url, cleanup } = await freshStore(db));
      for (const name of ["r1", "r2"]) {
        await store.regions.create(name);
        regionIds.set(name, (await store.regions.resolve(name)).id);
      }
    });
    after(() => cleanup());

    const deployment = (id: string, image: string, strategy: RolloutStrategy | undefined) =>
      create(DeploymentSchema, {
        id,
        namespace: "shop",
        image,
        port: 8080,
        regions: [
          { region: "r1", replicas: 1 },
          { region: "r2", replicas: 1 },
        ],
        strategy,
      });
    /** The image each region holds for `id` (absent: nothing). */
    const images = async (id: string) => {
      const rows = await store.database.db.selectFrom("desired_resources").select(["region_id", "body"]).where("resource_id", "=", id).execute();
      const image = (body: Uint8Array) => {
        const spec = fromBinary(DesiredResourceSchema, body).spec;
        return spec.case === "deployment" ? spec.value.workload?.image : undefined;
      };
      const names = new Map([...regionIds].map(([name, regionId]) => [regionId, name]));
      return Object.fromEntries(rows.map((r) => [names.get(r.region_id), image(r.body)]));
    };
    /** The first wave done, the second started: the step the gate takes once the first wave ran its bake. */
    const startSecondWave = (rollout: StoredRollout, now: number): RolloutStep => {
      const next = structuredClone(rollout);
      next.waves[0]!.runningSince ??= now;
      next.waves[0]!.endTime = now;
      next.currentWave = 1;
      const wave = next.waves[1]!;
      for (const r of wave.regions) r.moved = true;
      wave.startTime = now;
      next.dueAt = now + wave.deadlineMs;
      next.reason = "wave rest: moving r2";
      return { next, effects: { move: wave.regions.map((r) => r.regionId) }, action: "start-wave" };
    };
    const bake = (rollout: StoredRollout, now: number): RolloutStep => {
      const next = structuredClone(rollout);
      next.waves[0]!.runningSince = now;
      next.reason = "wave first: baking 0s";
      return { next, effects: {}, action: "bake" };
    };

    test("several rollouts' wave starts are one transaction, each region's version taken once; a compare-and-set lost leaves out only that rollout", async () => {
      const ids = ["b0", "b1", "b2", "b3"];
      for (const id of ids) await store.deployments.create(deployment(id, "app:1", TWO_WAVES));
      const rollouts = await Promise.all(ids.map((id) => store.rollouts.get(id)));
      assert.deepEqual(
        rollouts.map((r) => [r.state, r.currentWave]),
        ids.map(() => [RolloutState.PROGRESSING, 0]),
      );
      // Another writer moves b1 on after this batch read it.
      const stale = rollouts[1]!;
      assert.ok(await store.rollouts.transition(stale, { ...stale, reason: "moved by another replica" }, {}, "paused", "test", Date.now()));

      const r2 = regionIds.get("r2")!;
      const headBefore = (await store.regions.resolve("r2")).headVersion;
      const commits: number[][] = [];
      const stop = store.onCommit((regions) => commits.push(regions));
      const now = Date.now();
      const stored = await store.rollouts.transitionMany(
        rollouts.map((current, i) => ({
          current,
          // b3 takes two steps from one look (its bake, then the next wave): one compare-and-set.
          steps: i === 3 ? [bake(current, now), startSecondWave(bake(current, now).next, now)] : [startSecondWave(current, now)],
          actor: "rollout",
        })),
        now,
      );
      stop();

      assert.deepEqual(
        stored.map((r) => r?.currentWave),
        [1, undefined, 1, 1],
        "b1 (moved meanwhile) left out, the others written",
      );
      assert.deepEqual(commits, [[r2]], "one transaction moved r2's version");
      assert.equal((await store.regions.resolve("r2")).headVersion, headBefore + 3, "r2's version row taken once for the three");
      for (const id of ["b0", "b2", "b3"]) assert.deepEqual(await images(id), { r1: "app:1", r2: "app:1" }, id);
      assert.deepEqual(await images("b1"), { r1: "app:1" }, "nothing of b1 written");
      const b1 = await store.rollouts.get("b1");
      assert.equal(b1.reason, "moved by another replica");
      assert.equal(b1.currentWave, 0);

      const transitions = await store.rollouts.transitions(rollouts[3]!.id);
      assert.deepEqual(
        transitions.map((t) => [t.generation, t.action]),
        [
          [1, "start-wave"],
          [2, "bake"],
          [3, "start-wave"],
        ],
        "two steps, two records, consecutive generations",
      );
      assert.equal((await store.rollouts.get("b3")).generation, 3);
    });

    test("a staged change locks the regions it writes, not the others: it commits while another transaction holds a later wave's region", {
      skip: db.name !== "mysql" && "no row locks",
    }, async () => {
      await store.deployments.create(deployment("l0", "app:1", TWO_WAVES));
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => (locked = resolve));
      const holder = store.database.db.transaction().execute(async (tx) => {
        await tx.selectFrom("regions").select("id").where("id", "=", regionIds.get("r2")!).forUpdate().execute();
        locked();
        await released;
      });
      await isLocked;
      try {
        const hung = new Promise((_, reject) => setTimeout(() => reject(new Error("the update waits for r2's row")), 20_000).unref());
        await Promise.race([store.deployments.update(deployment("l0", "app:2", TWO_WAVES)), hung]);
      } finally {
        release();
        await holder;
      }
      assert.deepEqual(await images("l0"), { r1: "app:2" });
    });

    test("a rollout whose deployment moved on without superseding it moves nothing: its next transition supersedes it", async () => {
      // A replica with a default strategy stages the change; one without it (the flag removed) updates the deployment.
      const withDefault = await Store.open(url, { defaultStrategy: TWO_WAVES, rollouts: storeDecisions });
      try {
        await withDefault.deployments.create(deployment("s0", "app:1", undefined));
      } finally {
        await withDefault.close();
      }
      const rollout = await store.rollouts.get("s0");
      assert.equal(rollout.state, RolloutState.PROGRESSING);
      await store.deployments.update(deployment("s0", "app:2", undefined));
      assert.deepEqual(await images("s0"), { r1: "app:2", r2: "app:2" }, "the update reached every region at once");
      assert.equal((await store.rollouts.get("s0")).state, RolloutState.PROGRESSING, "not superseded by the update: its stored spec had no strategy");

      const [stored] = await store.rollouts.transitionMany([{ current: rollout, steps: [startSecondWave(rollout, Date.now())], actor: "rollout" }], Date.now());
      assert.equal(stored?.state, RolloutState.SUPERSEDED);
      assert.match(stored.reason, /deployment s0 is at revision 2/);
      assert.deepEqual(await images("s0"), { r1: "app:2", r2: "app:2" }, "nothing moved back to the rollout's revision");
      assert.deepEqual(
        (await store.rollouts.transitions(rollout.id)).map((t) => t.action),
        ["start-wave", "superseded"],
      );
    });
  });
}
