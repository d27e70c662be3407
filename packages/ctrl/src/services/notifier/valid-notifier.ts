// A notifier as written by an operator, checked field by field (INVALID_ARGUMENT naming the
// field; nothing is written on any error).
import { NotificationEvent, NotifierFormat, type Notifier } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { SUBSCRIBABLE_EVENTS } from "@flotilla/store";
import { invalidArgument } from "../../errors.ts";
import { urlProblem, type AddressPolicy } from "../../notifications/address.ts";
import * as validate from "../../validate.ts";

const NAME_GLOB = /^[a-z0-9*]([-a-z0-9*]*[a-z0-9*])?$/;
const MAX_NAMESPACES = 100;

export function validNotifier(notifier: Notifier | undefined, policy: AddressPolicy): Notifier {
  if (!notifier) throw invalidArgument("notifier", "is required");
  validate.dnsLabel("notifier.name", notifier.name);
  const problem = urlProblem(notifier.url, policy);
  if (problem) throw invalidArgument("notifier.url", problem);
  if (notifier.format !== NotifierFormat.STANDARD_WEBHOOKS && notifier.format !== NotifierFormat.SLACK)
    throw invalidArgument("notifier.format", "must be NOTIFIER_FORMAT_STANDARD_WEBHOOKS or NOTIFIER_FORMAT_SLACK");
  const seen = new Set<NotificationEvent>();
  notifier.events.forEach((event, i) => {
    if (!SUBSCRIBABLE_EVENTS.includes(event))
      throw invalidArgument(`notifier.events[${i}]`, `${NotificationEvent[event] ?? event} is not an event a notifier subscribes to`);
    if (seen.has(event)) throw invalidArgument(`notifier.events[${i}]`, `${NotificationEvent[event]} is listed twice`);
    seen.add(event);
  });
  const namespaces = notifier.selector?.namespaces ?? [];
  if (namespaces.length > MAX_NAMESPACES) throw invalidArgument("notifier.selector.namespaces", `at most ${MAX_NAMESPACES}`);
  namespaces.forEach((glob, i) => {
    if (glob.length > 63 || !NAME_GLOB.test(glob))
      throw invalidArgument(
        `notifier.selector.namespaces[${i}]`,
        `${JSON.stringify(glob.slice(0, 80))} is not a namespace or a glob of namespaces (lowercase letters, digits, '-' and '*', at most 63)`,
      );
  });
  if (notifier.selector?.labels) validate.labelSelector(notifier.selector.labels, "notifier.selector.labels");
  return notifier;
}
