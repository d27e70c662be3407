// core/v1 Event, recorded by the rollout controller and the kubelets (workloads.ts):
// pkg/registry/core/event/strategy.go (no status subresource, ToSelectableFields), columns
// from printEvent.
import { CORE, META, TYPE_META, int, obj, openObject, ref, str } from "../openapi-schemas.ts";
import { field } from "../selectors.ts";
import { humanDuration, num } from "../table.ts";
import type { JsonObject } from "../util.ts";
import { defineKind } from "./strategy.ts";

export const events = defineKind({
  group: "",
  version: "v1",
  kind: "Event",
  resource: "events",
  namespaced: true,
  shortNames: ["ev"],
  definitions: {
    [`${CORE}.Event`]: obj("Event is a report of an event somewhere in the cluster.", {
      ...TYPE_META,
      involvedObject: ref(`${CORE}.ObjectReference`, "The object that this event is about."),
      reason: str("A short, machine understandable string that gives the reason for the transition into the object's current status."),
      message: str("A human-readable description of the status of this operation."),
      source: openObject("The component reporting this event."),
      firstTimestamp: ref(`${META}.Time`, "The time at which the event was first recorded."),
      lastTimestamp: ref(`${META}.Time`, "The time at which the most recent occurrence of this event was recorded."),
      count: int("The number of times this event has occurred."),
      type: str("Type of this event (Normal, Warning)."),
      reportingComponent: str("Name of the controller that emitted this Event."),
      reportingInstance: str("ID of the controller instance."),
    }),
  },
  printer: {
    columns: [
      { name: "Last Seen", type: "string", description: "The time at which the most recent occurrence of this event was recorded.", priority: 0 },
      { name: "Type", type: "string", description: "Type of this event (Normal, Warning).", priority: 0 },
      { name: "Reason", type: "string", description: "A short, machine understandable reason.", priority: 0 },
      { name: "Object", type: "string", description: "The object that this event is about.", priority: 0 },
      { name: "Subobject", type: "string", description: "The part of the object, e.g. a container.", priority: 1 },
      { name: "Source", type: "string", description: "The component reporting this event.", priority: 1 },
      { name: "Message", type: "string", description: "A human-readable description of the status of this operation.", priority: 0 },
      { name: "First Seen", type: "string", description: "The time at which the event was first recorded.", priority: 1 },
      { name: "Count", type: "string", description: "The number of times this event has occurred.", priority: 1 },
      { name: "Name", type: "string", format: "name", description: "Name must be unique within a namespace.", priority: 1 },
    ],
    cells(o, now) {
      const involved = (o.involvedObject ?? {}) as JsonObject;
      const source = (o.source ?? {}) as JsonObject;
      const since = (t: unknown) => (typeof t === "string" && t !== "" ? humanDuration(now - Date.parse(t)) : "<unknown>");
      return [
        since(o.lastTimestamp),
        o.type ?? "",
        o.reason ?? "",
        `${String(involved.kind ?? "").toLowerCase()}/${String(involved.name ?? "")}`,
        involved.fieldPath ?? "",
        [source.component, source.host].filter((x) => typeof x === "string" && x !== "").join(", "),
        o.message ?? "",
        since(o.firstTimestamp),
        // printEvent: an int64; 0 (a singleton event of the events.k8s.io API) shows as 1.
        num(o.count) || 1,
        o.metadata.name,
      ];
    },
  },
  fieldLabels: {
    ...Object.fromEntries(
      ["kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"].map((k) => [`involvedObject.${k}`, field("involvedObject", k)]),
    ),
    reason: field("reason"),
    reportingComponent: field("reportingComponent"),
    source: field("source", "component"),
    type: field("type"),
  },
});
