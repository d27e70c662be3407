// The rollout state machine (ARCHITECTURE §9) as pure functions: given a rollout, its
// deployment's status per region and its bake's analysis measurements now, what (if anything)
// happens next. Every decision about a rollout is made in this directory and nowhere else:
// here the gate's (evaluate) and a change's start and supersede (startRollout, supersede,
// outdated: the store's own writes take them through storeDecisions), in plan.ts the waves a
// strategy makes, in controls.ts the operators', in analysis.ts an analysis' verdict. The store
// (store/src/rollouts.ts) only writes what they decide, each transition one compare-and-set;
// the driver (driver.ts) and RolloutService hand them to it. Each edge below names the action
// it records (store's ROLLOUT_ACTIONS, the one list) and, in brackets, the function deciding
// it; the active states are ACTIVE_ROLLOUT_STATES (store, as its queries filter on them).
//
// States and transitions (docs/architecture.md §9; docs/rollout-analysis.md):
//   (a change)        no region's desired state changes (a stop included) → none: written at once
//                     its first wave asks for approval → WAITING_APPROVAL (wait-approval);
//                     else → PROGRESSING, the first batch moves (start-wave)  [startRollout]
//   PROGRESSING       wave w is under way: its moved regions are to run the new revision.
//     a moved region FAILED at the new revision, or the wave's progress deadline passed while
//     one is not RUNNING (its agent stale included)
//                                           → fail: ROLLED_BACK (rolled-back; onFailure
//                                              ROLLBACK: every moved region gets its previous
//                                              revision back) or FAILED (failed; PAUSE: frozen)
//     every moved region RUNNING, regions of w left (maxParallel) → the next batch (move-batch)
//     every region of w RUNNING             → its bake starts: runningSince (bake)
//     a region leaving RUNNING in the bake  → the bake ends, starts again later (bake-reset)
//     an analysis of the bake FAILED or ERROR → fail, as above (analysis.ts judges)
//     an analysis of the bake INCONCLUSIVE  → PAUSED with the reason (analysis-inconclusive)
//     bake time over, analyses still measuring → due at the analysis deadline (wait-analysis),
//                                              past which what is missing fails the wave
//     baked (time over, every analysis SUCCESSFUL), w the last wave → SUCCEEDED (succeeded)
//     baked, wave w+1 asks for approval     → WAITING_APPROVAL (wait-approval)
//     baked                                 → wave w+1 starts, its first batch moves (start-wave)
//     pause                                 → PAUSED (paused)                  [controls: pause]
//     promote, the bake under way           → as baked (the bake and analyses skipped)
//                                                                                  [controls: promote]
//   WAITING_APPROVAL  approve or promote     → PROGRESSING, the wave starts (start-wave)
//                                                                         [controls: approve, promote]
//                     pause                  → PAUSED (paused)                  [controls: pause]
//   PAUSED            resume                 → PROGRESSING, the wave's deadline counted anew, its
//                                              bake (analyses included) started again; paused
//                                              while waiting for approval: WAITING_APPROVAL again
//                                              (resumed); a wave not started that asks for none
//                                              starts (start-wave)               [controls: resume]
//   FAILED            resume                 → as PAUSED's resume (resumed)     [controls: resume]
//   any active        abort                  → ABORTED, moved regions restored (aborted)
//                                                                                    [controls: abort]
//                     a newer change         → SUPERSEDED (superseded), in its transaction [supersede]
//                     its deployment moved on without superseding it → SUPERSEDED (superseded),
//                                              moving nothing, whatever was decided  [outdated]
//   SUCCEEDED, ROLLED_BACK, ABORTED, SUPERSEDED: final.
//
// Invariants: a region moves only in a transition that starts its wave or its batch; a wave
// starts once (each transition is a compare-and-set on the generation; the steps of one look,
// evaluateSteps, are one compare-and-set); RUNNING counts only at the region's current desired
// version (the projection reads PENDING until the agent has applied it), so an older
// observation that still says RUNNING never passes the gate, and no step is decided on
// statuses read before a region it moved (a row of steps ends with a move); a bake counts from
// its stored start, so a restart never shortens it; a bake passes only on every analysis
// SUCCESSFUL on measurements of that bake of the revision its regions run (ReportMeasurements
// keeps no other), and no measurement is never a pass.
import { Phase, RolloutFailurePolicy, RolloutState, type RegionStatus } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { RolloutAction, RolloutDecisions, RolloutStart, RolloutStep, StoredMeasurement, StoredRollout, WaveRegion } from "@flotilla/store";
import { analysisDeadline, judgeWave } from "./analysis.ts";
import { nextBatch, planWaves } from "./plan.ts";

