// rollout status as a person sees it, without a server: the view of a rollout (each wave's
// state, the bake's time left from running_since + bake, the revision each region runs, a
// region rolled back said so with the revision it runs now, each analysis of the bake with its
// last measurements per region and its condition), and the live form redrawing in place over a
// status stream until the rollout ends.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { durationFromMs, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { AnalysisPhase, Phase, RolloutFailurePolicy, RolloutSchema, RolloutState, type Rollout } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { ObjectStatusSchema, type WatchStatusResponse } from "@flotilla/proto/ctrl/v1/status_pb.js";
import type { Clients } from "../src/client.ts";
import { ExitError } from "../src/errors.ts";
import { renderRollout, rolloutStatus } from "../src/commands/rollout.ts";

const NOW = Date.parse("2026-01-01T12:00:00Z");

function rollout(state: RolloutState, runningSinceAgoMs: number | undefined): Rollout {
  return create(RolloutSchema, {
    id: "shop-2",
    deployment: "shop",
    toRevision: 2n,
    state,
    currentWave: 0,
    onFailure: RolloutFailurePolicy.PAUSE,
    reason: "wave canary: every region RUNNING, baking 5s",
    waves: [
      {
        name: "canary",
        bake: durationFromMs(5000),
        startTime: timestampFromMs(NOW - 8000),
        runningSince: runningSinceAgoMs === undefined ? undefined : timestampFromMs(NOW - runningSinceAgoMs),
        regions: [{ region: "canary", revision: 2n, moved: true, phase: Phase.RUNNING }],
      },
      {
        name: "rest",
        approval: true,
        regions: [
          { region: "eu", revision: 1n, phase: Phase.RUNNING },
          { region: "us", revision: 1n, phase: Phase.RUNNING },
        ],
      },
    ],
  });
}

test("the view: the bake's time left from running_since + bake, waves to come, the revision each region runs", () => {
  assert.equal(
    renderRollout(rollout(RolloutState.PROGRESSING, 1500), NOW),
    `Rollout:     shop-2 (deployment/shop to revision 2)
State:       PROGRESSING, wave 1/2 canary
Reason:      wave canary: every region RUNNING, baking 5s
On failure:  PAUSE
Waves:
  WAVE     STATE                BAKE            REGION   REVISION   PHASE
  canary   baking               4s left of 5s   canary   2          RUNNING
  rest     pending (approval)   -               eu       1          RUNNING
                                                us       1          RUNNING
`,
  );
  const paused = renderRollout(rollout(RolloutState.PAUSED, 1500), NOW);
  assert.match(paused, /^ {2}canary +paused +5s +canary /m, "a paused bake shows its length, not a countdown");
  assert.match(renderRollout(rollout(RolloutState.PROGRESSING, 9000), NOW), /^ {2}canary +baking +0s left of 5s /m);
  assert.match(renderRollout(rollout(RolloutState.PROGRESSING, undefined), NOW), /^ {2}canary +progressing +5s /m);
});

