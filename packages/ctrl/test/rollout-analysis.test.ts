// Rollout analysis judged alone (rollouts/condition.ts, rollouts/analysis.ts, the gate): the
// condition language and its errors; Argo Rollouts' limits (failureLimit, inconclusiveLimit,
// consecutiveErrorLimit, count, errors not counted); a wave's verdict; the gate acting on it —
// failed fails the wave (onFailure), inconclusive pauses, a bake passes only with every analysis
// successful on this bake's measurements, and what is missing fails by the analysis deadline.
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
import { planAnalysis, type AnalysisPlan, type StoredMeasurement, type StoredRollout } from "@flotilla/store";
import { compileCondition, ConditionError } from "../src/rollouts/condition.ts";
import { analysisDeadline, assessRegion, judgeMeasurement, judgeWave, renderTemplate, unknownTemplateNames } from "../src/rollouts/analysis.ts";
import { evaluate, startWave } from "../src/rollouts/gate.ts";
import { planWaves } from "../src/rollouts/plan.ts";

const secs = (s: number) => ({ seconds: BigInt(s), nanos: 0 });

describe("conditions", () => {
  test("comparisons, logic, arithmetic and functions on result", () => {
    const cases: [string, number, boolean][] = [
      ["result < 0.01", 0.005, true],
      ["result < 0.01", 0.2, false],
      ["result >= 0.99 && !isNaN(result)", 0.995, true],
      ["result >= 0.99 and not isNaN(result)", Number.NaN, false],
      ["result > 5 || result == 0", 0, true],
      ["(result - 100) / 2 <= -10", 70, true],
      ["abs(result) > 1e3", -2000, true],
      ["isInf(result)", Number.POSITIVE_INFINITY, true],
      ["result != 1", 1, false],
      ["true", 3, true],
    ];
    for (const [text, result, expected] of cases) assert.equal(compileCondition(text)(result), expected, `${text} with ${result}`);
  });

  test("NaN satisfies no comparison", () => {
    assert.equal(compileCondition("result < 0.01")(Number.NaN), false);
    assert.equal(compileCondition("result >= 0.01")(Number.NaN), false);
  });

  test("errors say what is wrong, before any measurement", () => {
    for (const [text, message] of [
      ["", /empty/],
      ["result", /must be true or false/],
      ["result <", /unexpected end/],
      ["result < 0.01)", /unexpected "\)"/],
      ["process.exit(1)", /unexpected "\." at 7/],
      ["exit(1)", /unknown name "exit"/],
      ["result < 'x'", /unexpected "'"/],
      ["result + true < 1", /\+ takes a number, not a boolean/],
      ["!result", /! takes a boolean, not a number/],
      ["result == true", /== compares a number with a boolean/],
      ["x".repeat(2000), /at most 1024 characters/],
    ] as const) {
      assert.throws(
        () => compileCondition(text),
        (e: unknown) => e instanceof ConditionError && message.test(e.message),
        text,
      );
    }
  });
});

describe("templates", () => {
  test("{{region}}, {{namespace}}, {{deployment}}, {{revision}} are filled in; others are reported", () => {
    const values = { region: "canary", namespace: "demo", deployment: "shop", revision: "7" };
    assert.equal(
      renderTemplate('x{deployment="{{deployment}}",revision="{{ revision }}",region="{{region}}"}', values),
      'x{deployment="shop",revision="7",region="canary"}',
    );
    assert.deepEqual(unknownTemplateNames("{{region}} {{cluster}} {{ env }}"), ["cluster", "env"]);
  });
});

const plan = (over: Partial<AnalysisPlan> = {}): AnalysisPlan => ({
  ...planAnalysis({
    name: "errors",
    successCondition: "result < 0.05",
    failureCondition: "",
    provider: { case: "prometheus", value: { query: "q" } },
  } as never),
  ...over,
});

let nextIndex = 0;
const m = (value: number | string, over: Partial<StoredMeasurement> = {}): StoredMeasurement => ({
  rolloutId: "shop-2",
  wave: 0,
  bakeStart: 1000,
  analysis: "errors",
  region: "canary",
  index: nextIndex++,
  revision: 2,
  takenAt: 0,
  ...(typeof value === "number" ? { value } : { error: value }),
  ...over,
});