export interface Decision {
  next: StoredRollout;
  /** Regions to move to the new revision. */
  move: number[];
  /** Restore every moved region's previous revision. */
  restore: boolean;
  /** How the transition is recorded. */
  action: RolloutAction;
}

/**
 * The rollout a change of a deployment with a strategy starts (generation 1): its waves planned,
 * its first wave started (start-wave) or waiting for approval (wait-approval). The store writes
 * it, and the first batch's regions, in the change's transaction. A change that leaves every
 * region's desired state as it is, or takes the deployment out of every region (a stop), starts
 * none (undefined): there is nothing to stage, it takes effect at once.
 */
export function startRollout(change: RolloutStart): { rollout: StoredRollout; action: RolloutAction } | undefined {
  const { strategy, now } = change;
  if (change.changed.length === 0) return undefined;
  const rollout: StoredRollout = {
    id: change.id,
    deploymentId: change.deploymentId,
    fromRevision: change.fromRevision,
    toRevision: change.toRevision,
    state: RolloutState.PROGRESSING,
    currentWave: 0,
    generation: 1,
    onFailure: strategy.onFailure === RolloutFailurePolicy.PAUSE ? RolloutFailurePolicy.PAUSE : RolloutFailurePolicy.ROLLBACK,
    reason: "",
    waves: planWaves(strategy, change.placed),
    dueAt: undefined,
    createTime: now,
    updateTime: now,
  };
  const first = rollout.waves[0]!;
  if (first.approval) {
    rollout.state = RolloutState.WAITING_APPROVAL;
    rollout.reason = `wave ${first.name} waits for approval`;
    return { rollout, action: "wait-approval" };
  }
  startWave(rollout, now);
  return { rollout, action: "start-wave" };
}

/**
 * Starts `rollout`'s current wave in place (a rollout being built or a copy being decided on):
 * its first batch is marked moved and returned; its deadline becomes due.
 */
export function startWave(rollout: StoredRollout, now: number): WaveRegion[] {
  const wave = rollout.waves[rollout.currentWave]!;
  wave.startTime = now;
  const batch = nextBatch(wave);
  for (const r of batch) r.moved = true;
  rollout.state = RolloutState.PROGRESSING;
  rollout.reason = `wave ${wave.name}: moving ${batch.map((r) => r.region).join(", ")}`;
  rollout.dueAt = now + wave.deadlineMs;
  return batch;
}

/** An active rollout that a newer change of its deployment supersedes: it ends, moving nothing (the change writes its own regions). */
export function supersede(rollout: StoredRollout): RolloutStep {
  return superseded(rollout, "superseded by a newer change");
}

/**
 * A rollout whose deployment is no longer at its revision without having superseded it
 * (revision: the deployment's now; undefined: gone): its next transition is this one, moving
 * nothing, whatever the gate or an operator decided on what it read.
 */
export function outdated(rollout: StoredRollout, revision: number | undefined): RolloutStep {
  return superseded(rollout, `superseded: deployment ${rollout.deploymentId} ${revision === undefined ? "is gone" : `is at revision ${revision}`}`);
}

function superseded(rollout: StoredRollout, reason: string): RolloutStep {
  return { next: { ...rollout, state: RolloutState.SUPERSEDED, dueAt: undefined, reason }, effects: {}, action: "superseded" };
}

/** The decisions the store's own writes take (a change's start, its supersede, an outdated rollout): ctrl opens its store with them. */
export const storeDecisions: RolloutDecisions = { start: startRollout, supersede, outdated };

