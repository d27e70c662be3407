// What a delivery sends: the body in the notifier's format and the Standard Webhooks headers
// (webhook-id: the event's id, the same on every attempt; webhook-timestamp: this attempt's
// time; webhook-signature: v1,<HMAC-SHA256 of "id.timestamp.body" under the signing secret>,
// made by the standardwebhooks package). Slack ignores the headers; they cost nothing.
import { NotifierFormat, type NotificationEvent } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { EVENT_TYPES } from "@flotilla/store";
import { Webhook } from "standardwebhooks";

export interface EventToSend {
  eventId: string;
  event: NotificationEvent;
  subject: string;
  /** The event's data as stored (JSON of an object). */
  data: string;
  eventTime: number;
}

/** The JSON body for `format`. */
export function body(format: NotifierFormat, e: EventToSend): string {
  const type = EVENT_TYPES[e.event] ?? "unknown";
  const data = JSON.parse(e.data) as Record<string, unknown>;
  if (format === NotifierFormat.SLACK) return JSON.stringify({ text: slackText(type, e.subject, data) });
  return JSON.stringify({ type, timestamp: new Date(e.eventTime).toISOString(), data: { subject: e.subject, ...data } });
}

function slackText(type: string, subject: string, data: Record<string, unknown>): string {
  const s = (key: string) => (typeof data[key] === "string" || typeof data[key] === "number" ? String(data[key]) : "");
  switch (type) {
    case "rollout.started":
      return `Rollout ${s("rollout")} of ${subject} started (revision ${s("fromRevision")} → ${s("toRevision")})`;
    case "rollout.wave_succeeded":
      return `Rollout ${s("rollout")} of ${subject}: wave ${s("wave")} succeeded`;
    case "rollout.waiting_approval":
      return `Rollout ${s("rollout")} of ${subject} waits for approval: ${s("reason")}`;
    case "rollout.paused":
      return `Rollout ${s("rollout")} of ${subject} paused: ${s("reason")}`;
    case "rollout.failed":
      return `Rollout ${s("rollout")} of ${subject} failed: ${s("reason")}`;
    case "rollout.rolled_back":
      return `Rollout ${s("rollout")} of ${subject} rolled back to revision ${s("fromRevision")}: ${s("reason")}`;
    case "rollout.succeeded":
      return `Rollout ${s("rollout")} of ${subject} succeeded: revision ${s("toRevision")} everywhere`;
    case "deployment.failed":
      return `Deployment ${subject} FAILED in region ${s("region")}: ${s("reason")}`;
    case "agent.lost":
      return `The agent of region ${subject} stopped reporting (last seen ${s("lastSeen")})`;
    default:
      return `Flotilla ${type}: ${subject}`;
  }
}

/** The request's headers, signed for this attempt. */
export function signedHeaders(secret: string, eventId: string, payload: string, now: Date): Record<string, string> {
  const timestamp = Math.floor(now.getTime() / 1000);
  const signature = new Webhook(secret).sign(eventId, now, payload);
  return {
    "content-type": "application/json",
    "user-agent": "flotilla-notifier",
    "webhook-id": eventId,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": signature,
  };
}
