// A rollout's vocabulary, defined once for every part that needs it: ctrl's state machine and
// driver, the store's queries, the CLI and the web console (which imports this file alone: it
// depends on the generated protocol only, nothing of the database).
import { RolloutState } from "@flotilla/proto/ctrl/v1/resources_pb.js";

/** States in which a rollout still holds regions back or may move them (FAILED: frozen, an operator decides). */
export const ACTIVE_ROLLOUT_STATES: readonly RolloutState[] = [
  RolloutState.PROGRESSING,
  RolloutState.WAITING_APPROVAL,
  RolloutState.PAUSED,
  RolloutState.FAILED,
];

/**
 * How each transition of a rollout is recorded (rollout_transitions.action), every one there is:
 * the state machine's in ctrl/src/rollouts (the gate's, the operators' controls, a change's start
 * and supersede), each edge of gate.ts's header naming its action.
 */
export const ROLLOUT_ACTIONS = [
  "start-wave",
  "wait-approval",
  "move-batch",
  "bake",
  "bake-reset",
  "wait-analysis",
  "analysis-inconclusive",
  "succeeded",
  "failed",
  "rolled-back",
  "paused",
  "resumed",
  "aborted",
  "superseded",
] as const;
export type RolloutAction = (typeof ROLLOUT_ACTIONS)[number];
