// Agents' reports stored concurrently. Reports of different regions observing the same
// resources for the first time insert interleaved entries in the by-resource index: B12 saw
// InnoDB deadlocks there while the rows were written with an UPDATE that missed (a gap lock)
// then an INSERT. Each report now writes its statuses as one upsert, so no report holds a gap
// another needs; a report is tried once here, so a deadlock would fail the test.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { ResourceObservationSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentSchema, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { observationBody, type StatusWrite, type Store } from "../src/index.ts";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";

const REGIONS = 6;
const RESOURCES = 40;
const ROUNDS = 15;

for (const { db, skip } of await testDatabases()) {
  describe(`concurrent reports (${db.name})`, { skip }, () => {
    let store: Store;
    let cleanup: () => Promise<void>;
    const regionIds: number[] = [];

    before(async () => {
      ({ store, cleanup } = await freshStore(db));
      for (let r = 0; r < REGIONS; r++) {
        await store.regions.create(`r${r}`);
        regionIds.push((await store.regions.resolve(`r${r}`)).id);
      }
    });
    after(() => cleanup());

    const writes = (round: number, phase: number, previousPhase: number | undefined): StatusWrite[] => {
      const ids = Array.from({ length: RESOURCES }, (_, i) => `roll-${String(round).padStart(3, "0")}-${String(i).padStart(3, "0")}`);
      // Each report lists its resources in its own order, as agents do.
      for (let i = ids.length - 1; i > 0; i--) {
        const j = Math.floor(Math.random() * (i + 1));
        [ids[i], ids[j]] = [ids[j]!, ids[i]!];
      }
      return ids.map((id) => ({
        type: 1,
        id,
        previousPhase,
        body: observationBody(create(ResourceObservationSchema, { type: 1, id, readyReplicas: phase })),
        observedAt: Date.now(),
        phase,
        reason: `phase ${phase}`,
      }));
    };
    /** Every region's report at once; the errors of those refused. */
    const reportAll = async (round: number, phase: number, previousPhase: number | undefined) => {
      const results = await Promise.allSettled(
        regionIds.map((regionId, r) =>
          store.observations.saveReport(regionId, {
            leader: { epoch: 1, holderIdentity: `agent-${r}` },
            writes: writes(round, phase, previousPhase),
            heartbeat: { at: Date.now(), appliedVersion: round },
          }),
        ),
      );
      return results.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []));
    };

    test("reports of every region inserting and then updating the same resources' statuses at once all commit", async () => {
      const refused: string[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        refused.push(...(await reportAll(round, 2, undefined)), ...(await reportAll(round, 3, 2)));
      }
      assert.deepEqual(refused, []);
      const rows = await store.database.db.selectFrom("observations").select(["phase"]).execute();
      assert.equal(rows.length, REGIONS * RESOURCES * ROUNDS);
      assert.ok(rows.every((r) => r.phase === 3));
      const transitions = await store.database.db.selectFrom("status_transitions").select(["to_phase"]).execute();
      assert.equal(transitions.length, 2 * REGIONS * RESOURCES * ROUNDS);
      const agents = await store.observations.agents(regionIds);
      assert.deepEqual(
        [...agents.values()].map((a) => a.appliedVersion),
        regionIds.map(() => ROUNDS - 1),
      );
    });

    test("a report with more statuses than one statement takes is written whole", async () => {
      const many = Array.from({ length: 2500 }, (_, i) => `many-${String(i).padStart(4, "0")}`).map((id) => ({
        type: 1,
        id,
        previousPhase: undefined,
        body: observationBody(create(ResourceObservationSchema, { type: 1, id })),
        observedAt: Date.now(),
        phase: 2,
        reason: "",
      }));
      await store.observations.saveReport(regionIds[0]!, { leader: undefined, writes: many, heartbeat: undefined });
      const loaded = await store.observations.load(regionIds[0]!, many);
      assert.equal([...loaded.values()].filter((e) => e.stored?.phase === 2).length, many.length);
    });

    test("an observation is stored without its time: the same observation at another time is the same bytes", async () => {
      const observed = (at: number, readyReplicas: number) =>
        create(ResourceObservationSchema, { type: 1, id: "timeless", observedImage: "app:v1", readyReplicas, observedAt: timestampFromMs(at) });
      const first = observed(1_000, 2);
      const body = observationBody(first);
      assert.equal(first.observedAt?.seconds, 1n, "the observation itself keeps its time");
      assert.deepEqual(observationBody(observed(2_000, 2)), body);
      assert.notDeepEqual(observationBody(observed(1_000, 3)), body);
      const write = { type: 1, id: "timeless", previousPhase: undefined, body, observedAt: 5_000, phase: 2, reason: "" };
      await store.observations.saveReport(regionIds[0]!, { leader: undefined, writes: [write], heartbeat: undefined });
      const stored = (await store.observations.load(regionIds[0]!, [write])).get("1/timeless")!.stored!;
      assert.deepEqual(Uint8Array.from(stored.body), body);
      assert.equal(stored.observedAt, 5_000);
      assert.equal(stored.observation.readyReplicas, 2);
      assert.equal(stored.observation.observedAt, undefined);
    });

    test("status inputs: each placement with its desired state, observation and agent; what is missing is undefined", async () => {
      const regions = ["r0", "r1", "r2"];
      await store.deployments.create(
        create(DeploymentSchema, { id: "joined", namespace: "shop", image: "app:1", port: 8080, regions: regions.map((region) => ({ region, replicas: 1 })) }),
      );
      const write = { type: ResourceType.DEPLOYMENT, id: "joined", previousPhase: undefined, observedAt: 7_000, phase: 3, reason: "ready" };
      const body = observationBody(create(ResourceObservationSchema, { type: ResourceType.DEPLOYMENT, id: "joined", readyReplicas: 1 }));
      await store.observations.saveReport(regionIds[0]!, { leader: undefined, writes: [{ ...write, body }], heartbeat: { at: 8_000, appliedVersion: 4 } });
      const inputs = (await store.observations.inputs(ResourceType.DEPLOYMENT, ["joined", "absent"])).sort((a, b) => a.region.localeCompare(b.region));
      assert.deepEqual(
        inputs.map((i) => i.region),
        regions,
      );
      const [r0, r1] = inputs;
      assert.equal(r0!.regionId, regionIds[0]);
      assert.equal(r0!.desired?.spec.case, "deployment");
      assert.ok(r0!.desired!.version > 0n);
      assert.equal(r0!.stored?.observation.readyReplicas, 1);
      assert.equal(r0!.stored?.observedAt, 7_000);
      assert.equal(r0!.stored?.reason, "ready");
      assert.equal(r0!.agentLastSeen, 8_000);
      assert.equal(r0!.agentAppliedVersion, 4);
      assert.equal(r1!.stored, undefined);
      assert.ok(r1!.desired);
    });
  });
}
