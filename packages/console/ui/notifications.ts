// The Notifications view: the notifiers, and their recent deliveries with failures first in
// sight — a delivery being retried (its last error, its next attempt) or dead-lettered.
// Reading needs a fleet-wide viewer; a member of projects only is told so.
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { DeliveryState, NotifierFormat, type Delivery, type Notifier } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { EVENT_TYPES } from "@flotilla/store/notification-events";
import { api, problem } from "./api.ts";
import { msOf, Time } from "./format.ts";

const failing = (d: Delivery) => d.state === DeliveryState.DEAD || (d.state === DeliveryState.PENDING && d.attempts > 0);

export function NotificationsView() {
  const [notifiers, setNotifiers] = useState<Notifier[]>([]);
  const [deliveries, setDeliveries] = useState<Delivery[]>([]);
  const [onlyFailures, setOnlyFailures] = useState(false);
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    const load = async () => {
      try {
        const [n, d] = await Promise.all([api.notifiers.listNotifiers({ pageSize: 1000 }), api.notifiers.listDeliveries({ pageSize: 200 })]);
        setNotifiers(n.notifiers);
        setDeliveries(d.deliveries);
        setError(undefined);
      } catch (e) {
        setError(problem(e));
      }
    };
    void load();
    const timer = setInterval(load, 5000);
    return () => clearInterval(timer);
  }, []);
  const shown = onlyFailures ? deliveries.filter(failing) : deliveries;
  const failures = deliveries.filter(failing).length;
  return html`<section aria-labelledby="notifications-title"><h2 id="notifications-title">Notifications</h2>${error && html`<p role="alert" class="error">${error}</p>`}
    <h3>Notifiers</h3>
    <table><thead><tr><th scope="col">Name</th><th scope="col">Format</th><th scope="col">Events</th><th scope="col">Selector</th><th scope="col">Secret made</th></tr></thead>
    <tbody>${notifiers.map(
      (n) =>
        html`<tr><th scope="row">${n.name}</th><td>${n.format === NotifierFormat.SLACK ? "slack" : "standard-webhooks"}</td><td>${n.events.length ? n.events.map((e) => EVENT_TYPES[e] ?? String(e)).join(", ") : "every event"}</td><td>${[...(n.selector?.namespaces ?? []), n.selector?.labels ?? ""].filter(Boolean).join("; ") || "every deployment"}</td><td><${Time} ms=${msOf(n.secretTime)} /></td></tr>`,
    )}</tbody></table>
    <h3>Recent deliveries</h3>
    <p><label><input type="checkbox" checked=${onlyFailures} onChange=${(e: Event) => setOnlyFailures((e.target as HTMLInputElement).checked)} /> Failures only (${failures})</label></p>
    <table><thead><tr><th scope="col">Delivery</th><th scope="col">Notifier</th><th scope="col">Event</th><th scope="col">Subject</th><th scope="col">State</th><th scope="col">Attempts</th><th scope="col">Last answer</th><th scope="col">Next attempt</th><th scope="col">Created</th></tr></thead>
    <tbody>${shown.map(
      (d) =>
        html`<tr data-delivery=${String(d.id)} class=${failing(d) ? "failing" : undefined}><th scope="row">${String(d.id)}</th><td>${d.notifier}</td><td>${EVENT_TYPES[d.event] ?? String(d.event)}</td><td>${d.subject}</td><td>${DeliveryState[d.state] ?? "?"}</td><td>${d.attempts}</td><td>${d.lastError || (d.lastStatusCode ? `HTTP ${d.lastStatusCode}` : "-")}</td><td>${d.state === DeliveryState.PENDING ? html`<${Time} ms=${msOf(d.nextAttemptTime)} />` : "-"}</td><td><${Time} ms=${msOf(d.createTime)} /></td></tr>`,
    )}</tbody></table></section>`;
}