/** Whether `rollout` gave every region it moved its previous spec back (ROLLED_BACK, or ABORTED: fail's and abort's restore). */
export function restoredMovedRegions(rollout: StoredRollout): boolean {
  return rollout.state === RolloutState.ROLLED_BACK || rollout.state === RolloutState.ABORTED;
}

/** A copy to change: decisions never mutate what was read. */
function copy(rollout: StoredRollout): StoredRollout {
  return structuredClone(rollout);
}

const running = (status: RegionStatus | undefined) => status !== undefined && status.phase === Phase.RUNNING && !status.stale;

/**
 * What the gate decides for `rollout` given its regions' statuses (by region name) and the
 * measurements of its current wave's bake, at `now`; undefined: wait.
 */
export function evaluate(
  rollout: StoredRollout,
  statuses: ReadonlyMap<string, RegionStatus>,
  now: number,
  measurements: readonly StoredMeasurement[] = [],
): Decision | undefined {
  if (rollout.state !== RolloutState.PROGRESSING) return undefined;
  const wave = rollout.waves[rollout.currentWave]!;
  const moved = wave.regions.filter((r) => r.moved);
  // FAILED counts only of the new revision: an apply error of the version before is no verdict on it.
  const failed = moved.find((r) => {
    const status = statuses.get(r.region);
    return status?.phase === Phase.FAILED && status.appliedVersion >= status.desiredVersion;
  });
  if (failed) return fail(rollout, `${failed.region}: FAILED: ${statuses.get(failed.region)!.reason}`, now);
  const notRunning = moved.filter((r) => !running(statuses.get(r.region)));
  if (notRunning.length > 0) {
    if (now >= (wave.startTime ?? now) + wave.deadlineMs) {
      const why = notRunning.map((r) => `${r.region}: ${describe(statuses.get(r.region))}`).join("; ");
      return fail(rollout, `wave ${wave.name} not RUNNING within ${seconds(wave.deadlineMs)}: ${why}`, now);
    }
    if (wave.runningSince === undefined) return undefined;
    const next = copy(rollout);
    next.waves[next.currentWave]!.runningSince = undefined;
    next.dueAt = (wave.startTime ?? now) + wave.deadlineMs;
    next.reason = `wave ${wave.name}: bake ended early, ${notRunning.map((r) => r.region).join(", ")} not RUNNING`;
    return { next, move: [], restore: false, action: "bake-reset" };
  }
  const batch = nextBatch(wave);
  if (batch.length > 0) return moveBatch(rollout, batch, now);
  if (wave.runningSince === undefined) {
    const next = copy(rollout);
    next.waves[next.currentWave]!.runningSince = now;
    next.dueAt = now + wave.bakeMs;
    next.reason = `wave ${wave.name}: every region RUNNING, baking ${seconds(wave.bakeMs)}`;
    return { next, move: [], restore: false, action: "bake" };
  }
  return judgeBake(rollout, measurements, now);
}

/**
 * A bake under way (every region RUNNING since runningSince): its analyses' verdict first — a
 * failed or errored one fails the wave at once, an inconclusive one pauses it — then its time;
 * the wave is done once both the bake is over and every analysis succeeded.
 */
function judgeBake(rollout: StoredRollout, measurements: readonly StoredMeasurement[], now: number): Decision | undefined {
  const wave = rollout.waves[rollout.currentWave]!;
  const bakeOver = now >= wave.runningSince! + wave.bakeMs;
  const analysis = judgeWave(wave, measurements, bakeOver);
  if (analysis.phase === "FAILED" || analysis.phase === "ERROR") return fail(rollout, `wave ${wave.name}: ${analysis.reason}`, now);
  if (analysis.phase === "INCONCLUSIVE") return pauseInconclusive(rollout, `wave ${wave.name}: ${analysis.reason}`);
  if (!bakeOver) return undefined;
  if (analysis.phase === "SUCCESSFUL") return waveDone(rollout, now);
  // Baked, analyses still measuring: wait for their measurements (each wakes the driver), up to
  // the analysis deadline, past which what is missing fails the wave.
  const deadline = analysisDeadline(wave)!;
  if (now >= deadline) return fail(rollout, `wave ${wave.name}: no verdict by the analysis deadline: ${analysis.reason}`, now);
  if (rollout.dueAt === deadline) return undefined;
  const next = copy(rollout);
  next.dueAt = deadline;
  next.reason = `wave ${wave.name}: baked, waiting for analysis: ${analysis.reason}`;
  return { next, move: [], restore: false, action: "wait-analysis" };
}

