// Label and field selectors with the grammar and semantics of
// k8s.io/apimachinery/pkg/labels (@flotilla/labels) and pkg/fields.
import { LabelSelectorError, parseLabelSelector as parseLabels, type LabelMatcher } from "@flotilla/labels";
import { badRequest } from "./errors.ts";
import { valueAt } from "./fields.ts";
import type { KubeObject } from "./util.ts";

export type Selector = (obj: KubeObject) => boolean;

const everything: Selector = () => true;

/** Parses a labelSelector query parameter; throws a 400 ApiError on bad syntax. */
export function parseLabelSelector(selector: string | undefined): Selector {
  if (!selector?.trim()) return everything;
  let match: LabelMatcher;
  try {
    match = parseLabels(selector);
  } catch (error) {
    throw error instanceof LabelSelectorError ? badRequest(error.message) : error;
  }
  return (obj) => match(obj.metadata.labels ?? {});
}

type FieldGetter = (obj: KubeObject) => string;

/** The value at a field path as a field label has it ("" when unset). */
function field(...path: string[]): FieldGetter {
  const at = path.map((k) => `f:${k}`);
  return (obj) => {
    const { value } = valueAt(obj, at);
    return value === undefined || value === null ? "" : String(value);
  };
}

const METADATA_FIELDS: Record<string, FieldGetter> = {
  "metadata.name": field("metadata", "name"),
  "metadata.namespace": field("metadata", "namespace"),
};

/**
 * The field labels each kind supports beyond metadata.name and metadata.namespace, as its
 * registry strategy's GetAttrs/field label conversion does (pkg/registry/core/event/strategy.go
 * ToSelectableFields, core/pod/strategy.go PodToSelectableFields, apps/replicaset/strategy.go).
 */
const KIND_FIELDS: Record<string, Record<string, FieldGetter>> = {
  Event: {
    ...Object.fromEntries(
      ["kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"].map((k) => [`involvedObject.${k}`, field("involvedObject", k)]),
    ),
    reason: field("reason"),
    reportingComponent: field("reportingComponent"),
    source: field("source", "component"),
    type: field("type"),
  },
  Pod: {
    "spec.nodeName": field("spec", "nodeName"),
    "spec.restartPolicy": field("spec", "restartPolicy"),
    "spec.schedulerName": field("spec", "schedulerName"),
    "spec.serviceAccountName": field("spec", "serviceAccountName"),
    "status.phase": field("status", "phase"),
    "status.podIP": field("status", "podIP"),
  },
  ReplicaSet: { "status.replicas": field("status", "replicas") },
  Namespace: { "status.phase": field("status", "phase") },
  Secret: { type: field("type") },
};

/** Parses a fieldSelector query parameter: metadata.name, metadata.namespace and the kind's own field labels. */
export function parseFieldSelector(selector: string | undefined, kind = ""): Selector {
  if (!selector?.trim()) return everything;
  const tests: Selector[] = [];
  for (const part of selector.split(",")) {
    const m = /^\s*([^!=\s]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(part);
    if (!m) throw badRequest(`invalid selector: '${selector}'; can't understand '${part}'`);
    const [, name, op, value] = m;
    const get = METADATA_FIELDS[name] ?? KIND_FIELDS[kind]?.[name];
    if (!get) throw badRequest(`field label not supported: ${name}`);
    tests.push(op === "!=" ? (obj) => get(obj) !== value : (obj) => get(obj) === value);
  }
  return (obj) => tests.every((t) => t(obj));
}
