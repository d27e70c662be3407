// The rollout state machine alone (rollouts/gate.ts, store's planWaves): waves planned from
// names, selectors and the rest; maxParallel batches; the gate's decisions for each state.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import {
  Phase,
  RegionStatusSchema,
  RolloutFailurePolicy,
  RolloutState,
  RolloutStrategySchema,
  type RegionStatus,
} from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { PlacedRegion, StoredRollout } from "@flotilla/store";
import { evaluate, evaluateSteps, startWave } from "../src/rollouts/gate.ts";
import { parallelism, planWaves } from "../src/rollouts/plan.ts";

const placed: PlacedRegion[] = [
  { name: "canary", id: 1, labels: { tier: "canary" } },
  { name: "eu", id: 2, labels: { tier: "prod", geo: "eu" } },
  { name: "us", id: 3, labels: { tier: "prod", geo: "us" } },
  { name: "ap", id: 4, labels: { tier: "prod", geo: "ap" } },
];

const secs = (s: number) => ({ seconds: BigInt(s), nanos: 0 });

describe("planWaves", () => {
  test("names, selectors, the rest; a region stays in the first wave that takes it; empty waves are dropped", () => {
    const strategy = create(RolloutStrategySchema, {
      waves: [
        { name: "canary", selector: "tier=canary" },
        { name: "nobody", selector: "tier=none" },
        { name: "west", regions: ["eu", "canary"], selector: "geo in (us)" },
      ],
    });
    const waves = planWaves(strategy, placed);
    assert.deepEqual(
      waves.map((w) => [w.name, w.regions.map((r) => r.region)]),
      [
        ["canary", ["canary"]],
        ["west", ["eu", "us"]],
        ["rest", ["ap"]],
      ],
    );
  });

  test("a wave that names no region takes every region not taken before", () => {
    const waves = planWaves(create(RolloutStrategySchema, { waves: [{ name: "one", regions: ["us"] }, { name: "all" }] }), placed);
    assert.deepEqual(
      waves.map((w) => w.regions.map((r) => r.region)),
      [["us"], ["canary", "eu", "ap"]],
    );
  });

  test("maxParallel: a count or a percentage of the wave, at least one, at most the wave", () => {
    assert.equal(parallelism("", 3), 3);
    assert.equal(parallelism("2", 3), 2);
    assert.equal(parallelism("9", 3), 3);
    assert.equal(parallelism("50%", 3), 2);
    assert.equal(parallelism("1%", 3), 1);
  });
});

/** A rollout of two waves (canary; eu and us at most one at a time), its first wave started at `t0`. */
function rollout(t0: number, options: { bake?: number; onFailure?: RolloutFailurePolicy } = {}): StoredRollout {
  const strategy = create(RolloutStrategySchema, {
    waves: [
      { name: "canary", regions: ["canary"], bake: secs(options.bake ?? 10), progressDeadline: secs(60) },
      { name: "rest", maxParallel: "1" },
    ],
  });
  const r: StoredRollout = {
    id: "shop-2",
    deploymentId: "shop",
    fromRevision: 1,
    toRevision: 2,
    state: RolloutState.PROGRESSING,
    currentWave: 0,
    generation: 1,
    onFailure: options.onFailure ?? RolloutFailurePolicy.ROLLBACK,
    reason: "",
    waves: planWaves(strategy, placed.slice(0, 3)),
    dueAt: undefined,
    createTime: t0,
    updateTime: t0,
  };
  startWave(r, t0);
  return r;
}

const statuses = (phases: Record<string, Phase>, options: { stale?: boolean; applied?: bigint } = {}) =>
  new Map<string, RegionStatus>(
    Object.entries(phases).map(([region, phase]) => [
      region,
      create(RegionStatusSchema, { region, phase, stale: options.stale ?? false, desiredVersion: 5n, appliedVersion: options.applied ?? 5n, reason: "why" }),
    ]),
  );

