// The operators' controls over a rollout (ARCHITECTURE §9): pause, resume, approve, promote,
// abort — edges of the state machine in gate.ts's header, marked [control] there, taken by a
// person instead of the driver. Each checks the state it applies to (FAILED_PRECONDITION
// otherwise) and decides like the gate, as a Decision; RolloutService stores it with the same
// compare-and-set as the driver's, the operator as its actor.
import { RolloutFailurePolicy, RolloutState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { ACTIVE_ROLLOUT_STATES, StoreError, type StoredRollout } from "@flotilla/store";
import { approve, fail, waveDone, type Decision } from "./gate.ts";

/** The operators' controls, as RolloutService names them (PauseRollout, ResumeRollout, …). */
export type ControlName = "pause" | "resume" | "approve" | "promote" | "abort";

/** A control's decision on `rollout` at `now`; throws FAILED_PRECONDITION when the control does not apply to its state. */
type Control = (rollout: StoredRollout, now: number) => Decision;

const refuse = (rollout: StoredRollout, what: string): never => {
  throw new StoreError("failed_precondition", `rollout ${rollout.id} is ${RolloutState[rollout.state]}: ${what}`, "id");
};

/** The controls: each checks the state it applies to, then decides. */
export const CONTROLS: Record<ControlName, Control> = {
  pause(rollout) {
    if (rollout.state !== RolloutState.PROGRESSING && rollout.state !== RolloutState.WAITING_APPROVAL)
      refuse(rollout, "only a progressing or waiting rollout pauses");
    const next = structuredClone(rollout);
    next.state = RolloutState.PAUSED;
    next.dueAt = undefined;
    next.reason = `paused at wave ${rollout.waves[rollout.currentWave]!.name}`;
    return { next, move: [], restore: false, action: "paused" };
  },
  resume(rollout, now) {
    if (rollout.state !== RolloutState.PAUSED && rollout.state !== RolloutState.FAILED) refuse(rollout, "only a paused or failed rollout resumes");
    const next = structuredClone(rollout);
    const wave = next.waves[next.currentWave]!;
    if (wave.startTime === undefined) {
      // Paused while it waited for approval: it waits again.
      next.state = wave.approval ? RolloutState.WAITING_APPROVAL : RolloutState.PROGRESSING;
      if (!wave.approval) return approve(next, now);
    } else {
      next.state = RolloutState.PROGRESSING;
      wave.startTime = now;
      wave.runningSince = undefined;
      next.dueAt = now + wave.deadlineMs;
    }
    next.reason = `resumed at wave ${wave.name}`;
    return { next, move: [], restore: false, action: "resumed" };
  },
  approve(rollout, now) {
    if (rollout.state !== RolloutState.WAITING_APPROVAL) refuse(rollout, "only a rollout waiting for approval is approved");
    return approve(rollout, now);
  },
  promote(rollout, now) {
    if (rollout.state === RolloutState.WAITING_APPROVAL) return approve(rollout, now);
    const wave = rollout.waves[rollout.currentWave]!;
    if (rollout.state !== RolloutState.PROGRESSING || wave.runningSince === undefined) {
      refuse(rollout, "promote skips a bake or an approval; this wave's regions are not all RUNNING yet");
    }
    return waveDone(rollout, now);
  },
  abort(rollout, now) {
    if (!ACTIVE_ROLLOUT_STATES.includes(rollout.state)) refuse(rollout, "only an active or failed rollout is aborted");
    const decision = fail({ ...rollout, onFailure: RolloutFailurePolicy.ROLLBACK }, `aborted at wave ${rollout.waves[rollout.currentWave]!.name}`, now);
    decision.next.state = RolloutState.ABORTED;
    decision.action = "aborted";
    return decision;
  },
};