describe("a measurement and an analysis in a region (Argo Rollouts' semantics)", () => {
  test("conditions: both set: failure wins, neither true is inconclusive; one alone decides both ways", () => {
    const both = plan({ successCondition: "result < 0.05", failureCondition: "result > 0.1" });
    assert.equal(judgeMeasurement(both, { value: 0.01 }), "SUCCESSFUL");
    assert.equal(judgeMeasurement(both, { value: 0.5 }), "FAILED");
    assert.equal(judgeMeasurement(both, { value: 0.07 }), "INCONCLUSIVE");
    assert.equal(judgeMeasurement(plan({ successCondition: "result < 0.05" }), { value: 0.07 }), "FAILED");
    assert.equal(judgeMeasurement(plan({ successCondition: "", failureCondition: "result > 0.1" }), { value: 0.07 }), "SUCCESSFUL");
    assert.equal(judgeMeasurement(both, { error: "timeout" }), "ERROR");
    assert.equal(judgeMeasurement(both, {}), "INCONCLUSIVE", "no data: the query selected nothing");
  });

  test("defaults: one measurement without an interval, failureLimit 0, inconclusiveLimit 0, consecutiveErrorLimit 4", () => {
    const p = planAnalysis({
      name: "a",
      successCondition: "result < 1",
      failureCondition: "",
      provider: { case: "prometheus", value: { query: "q" } },
    } as never);
    assert.deepEqual([p.count, p.failureLimit, p.inconclusiveLimit, p.consecutiveErrorLimit, p.intervalMs, p.initialDelayMs], [1, 0, 0, 4, 30_000, 0]);
    const repeated = planAnalysis({ name: "a", interval: secs(10), successCondition: "x", failureCondition: "", provider: { case: undefined } } as never);
    assert.equal(repeated.count, undefined, "with an interval and no count: until the bake ends");
  });

  test("no measurement is PENDING, even with the bake over: nothing passes unmeasured", () => {
    assert.equal(assessRegion(plan(), "canary", [], true).phase, "PENDING");
  });

  test("one failure above failureLimit fails; within it the run goes on to its count", () => {
    assert.equal(assessRegion(plan({ count: 3 }), "canary", [m(0.01), m(0.2)], false).phase, "FAILED");
    const tolerant = plan({ count: 3, failureLimit: 1 });
    assert.equal(assessRegion(tolerant, "canary", [m(0.01), m(0.2)], false).phase, "RUNNING");
    const done = assessRegion(tolerant, "canary", [m(0.01), m(0.2), m(0.01)], false);
    assert.equal(done.phase, "SUCCESSFUL");
    assert.match(done.reason, /analysis errors in canary successful: 2 of 3 measurements successful; last result 0\.01 SUCCESSFUL/);
  });

  test("errors do not count toward count; more than consecutiveErrorLimit in a row is ERROR; a value in between resets them", () => {
    const p = plan({ count: 2, consecutiveErrorLimit: 2 });
    assert.equal(assessRegion(p, "canary", [m(0.01), m("timeout"), m("timeout")], false).phase, "RUNNING", "one counted, two errors: at the limit");
    const errored = assessRegion(p, "canary", [m(0.01), m("timeout"), m("timeout"), m("no data")], false);
    assert.equal(errored.phase, "ERROR");
    assert.match(errored.reason, /3 consecutive errors \(consecutiveErrorLimit 2\); last error: no data/);
    assert.equal(assessRegion(p, "canary", [m("x"), m("x"), m(0.01), m("x"), m("x"), m(0.02)], false).phase, "SUCCESSFUL");
  });

  test("inconclusive above inconclusiveLimit is INCONCLUSIVE", () => {
    const p = plan({ count: 2, successCondition: "result < 0.05", failureCondition: "result > 0.1" });
    assert.equal(assessRegion(p, "canary", [m(0.07)], false).phase, "INCONCLUSIVE");
    assert.equal(assessRegion({ ...p, inconclusiveLimit: 1 }, "canary", [m(0.07)], false).phase, "RUNNING");
  });

  test("without a count: RUNNING until the bake is over, then SUCCESSFUL with at least one measurement", () => {
    const p = plan({ count: undefined, intervalMs: 10_000 });
    assert.equal(assessRegion(p, "canary", [m(0.01), m(0.01)], false).phase, "RUNNING");
    assert.equal(assessRegion(p, "canary", [m(0.01), m(0.01)], true).phase, "SUCCESSFUL");
    assert.equal(assessRegion(p, "canary", [m("down")], true).phase, "RUNNING", "an error is no measurement that passes");
  });
});

/** A rollout whose canary wave (canary, eu) bakes 10 s under `analysis`, started at t0. */
function rollout(t0: number, analysis: object[], onFailure = RolloutFailurePolicy.ROLLBACK): StoredRollout {
  const strategy = create(RolloutStrategySchema, {
    waves: [{ name: "canary", regions: ["canary", "eu"], bake: secs(10), progressDeadline: secs(60), analysis: analysis as never }, { name: "rest" }],
    onFailure,
  });
  const placed = ["canary", "eu", "us"].map((name, i) => ({ name, id: i + 1, labels: {} }));
  const r: StoredRollout = {
    id: "shop-2",
    deploymentId: "shop",
    fromRevision: 1,
    toRevision: 2,
    state: RolloutState.PROGRESSING,
    currentWave: 0,
    generation: 1,
    onFailure,
    reason: "",
    waves: planWaves(strategy, placed),
    dueAt: undefined,
    createTime: t0,
    updateTime: t0,
  };
  startWave(r, t0);
  return r;
}

const running = new Map<string, RegionStatus>(
  ["canary", "eu", "us"].map((region) => [region, create(RegionStatusSchema, { region, phase: Phase.RUNNING, desiredVersion: 5n, appliedVersion: 5n })]),
);

