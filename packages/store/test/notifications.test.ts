// Notification events written in the transaction of what caused them: which events a rollout's
// transition owes; a deployment's status becoming FAILED in an agent's report; an agent lost,
// once per silence however many replicas look; a notifier's selector. SQLite and MySQL.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { ResourceObservationSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { NotificationEvent, NotifierFormat, NotifierSchema } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { Phase, ResourceType, RolloutState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";
import { observationBody, recordNotifications, rolloutNotifications, type Store } from "../src/index.ts";

const rollout = { id: "shop-2", deploymentId: "shop", fromRevision: 1, toRevision: 2, waves: [{ name: "canary" }, { name: "rest" }] };
const events = (from: RolloutState, to: RolloutState, fromWave: number, toWave: number, action: string) =>
  rolloutNotifications({ rollout, from, to, fromWave, toWave, action, actor: "rollout", reason: "" }).map((n) => n.event);

const notifier = (name: string, extra: object = {}) =>
  create(NotifierSchema, { name, url: "https://hooks.example.com/", format: NotifierFormat.STANDARD_WEBHOOKS, ...extra });

async function deliveries(store: Store) {
  return (await store.notifications.deliveries({}, 1000, "")).items;
}

for (const { db, skip } of await testDatabases()) {
  test(`a deployment's status becoming FAILED owes an event, in the report's transaction (${db.name})`, { skip }, async () => {
    const { store, cleanup } = await freshStore(db);
    try {
      await store.regions.create("eu");
      const { id: regionId } = await store.regions.resolve("eu");
      await store.notifications.create(notifier("all"));
      await store.notifications.create(notifier("failures", { events: [NotificationEvent.DEPLOYMENT_FAILED] }));
      await store.notifications.create(notifier("rollouts", { events: [NotificationEvent.ROLLOUT_FAILED] }));
      const write = (phase: Phase, previousPhase: Phase | undefined) => ({
        type: ResourceType.DEPLOYMENT,
        id: "shop",
        previousPhase,
        body: observationBody(create(ResourceObservationSchema, { type: ResourceType.DEPLOYMENT, id: "shop", readyReplicas: phase })),
        observedAt: Date.now(),
        phase,
        reason: "ProgressDeadlineExceeded",
      });
      await store.observations.saveReport(regionId, { leader: undefined, writes: [write(Phase.PROGRESSING, undefined)], heartbeat: undefined });
      assert.equal((await deliveries(store)).length, 0);
      await store.observations.saveReport(regionId, { leader: undefined, writes: [write(Phase.FAILED, Phase.PROGRESSING)], heartbeat: undefined });
      const written = await deliveries(store);
      assert.deepEqual(written.map((d) => d.notifier).sort(), ["all", "failures"]);
      assert.ok(written.every((d) => d.event === NotificationEvent.DEPLOYMENT_FAILED && d.subject === "shop"));
      assert.equal(new Set(written.map((d) => d.eventId)).size, 1, "one event, one delivery per notifier");
      // FAILED again (no transition): nothing more.
      await store.observations.saveReport(regionId, { leader: undefined, writes: [write(Phase.FAILED, Phase.FAILED)], heartbeat: undefined });
      assert.equal((await deliveries(store)).length, 2);
    } finally {
      await cleanup();
    }
  });

  test(`a notifier's backlog of older deliveries does not keep another's from being claimed (${db.name})`, { skip }, async () => {
    const { store, cleanup } = await freshStore(db);
    try {
      await store.notifications.create(notifier("dead"));
      // 50 events only the dead notifier is owed (the oldest), then 5 owed to both.
      const t0 = Date.now() - 60_000;
      await store.database.db.transaction().execute((tx) =>
        recordNotifications(
          tx,
          Array.from({ length: 50 }, (_, i) => ({ event: NotificationEvent.AGENT_LOST, subject: `old-${i}`, data: {} })),
          t0,
        ),
      );
      await store.notifications.create(notifier("live"));
      await store.database.db.transaction().execute((tx) =>
        recordNotifications(
          tx,
          Array.from({ length: 5 }, (_, i) => ({ event: NotificationEvent.AGENT_LOST, subject: `new-${i}`, data: {} })),
          t0 + 1000,
        ),
      );
      // The dead one has a free slot: each notifier gets what it has room for, the oldest first.
      const claimed = await store.notifications.claim(8, 4, new Map([["dead", 3]]), 60_000);
      assert.deepEqual(
        claimed.map((c) => c.notifier.name),
        ["dead", "live", "live", "live", "live"],
      );
      // The dead one at its limit: the live one's last due delivery, none of the dead one's.
      const next = await store.notifications.claim(8, 4, new Map([["dead", 4]]), 60_000);
      assert.deepEqual(
        next.map((c) => c.notifier.name),
        ["live"],
      );
    } finally {
      await cleanup();
    }
  });

  test(`an agent lost: one event per silence, however many replicas look (${db.name})`, { skip }, async () => {
    const { store, cleanup } = await freshStore(db);
    try {
      await store.regions.create("eu");
      const { id: regionId } = await store.regions.resolve("eu");
      // agent.lost ignores selectors: it is about a region.
      await store.notifications.create(notifier("ops", { events: [NotificationEvent.AGENT_LOST], selector: { namespaces: ["nothing-*"] } }));
      await store.observations.saveReport(regionId, { leader: undefined, writes: [], heartbeat: { at: 1_000, appliedVersion: 0 } });
      assert.equal(await store.notifications.recordLostAgents(500), 0, "not silent long enough");
      const counts = await Promise.all([store.notifications.recordLostAgents(2_000), store.notifications.recordLostAgents(2_000)]);
      assert.equal(counts[0]! + counts[1]!, 1, "two replicas looking: one event");
      assert.equal(await store.notifications.recordLostAgents(3_000), 0, "the same silence again: nothing");
      const [lost] = await deliveries(store);
      assert.equal(lost?.event, NotificationEvent.AGENT_LOST);
      assert.equal(lost?.subject, "eu");
      // Back, then silent again: another event.
      await store.observations.saveReport(regionId, { leader: undefined, writes: [], heartbeat: { at: 5_000, appliedVersion: 0 } });
      assert.equal(await store.notifications.recordLostAgents(6_000), 1);
      assert.equal((await deliveries(store)).length, 2);
    } finally {
      await cleanup();
    }
  });
}

