// flotilla get notifiers | get deliveries | notifier test NAME | notifier rotate-secret NAME.
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { DeliveryState, type Delivery } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import type { Clients } from "../client.ts";
import { ExitError, EXIT, UsageError } from "../errors.ts";
import { all, API_VERSION, eventName, notifierSpec } from "../kinds.ts";
import { age, isoTime, structured, table, type OutputFormat } from "../output.ts";

type Out = (text: string) => void;

export async function getNotifiers(clients: Clients, name: string | undefined, format: OutputFormat, out: Out): Promise<void> {
  const notifiers =
    name !== undefined
      ? [(await clients.notifiers.getNotifier({ name })).notifier!]
      : await all(async (pageToken) => {
          const r = await clients.notifiers.listNotifiers({ pageSize: 1000, pageToken });
          return { items: r.notifiers, next: r.nextPageToken };
        });
  if (format === "json" || format === "yaml") {
    const docs = notifiers.map((n) => ({
      apiVersion: API_VERSION,
      kind: "Notifier",
      metadata: { name: n.name, createTime: isoTime(n.createTime), updateTime: isoTime(n.updateTime), secretTime: isoTime(n.secretTime) },
      spec: notifierSpec(n),
    }));
    out(structured(name !== undefined ? docs[0] : { apiVersion: API_VERSION, kind: "List", items: docs }, format));
    return;
  }
  out(
    table(
      ["NAME", "FORMAT", "EVENTS", "SELECTOR", "SECRET-AGE", "AGE"],
      notifiers.map((n) => {
        const spec = notifierSpec(n);
        const selector = [
          ...(n.selector?.namespaces.length ? [`namespaces: ${n.selector.namespaces.join(",")}`] : []),
          ...(n.selector?.labels ? [n.selector.labels] : []),
        ];
        return [
          n.name,
          String(spec.format),
          n.events.length ? n.events.map(eventName).join(",") : "<all>",
          selector.join("; ") || "<all>",
          age(n.secretTime),
          age(n.createTime),
        ];
      }),
    ),
  );
}

const STATES: Record<string, DeliveryState> = { pending: DeliveryState.PENDING, delivered: DeliveryState.DELIVERED, dead: DeliveryState.DEAD };

function stateName(state: DeliveryState): string {
  return DeliveryState[state] ?? String(state);
}

/** Recent deliveries, newest first: `name` a notifier's only; `state` pending, delivered or dead. */
export async function getDeliveries(
  clients: Clients,
  name: string | undefined,
  state: string | undefined,
  limit: number,
  format: OutputFormat,
  out: Out,
): Promise<void> {
  if (state !== undefined && !(state.toLowerCase() in STATES)) throw new UsageError(`--state: one of ${Object.keys(STATES).join(", ")}`);
  const r = await clients.notifiers.listDeliveries({
    notifier: name ?? "",
    state: state ? STATES[state.toLowerCase()] : DeliveryState.UNSPECIFIED,
    pageSize: limit,
  });
  const deliveries = r.deliveries;
  if (format === "json" || format === "yaml") {
    out(structured(deliveries.map(deliveryJson), format));
    return;
  }
  out(
    table(
      ["ID", "NOTIFIER", "EVENT", "SUBJECT", "STATE", "ATTEMPTS", "LAST", "NEXT", "AGE"],
      deliveries.map((d) => [
        String(d.id),
        d.notifier,
        eventName(d.event),
        d.subject,
        stateName(d.state),
        String(d.attempts),
        d.lastError || (d.lastStatusCode ? `HTTP ${d.lastStatusCode}` : "-"),
        d.state === DeliveryState.PENDING && d.nextAttemptTime ? inTime(timestampMs(d.nextAttemptTime)) : "-",
        age(d.createTime),
      ]),
    ),
  );
}

function inTime(at: number): string {
  const s = Math.max(0, Math.round((at - Date.now()) / 1000));
  return s === 0 ? "now" : `in ${s}s`;
}

function deliveryJson(d: Delivery): object {
  return {
    id: Number(d.id),
    notifier: d.notifier,
    eventId: d.eventId,
    event: eventName(d.event),
    subject: d.subject,
    state: stateName(d.state),
    attempts: d.attempts,
    lastStatusCode: d.lastStatusCode,
    lastError: d.lastError,
    nextAttemptTime: d.state === DeliveryState.PENDING ? isoTime(d.nextAttemptTime) : null,
    createTime: isoTime(d.createTime),
    updateTime: isoTime(d.updateTime),
  };
}

/**
 * Queues a notifier.test event and, with `wait`, follows its delivery until it is DELIVERED
 * (exit 0) or fails an attempt (exit 1, with the receiver's answer) or the timeout (exit 2).
 */
export async function testNotifier(clients: Clients, name: string, options: { wait: boolean; timeoutMs: number }, out: Out): Promise<void> {
  const { delivery } = await clients.notifiers.testNotifier({ name });
  out(`delivery ${delivery!.id} (${delivery!.eventId}) queued to notifier/${name}`);
  if (!options.wait) return;
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    const found = (await clients.notifiers.listDeliveries({ notifier: name, pageSize: 50 })).deliveries.find((d) => d.id === delivery!.id);
    if (found?.state === DeliveryState.DELIVERED) {
      out(`delivered (HTTP ${found.lastStatusCode}, attempt ${found.attempts})`);
      return;
    }
    if (found && found.attempts > 0)
      throw new ExitError(
        `error: attempt ${found.attempts} failed: ${found.lastError}${found.state === DeliveryState.PENDING ? " (ctrl retries it)" : ""}`,
        EXIT.failed,
      );
    if (Date.now() > deadline) throw new ExitError(`error: not delivered within ${options.timeoutMs / 1000}s`, EXIT.timeout);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

export async function rotateSecret(clients: Clients, name: string, out: Out): Promise<void> {
  const r = await clients.notifiers.rotateNotifierSecret({ name });
  out(`notifier/${name}: new signing secret (shown once, keep it for your receiver): ${r.signingSecret}`);
}
