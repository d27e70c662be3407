// core/v1 Namespace: pkg/registry/core/namespace/strategy.go (cluster-scoped, status
// subresource, the `kubernetes` finalizer, phase Active) and the NamespaceDefaultLabelName
// admission; its DELETE as its storage.go and the NamespaceLifecycle admission, the rest of its
// deletion the namespace controller's (namespaces.ts). Columns from printNamespace.
import { objectField, setDefault } from "../defaults.ts";
import { conflict, forbidden, subjectOf } from "../errors.ts";
import { CORE, META, keyedList, obj, ref, resource, str, strList } from "../openapi-schemas.ts";
import { field } from "../selectors.ts";
import { AGE, NAME, age, statusOf } from "../table.ts";
import { clone, isObject, nowRfc3339 } from "../util.ts";
import { defineKind } from "./strategy.ts";

/** Namespaces the NamespaceLifecycle admission plugin refuses to delete. */
const IMMORTAL_NAMESPACES = ["default", "kube-public", "kube-system"];

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
  /**
   * pkg/registry/core/namespace/storage/storage.go: the first DELETE sets deletionTimestamp and
   * phase Terminating and returns the namespace; the namespace controller then empties it and
   * removes the `kubernetes` finalizer, and the namespace goes away. A DELETE while finalizers
   * remain is a 409.
   */
  delete(ns, dryRun, { store }) {
    const name = ns.metadata.name ?? "";
    if (IMMORTAL_NAMESPACES.includes(name)) throw forbidden(subjectOf(namespaces, name), "this namespace may not be deleted");
    if (!ns.metadata.deletionTimestamp) {
      const terminating = clone(ns);
      terminating.metadata.deletionTimestamp = nowRfc3339();
      terminating.status = { ...(isObject(ns.status) ? ns.status : {}), phase: "Terminating" };
      return dryRun ? terminating : store.write(namespaces, terminating);
    }
    const finalizers = isObject(ns.spec) && Array.isArray(ns.spec.finalizers) ? ns.spec.finalizers : [];
    if (finalizers.length > 0) {
      throw conflict(
        subjectOf(namespaces, name),
        "The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system.",
      );
    }
    if (!dryRun) store.remove(namespaces, undefined, name);
    return ns;
  },
  /** A namespace removed at once takes its content with it. */
  beforeRemove(name, storage) {
    storage.removeContent(name);
  },
});