test("the analyses of the bake: each region's phase, last three measurements (value and phase) and the condition; a region rolled back shows what it runs now", () => {
  const r = rollout(RolloutState.ROLLED_BACK, 3000);
  r.reason = "wave canary: analysis error-rate in canary failed: 1 failed measurement (failureLimit 0)";
  r.onFailure = RolloutFailurePolicy.ROLLBACK;
  // ctrl wrote revision 3 (revision 1's spec) on the way back; the canary runs it, RUNNING.
  Object.assign(r.waves[0]!.regions[0]!, { revision: 3n, rolledBack: true, phase: Phase.RUNNING });
  const at = (i: number) => timestampFromMs(NOW - 3000 + i * 1000);
  r.waves[0]!.analyses = [
    {
      name: "error-rate",
      failureCondition: "result > 0.05",
      regions: [
        {
          region: "canary",
          phase: AnalysisPhase.FAILED,
          measurements: [
            {
              index: 0,
              takenAt: at(0),
              revision: 2n,
              phase: AnalysisPhase.ERROR,
              result: { case: "error", value: "Get http://prometheus:9090: connection refused" },
            },
            { index: 1, takenAt: at(1), revision: 2n, phase: AnalysisPhase.SUCCESSFUL, result: { case: "value", value: 0.012345 } },
            { index: 2, takenAt: at(2), revision: 2n, phase: AnalysisPhase.SUCCESSFUL, result: { case: "value", value: 0.02 } },
            { index: 3, takenAt: at(3), revision: 2n, phase: AnalysisPhase.FAILED, result: { case: "value", value: 0.2 } },
          ],
        },
      ],
    },
    { name: "latency", successCondition: "result < 0.3", regions: [{ region: "canary", phase: AnalysisPhase.PENDING, measurements: [] }] },
  ] as never;
  assert.equal(
    renderRollout(r, NOW),
    `Rollout:     shop-2 (deployment/shop to revision 2)
State:       ROLLED_BACK, wave 1/2 canary
Reason:      wave canary: analysis error-rate in canary failed: 1 failed measurement (failureLimit 0)
On failure:  ROLLBACK
Waves:
  WAVE     STATE                BAKE   REGION   REVISION   PHASE
  canary   rolled back          5s     canary   3          RUNNING (rolled back)
  rest     pending (approval)   -      eu       1          RUNNING
                                       us       1          RUNNING
Analysis of wave canary:
  ANALYSIS     REGION   PHASE     LAST MEASUREMENTS                                 CONDITION
  error-rate   canary   FAILED    0.01235 SUCCESSFUL, 0.02 SUCCESSFUL, 0.2 FAILED   failure when result > 0.05
  latency      canary   PENDING   -                                                 success when result < 0.3
`,
  );
});

/** Clients whose status stream sends `statuses`, `gapMs` apart, then stays open. */
function streaming(statuses: Rollout[], gapMs: number): Clients {
  return {
    deployments: { getDeployment: async () => ({}) },
    status: {
      async *watchStatus(_request: unknown, options: { signal: AbortSignal }): AsyncIterable<Partial<WatchStatusResponse>> {
        for (const [i, r] of statuses.entries()) {
          if (i > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
          const status = create(ObjectStatusSchema, { resourceType: ResourceType.DEPLOYMENT, id: "shop", revision: 2n, rollout: r });
          yield { cursor: BigInt(i + 1), event: { case: "object", value: status } };
        }
        await new Promise((resolve) => options.signal.addEventListener("abort", resolve));
      },
    },
  } as unknown as Clients;
}

test("live in a terminal: redrawn in place on each change and each second of the bake, until the rollout ends", async () => {
  const writes: string[] = [];
  const baking = rollout(RolloutState.PROGRESSING, 0);
  baking.waves[0]!.runningSince = timestampFromMs(Date.now());
  const done = rollout(RolloutState.SUCCEEDED, 5000);
  await rolloutStatus(streaming([baking, done], 2300), "shop", { watch: true, timeoutMs: 10_000, redraw: true }, (t) => writes.push(t));
  assert.ok(writes.length >= 3, `the countdown redrawn: ${writes.length} writes`);
  const REDRAW = "\x1b[9F\x1b[J"; // to the start of the 9 lines before, erased to the end
  assert.ok(!writes[0]!.includes("\x1b"), "the first view is written as it is");
  for (const w of writes.slice(1)) assert.ok(w.startsWith(REDRAW), `each next view replaces the one before: ${JSON.stringify(w.slice(0, 8))}`);
  assert.match(writes[0]!, /5s left of 5s/);
  assert.match(writes.at(-1)!, /^State: +SUCCEEDED/m);
});

test("live: a rollout that fails exits 1 with its reason; printed once, one under way exits 2", async () => {
  const failed = rollout(RolloutState.FAILED, undefined);
  failed.reason = "canary: FAILED: ProgressDeadlineExceeded";
  const out: string[] = [];
  await assert.rejects(
    rolloutStatus(streaming([failed], 0), "shop", { watch: true, timeoutMs: 10_000, redraw: false }, (t) => out.push(t)),
    (e) => e instanceof ExitError && e.code === 1 && e.message === "error: deployment/shop: rollout shop-2 FAILED: canary: FAILED: ProgressDeadlineExceeded",
  );
  assert.match(out[0]!, /^State: +FAILED, wave 1\/2 canary$/m);
  await assert.rejects(
    rolloutStatus(streaming([rollout(RolloutState.PROGRESSING, 0)], 0), "shop", { watch: false, timeoutMs: 10_000, redraw: false }, () => {}),
    (e) => e instanceof ExitError && e.code === 2,
  );
});