const errorRate = {
  name: "error-rate",
  provider: { case: "prometheus", value: { query: "rate" } },
  count: 2,
  interval: secs(2),
  failureCondition: "result > 0.05",
};

describe("the gate with analyses", () => {
  const t0 = 1_000_000;
  const baking = () => evaluate(rollout(t0, [errorRate]), running, t0)!.next;
  const of = (region: string, value: number | string, bakeStart = t0) => m(value, { analysis: "error-rate", region, bakeStart });

  test("the bake's time alone does not pass it: every analysis must succeed in every region of the wave", () => {
    const r = baking();
    assert.equal(r.waves[0]!.runningSince, t0);
    const partial = [of("canary", 0.01), of("canary", 0.01), of("eu", 0.01)];
    const waiting = evaluate(r, running, t0 + 10_000, partial)!;
    assert.equal(waiting.action, "wait-analysis");
    assert.equal(waiting.next.dueAt, analysisDeadline(r.waves[0]!));
    assert.match(waiting.next.reason, /baked, waiting for analysis: analysis error-rate in eu: 1 of 2 measurements/);
    assert.equal(evaluate(waiting.next, running, t0 + 10_500, partial), undefined, "nothing new: no write");
    const all = [...partial, of("eu", 0.02)];
    assert.equal(evaluate(waiting.next, running, t0 + 9_000, all), undefined, "successful, but the bake is not over");
    assert.equal(evaluate(waiting.next, running, t0 + 11_000, all)!.action, "start-wave");
  });

  test("measurements of another bake (before a reset, before a resume) are not this bake's", () => {
    const old = [of("canary", 0.01, 1), of("canary", 0.01, 1), of("eu", 0.01, 1), of("eu", 0.01, 1)];
    assert.equal(evaluate(baking(), running, t0 + 11_000, old)!.action, "wait-analysis");
  });

  test("a failed analysis fails the wave at once, before the bake is over: ROLLBACK restores the moved regions, PAUSE freezes", () => {
    const failed = evaluate(baking(), running, t0 + 2000, [of("canary", 0.2)])!;
    assert.equal(failed.next.state, RolloutState.ROLLED_BACK);
    assert.equal(failed.restore, true);
    assert.match(
      failed.next.reason,
      /^wave canary: analysis error-rate in canary failed: 1 failed measurement \(failureLimit 0\); last result 0\.2 FAILED \(failure when result > 0\.05\)$/,
    );
    const paused = evaluate(evaluate(rollout(t0, [errorRate], RolloutFailurePolicy.PAUSE), running, t0)!.next, running, t0 + 2000, [of("eu", 0.3)])!;
    assert.equal(paused.next.state, RolloutState.FAILED);
    assert.equal(paused.restore, false);
  });

  test("errors past consecutiveErrorLimit fail the wave", () => {
    const errors = ["down", "down", "down", "down", "down"].map((e) => of("canary", e));
    const failed = evaluate(baking(), running, t0 + 10_000, errors)!;
    assert.equal(failed.next.state, RolloutState.ROLLED_BACK);
    assert.match(failed.next.reason, /5 consecutive errors \(consecutiveErrorLimit 4\); last error: down/);
  });

  test("an inconclusive analysis pauses the rollout with the reason", () => {
    const both = { ...errorRate, successCondition: "result < 0.01" };
    const r = evaluate(rollout(t0, [both]), running, t0)!.next;
    const paused = evaluate(r, running, t0 + 2000, [of("canary", 0.03)])!;
    assert.equal(paused.action, "analysis-inconclusive");
    assert.equal(paused.next.state, RolloutState.PAUSED);
    assert.match(paused.next.reason, /inconclusive: 1 inconclusive measurement \(inconclusiveLimit 0\); last result 0\.03 INCONCLUSIVE/);
    const empty = evaluate(r, running, t0 + 2000, [{ ...of("canary", 0), value: undefined }])!;
    assert.equal(empty.next.state, RolloutState.PAUSED, "no data pauses too, never counted as an error");
    assert.match(empty.next.reason, /inconclusive: 1 inconclusive measurement \(inconclusiveLimit 0\); last result: no data \(the query selected nothing\)$/);
  });

  test("past the analysis deadline, what is still missing fails the wave", () => {
    const r = baking();
    const deadline = analysisDeadline(r.waves[0]!)!;
    assert.equal(deadline, t0 + 10_000 + 60_000, "the bake's end (later than the last measurement, 2 s in) plus the progress deadline");
    const failed = evaluate(r, running, deadline, [of("canary", 0.01), of("canary", 0.01)])!;
    assert.equal(failed.next.state, RolloutState.ROLLED_BACK);
    assert.match(failed.next.reason, /no verdict by the analysis deadline: analysis error-rate in eu: no measurement yet/);
  });

  test("a wave's verdict is its worst (analysis, region)", () => {
    const wave = baking().waves[0]!;
    assert.equal(judgeWave(wave, [of("canary", 0.2), of("eu", "down")], false).phase, "FAILED");
    assert.equal(judgeWave({ ...wave, analysis: [] }, [], false).phase, "SUCCESSFUL");
  });
});
