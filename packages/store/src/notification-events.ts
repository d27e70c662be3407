// The notification events' names: the "type" of a delivery's body and of a Notifier manifest's
// events, in one table that ctrl, the CLI and the console read. It imports only the protocol, so
// a browser bundle takes it (@flotilla/store/notification-events).
import { NotificationEvent } from "@flotilla/proto/ctrl/v1/notifier_pb.js";

/** Every event a notifier may subscribe to (an empty list in a notifier means these). */
export const SUBSCRIBABLE_EVENTS: readonly NotificationEvent[] = [
  NotificationEvent.ROLLOUT_STARTED,
  NotificationEvent.ROLLOUT_WAVE_SUCCEEDED,
  NotificationEvent.ROLLOUT_WAITING_APPROVAL,
  NotificationEvent.ROLLOUT_PAUSED,
  NotificationEvent.ROLLOUT_FAILED,
  NotificationEvent.ROLLOUT_ROLLED_BACK,
  NotificationEvent.ROLLOUT_SUCCEEDED,
  NotificationEvent.DEPLOYMENT_FAILED,
  NotificationEvent.AGENT_LOST,
];

/** The body's "type" of each event. */
export const EVENT_TYPES: Readonly<Record<number, string>> = {
  [NotificationEvent.ROLLOUT_STARTED]: "rollout.started",
  [NotificationEvent.ROLLOUT_WAVE_SUCCEEDED]: "rollout.wave_succeeded",
  [NotificationEvent.ROLLOUT_WAITING_APPROVAL]: "rollout.waiting_approval",
  [NotificationEvent.ROLLOUT_PAUSED]: "rollout.paused",
  [NotificationEvent.ROLLOUT_FAILED]: "rollout.failed",
  [NotificationEvent.ROLLOUT_ROLLED_BACK]: "rollout.rolled_back",
  [NotificationEvent.ROLLOUT_SUCCEEDED]: "rollout.succeeded",
  [NotificationEvent.DEPLOYMENT_FAILED]: "deployment.failed",
  [NotificationEvent.AGENT_LOST]: "agent.lost",
  [NotificationEvent.TEST]: "notifier.test",
};
