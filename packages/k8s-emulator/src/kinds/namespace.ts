// core/v1 Namespace: pkg/registry/core/namespace/strategy.go (cluster-scoped, status
// subresource, the `kubernetes` finalizer, phase Active) and the NamespaceDefaultLabelName
// admission; its deletion lifecycle is the registry's (registry.ts, as namespace storage.go)
// and the namespace controller's (namespaces.ts). Columns from printNamespace.
import { objectField, setDefault } from "../defaults.ts";
import { CORE, META, keyedList, obj, ref, resource, str, strList } from "../openapi-schemas.ts";
import { field } from "../selectors.ts";
import { AGE, NAME, age, statusOf } from "../table.ts";
import { isObject } from "../util.ts";
import { defineKind } from "./strategy.ts";

export const namespaces = defineKind({
  group: "",
  version: "v1",
  kind: "Namespace",
  resource: "namespaces",
  namespaced: false,
  shortNames: ["ns"],
  nameRule: "label",
  statusSubresource: true,
  noCollectionDelete: true,
  definitions: {
    [`${CORE}.Namespace`]: resource("Namespace provides a scope for Names.", `${CORE}.NamespaceSpec`, `${CORE}.NamespaceStatus`),
    [`${CORE}.NamespaceSpec`]: obj("NamespaceSpec describes the attributes on a Namespace.", {
      finalizers: strList("An opaque list of values that must be empty to permanently remove the object from storage."),
    }),
    [`${CORE}.NamespaceStatus`]: obj("NamespaceStatus is information about the current status of a Namespace.", {
      phase: str("The current lifecycle phase of the namespace: Active or Terminating."),
      conditions: keyedList(`${CORE}.NamespaceCondition`, "type", "The latest available observations of a namespace's current state."),
    }),
    [`${CORE}.NamespaceCondition`]: obj(
      "NamespaceCondition contains details about state of namespace.",
      {
        type: str("Type of namespace controller condition."),
        status: str("Status of the condition, one of True, False, Unknown."),
        reason: str("Unique, one-word, CamelCase reason for the condition's last transition."),
        message: str("Human-readable message indicating details about last transition."),
        lastTransitionTime: ref(`${META}.Time`, "Last time the condition transitioned."),
      },
      ["type", "status"],
    ),
  },
  defaults(ns) {
    setDefault(objectField(ns, "spec"), "finalizers", ["kubernetes"]);
    if (!isObject(ns.status)) ns.status = { phase: "Active" };
    // Set by the NamespaceDefaultLabelName admission since 1.21.
    ns.metadata.labels = { ...(ns.metadata.labels ?? {}), "kubernetes.io/metadata.name": ns.metadata.name ?? "" };
  },
  printer: {
    columns: [NAME, { name: "Status", type: "string", description: "The status of the namespace", priority: 0 }, AGE],
    cells: (o, now) => [o.metadata.name, statusOf(o).phase ?? "Active", age(o, now)],
  },
  fieldLabels: { "status.phase": field("status", "phase") },
});