describe("evaluate", () => {
  test("RUNNING starts the bake; the bake's end starts the next wave with its first batch only", () => {
    const t0 = 1_000_000;
    const r = rollout(t0);
    assert.equal(evaluate(r, statuses({ canary: Phase.PENDING }), t0 + 1000), undefined, "waits while the canary is not RUNNING");
    const bake = evaluate(r, statuses({ canary: Phase.RUNNING }), t0 + 1000)!;
    assert.equal(bake.action, "bake");
    assert.equal(bake.next.waves[0]!.runningSince, t0 + 1000);
    assert.equal(bake.next.dueAt, t0 + 11_000);
    assert.equal(evaluate(bake.next, statuses({ canary: Phase.RUNNING }), t0 + 10_999), undefined, "the bake is not over a millisecond early");
    const next = evaluate(bake.next, statuses({ canary: Phase.RUNNING }), t0 + 11_000)!;
    assert.equal(next.action, "start-wave");
    assert.equal(next.next.currentWave, 1);
    assert.deepEqual(next.move, [2], "maxParallel 1: eu first");
    const batch = evaluate(next.next, statuses({ canary: Phase.RUNNING, eu: Phase.RUNNING, us: Phase.RUNNING }), t0 + 12_000)!;
    assert.equal(batch.action, "move-batch");
    assert.deepEqual(batch.move, [3]);
  });

  test("a region leaving RUNNING during the bake ends it; the bake starts again from its next RUNNING", () => {
    const t0 = 1_000_000;
    const baking = evaluate(rollout(t0), statuses({ canary: Phase.RUNNING }), t0)!.next;
    const reset = evaluate(baking, statuses({ canary: Phase.PROGRESSING }), t0 + 5000)!;
    assert.equal(reset.action, "bake-reset");
    assert.equal(reset.next.waves[0]!.runningSince, undefined);
  });

  test("FAILED of the new revision fails the rollout: ROLLBACK restores, PAUSE freezes; an older version's failure does not", () => {
    const t0 = 1_000_000;
    const rolledBack = evaluate(rollout(t0), statuses({ canary: Phase.FAILED }), t0)!;
    assert.equal(rolledBack.next.state, RolloutState.ROLLED_BACK);
    assert.equal(rolledBack.restore, true);
    assert.match(rolledBack.next.reason, /^canary: FAILED: why$/);
    const frozen = evaluate(rollout(t0, { onFailure: RolloutFailurePolicy.PAUSE }), statuses({ canary: Phase.FAILED }), t0)!;
    assert.equal(frozen.next.state, RolloutState.FAILED);
    assert.equal(frozen.restore, false);
    assert.equal(evaluate(rollout(t0), statuses({ canary: Phase.FAILED }, { applied: 4n }), t0), undefined);
  });

  test("the deadline: a region not RUNNING (a stale agent's RUNNING included) fails the rollout once it passed", () => {
    const t0 = 1_000_000;
    assert.equal(evaluate(rollout(t0), statuses({ canary: Phase.RUNNING }, { stale: true }), t0 + 59_999), undefined);
    const late = evaluate(rollout(t0), statuses({ canary: Phase.RUNNING }, { stale: true }), t0 + 60_000)!;
    assert.equal(late.next.state, RolloutState.ROLLED_BACK);
    assert.match(late.next.reason, /wave canary not RUNNING within 60s: canary: RUNNING \(agent stale\)/);
  });

  test("only a PROGRESSING rollout moves by itself", () => {
    for (const state of [RolloutState.PAUSED, RolloutState.WAITING_APPROVAL, RolloutState.FAILED, RolloutState.SUCCEEDED]) {
      assert.equal(evaluate({ ...rollout(0), state }, statuses({ canary: Phase.RUNNING }), 1e12), undefined, RolloutState[state]);
    }
  });
});

describe("evaluateSteps", () => {
  test("one look takes the steps in a row a bake of 0 allows, and ends with the step that moves regions", () => {
    const t0 = 1_000_000;
    const steps = evaluateSteps(rollout(t0, { bake: 0 }), statuses({ canary: Phase.RUNNING }), t0 + 1000, 20);
    assert.deepEqual(
      steps.map((s) => [s.action, s.move]),
      [
        ["bake", []],
        ["start-wave", [2]],
      ],
      "the next batch (us) waits for statuses read after eu moved",
    );
    assert.equal(steps[1]!.next.waves[0]!.runningSince, t0 + 1000, "the next wave starts no earlier than the bake's end");
    assert.equal(steps[1]!.next.waves[1]!.startTime, t0 + 1000);
  });

  test("a bake not over ends the row; so does a failure that restores; at most `max` steps", () => {
    const t0 = 1_000_000;
    assert.deepEqual(
      evaluateSteps(rollout(t0), statuses({ canary: Phase.RUNNING }), t0, 20).map((s) => s.action),
      ["bake"],
    );
    assert.deepEqual(
      evaluateSteps(rollout(t0), statuses({ canary: Phase.FAILED }), t0, 20).map((s) => [s.action, s.restore]),
      [["rolled-back", true]],
    );
    assert.deepEqual(
      evaluateSteps(rollout(t0, { bake: 0 }), statuses({ canary: Phase.RUNNING }), t0, 1).map((s) => s.action),
      ["bake"],
    );
    assert.deepEqual(evaluateSteps(rollout(t0), statuses({ canary: Phase.PENDING }), t0, 20), []);
  });
});