test("the events a rollout's transition owes", () => {
  const { UNSPECIFIED, PROGRESSING, WAITING_APPROVAL, PAUSED, FAILED, ROLLED_BACK, SUCCEEDED } = RolloutState;
  const E = NotificationEvent;
  assert.deepEqual(events(UNSPECIFIED, PROGRESSING, 0, 0, "start-wave"), [E.ROLLOUT_STARTED]);
  assert.deepEqual(events(UNSPECIFIED, WAITING_APPROVAL, 0, 0, "wait-approval"), [E.ROLLOUT_STARTED, E.ROLLOUT_WAITING_APPROVAL]);
  assert.deepEqual(events(PROGRESSING, PROGRESSING, 0, 1, "start-wave"), [E.ROLLOUT_WAVE_SUCCEEDED]);
  assert.deepEqual(events(PROGRESSING, WAITING_APPROVAL, 0, 1, "wait-approval"), [E.ROLLOUT_WAVE_SUCCEEDED, E.ROLLOUT_WAITING_APPROVAL]);
  assert.deepEqual(events(PROGRESSING, SUCCEEDED, 1, 1, "succeeded"), [E.ROLLOUT_WAVE_SUCCEEDED, E.ROLLOUT_SUCCEEDED]);
  assert.deepEqual(events(PROGRESSING, PAUSED, 0, 0, "paused"), [E.ROLLOUT_PAUSED]);
  assert.deepEqual(events(PROGRESSING, FAILED, 0, 0, "failed"), [E.ROLLOUT_FAILED]);
  assert.deepEqual(events(PROGRESSING, ROLLED_BACK, 0, 0, "rolled-back"), [E.ROLLOUT_FAILED, E.ROLLOUT_ROLLED_BACK]);
  assert.deepEqual(events(PROGRESSING, PROGRESSING, 0, 0, "bake"), [], "a bake's start owes nothing");
  const wave = rolloutNotifications({
    rollout,
    from: PROGRESSING,
    to: PROGRESSING,
    fromWave: 0,
    toWave: 1,
    action: "start-wave",
    actor: "rollout",
    reason: "",
  })[0]!;
  assert.equal(wave.data.wave, "canary", "the wave that succeeded");
});
