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

/** A field label's value in an object, as the kind's GetAttrs gives it. */
export type FieldGetter = (obj: KubeObject) => string;

/** The value at a field path as a field label has it ("" when unset). */
export function field(...path: string[]): FieldGetter {
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

/** Parses a fieldSelector query parameter: metadata.name, metadata.namespace and the kind's own field labels. */
export function parseFieldSelector(selector: string | undefined, fieldLabels: Readonly<Record<string, FieldGetter>> = {}): Selector {
  if (!selector?.trim()) return everything;
  const tests: Selector[] = [];
  for (const part of selector.split(",")) {
    const m = /^\s*([^!=\s]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(part);
    if (!m) throw badRequest(`invalid selector: '${selector}'; can't understand '${part}'`);
    const [, name, op, value] = m;
    const get = METADATA_FIELDS[name] ?? fieldLabels[name];
    if (!get) throw badRequest(`field label not supported: ${name}`);
    tests.push(op === "!=" ? (obj) => get(obj) !== value : (obj) => get(obj) === value);
  }
  return (obj) => tests.every((t) => t(obj));
}