/** An inconclusive analysis: the rollout pauses with the reason; an operator resumes (a new bake) or aborts. */
function pauseInconclusive(rollout: StoredRollout, reason: string): Decision {
  const next = copy(rollout);
  next.state = RolloutState.PAUSED;
  next.dueAt = undefined;
  next.reason = reason;
  return { next, move: [], restore: false, action: "analysis-inconclusive" };
}

/**
 * The gate's decisions in a row for `rollout` from one look at its regions' statuses, at most
 * `max`: a wave with no bake ends and the next starts at once. The row ends after a step that
 * moves or restores regions, as the statuses no longer tell what those regions run.
 */
export function evaluateSteps(
  rollout: StoredRollout,
  statuses: ReadonlyMap<string, RegionStatus>,
  now: number,
  max: number,
  measurements: readonly StoredMeasurement[] = [],
): Decision[] {
  const steps: Decision[] = [];
  let at = rollout;
  while (steps.length < max) {
    const decision = evaluate(at, statuses, now, measurements);
    if (!decision) break;
    steps.push(decision);
    if (decision.move.length > 0 || decision.restore) break;
    at = decision.next;
  }
  return steps;
}

/** The current wave is done: the next starts (or waits for approval), or the rollout succeeded. */
export function waveDone(rollout: StoredRollout, now: number): Decision {
  const next = copy(rollout);
  next.waves[next.currentWave]!.endTime = now;
  if (next.currentWave === next.waves.length - 1) {
    next.state = RolloutState.SUCCEEDED;
    next.dueAt = undefined;
    next.reason = `every wave runs revision ${next.toRevision}`;
    return { next, move: [], restore: false, action: "succeeded" };
  }
  next.currentWave++;
  const wave = next.waves[next.currentWave]!;
  if (wave.approval) {
    next.state = RolloutState.WAITING_APPROVAL;
    next.dueAt = undefined;
    next.reason = `wave ${wave.name} waits for approval`;
    return { next, move: [], restore: false, action: "wait-approval" };
  }
  return { next, move: startWave(next, now).map((r) => r.regionId), restore: false, action: "start-wave" };
}

/** The waiting wave starts (approval or promotion). */
export function approve(rollout: StoredRollout, now: number): Decision {
  const next = copy(rollout);
  return { next, move: startWave(next, now).map((r) => r.regionId), restore: false, action: "start-wave" };
}

function moveBatch(rollout: StoredRollout, batch: WaveRegion[], now: number): Decision {
  const next = copy(rollout);
  const wave = next.waves[next.currentWave]!;
  const names = new Set(batch.map((r) => r.region));
  for (const r of wave.regions) if (names.has(r.region)) r.moved = true;
  wave.startTime = now;
  next.dueAt = now + wave.deadlineMs;
  next.reason = `wave ${wave.name}: moving ${[...names].join(", ")}`;
  return { next, move: batch.map((r) => r.regionId), restore: false, action: "move-batch" };
}

/** The rollout failed: back (ROLLBACK) or frozen (PAUSE). */
export function fail(rollout: StoredRollout, reason: string, _now: number): Decision {
  const next = copy(rollout);
  next.dueAt = undefined;
  next.reason = reason;
  if (rollout.onFailure === RolloutFailurePolicy.PAUSE) {
    next.state = RolloutState.FAILED;
    return { next, move: [], restore: false, action: "failed" };
  }
  next.state = RolloutState.ROLLED_BACK;
  return { next, move: [], restore: true, action: "rolled-back" };
}

function describe(status: RegionStatus | undefined): string {
  if (!status) return "no status";
  return `${Phase[status.phase]}${status.stale ? " (agent stale)" : ""}${status.reason ? `: ${status.reason}` : ""}`;
}

function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))}s`;
}
