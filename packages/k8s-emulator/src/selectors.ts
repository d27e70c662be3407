// Label and field selectors with the grammar and semantics of
// k8s.io/apimachinery/pkg/labels and pkg/fields.
import { badRequest } from "./errors.ts";
import { valueAt } from "./fields.ts";
import type { KubeObject } from "./util.ts";

type Op = "exists" | "!" | "=" | "!=" | "in" | "notin" | "gt" | "lt";

interface Requirement {
  key: string;
  op: Op;
  values: string[];
}

export type Selector = (obj: KubeObject) => boolean;

const everything: Selector = () => true;

// Qualified name with optional DNS prefix, as accepted for label keys.
const KEY_RE = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE_RE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function tokenize(input: string): string[] {
  const tokens: string[] = [];
  let i = 0;
  while (i < input.length) {
    const c = input[i];
    if (c === " " || c === "\t") {
      i++;
    } else if (c === "!" || c === "=") {
      const two = input.slice(i, i + 2);
      if (two === "!=" || two === "==") {
        tokens.push(two);
        i += 2;
      } else {
        tokens.push(c);
        i++;
      }
    } else if ("(),<>".includes(c)) {
      tokens.push(c);
      i++;
    } else {
      let j = i;
      while (j < input.length && !" \t!=(),<>".includes(input[j])) j++;
      tokens.push(input.slice(i, j));
      i = j;
    }
  }
  return tokens;
}

function parseError(selector: string, detail: string): Error {
  return badRequest(`unable to parse requirement: ${detail} (selector: ${JSON.stringify(selector)})`);
}

function isWord(tok: string | undefined): tok is string {
  return tok !== undefined && !["!", "=", "==", "!=", "(", ")", ",", "<", ">"].includes(tok);
}

function parseRequirements(selector: string): Requirement[] {
  const tokens = tokenize(selector);
  const reqs: Requirement[] = [];
  let pos = 0;
  const peek = () => tokens[pos];
  const next = () => tokens[pos++];
  const checkValue = (v: string) => {
    if (v.length > 63 || !VALUE_RE.test(v)) throw parseError(selector, `invalid label value: ${JSON.stringify(v)}`);
    return v;
  };
  while (pos < tokens.length) {
    let negated = false;
    if (peek() === "!") {
      negated = true;
      next();
    }
    const key = next();
    if (!isWord(key)) throw parseError(selector, `found '${key ?? ""}', expected: identifier`);
    if (!KEY_RE.test(key) || key.length > 316) throw parseError(selector, `invalid label key ${JSON.stringify(key)}`);
    const opTok = peek();
    if (negated) {
      if (opTok !== undefined && opTok !== ",") throw parseError(selector, `found '${opTok}', expected: ',' or 'end of string'`);
      reqs.push({ key, op: "!", values: [] });
    } else if (opTok === undefined || opTok === ",") {
      reqs.push({ key, op: "exists", values: [] });
    } else if (opTok === "=" || opTok === "==" || opTok === "!=") {
      next();
      // An empty value is allowed: `a=` selects a label whose value is "".
      const value = isWord(peek()) ? next() : "";
      reqs.push({ key, op: opTok === "!=" ? "!=" : "=", values: [checkValue(value)] });
    } else if (opTok === ">" || opTok === "<") {
      next();
      const value = next();
      if (!isWord(value) || !/^-?\d+$/.test(value)) throw parseError(selector, `for 'Gt', 'Lt' operators, the value must be an integer`);
      reqs.push({ key, op: opTok === ">" ? "gt" : "lt", values: [value] });
    } else if (opTok === "in" || opTok === "notin") {
      next();
      if (next() !== "(") throw parseError(selector, `found '${tokens[pos - 1] ?? ""}', expected: '('`);
      const values: string[] = [];
      for (;;) {
        const tok = peek();
        if (tok === ")") {
          next();
          break;
        }
        if (tok === ",") {
          next();
          // `in (a,,b)` or a leading comma means an empty value, as upstream.
          values.push("");
          continue;
        }
        if (!isWord(tok)) throw parseError(selector, `found '${tok ?? ""}', expected: ',', ')' or identifier`);
        values.push(checkValue(next()));
        if (peek() === ",") next();
      }
      if (values.length === 0) throw parseError(selector, `for 'in', 'notin' operators, values set can't be empty`);
      reqs.push({ key, op: opTok, values });
    } else {
      throw parseError(selector, `found '${opTok}', expected: in, notin, =, ==, !=, gt, lt`);
    }
    const sep = next();
    if (sep !== undefined && sep !== ",") throw parseError(selector, `found '${sep}', expected: ',' or 'end of string'`);
    if (sep === "," && pos >= tokens.length) throw parseError(selector, `found '', expected: identifier`);
  }
  return reqs;
}

function matches(req: Requirement, labels: Record<string, string>): boolean {
  const has = Object.hasOwn(labels, req.key);
  const value = labels[req.key];
  switch (req.op) {
    case "exists":
      return has;
    case "!":
      return !has;
    case "=":
      return has && value === req.values[0];
    case "!=":
      return !has || value !== req.values[0];
    case "in":
      return has && req.values.includes(value);
    case "notin":
      return !has || !req.values.includes(value);
    case "gt":
    case "lt": {
      if (!has || !/^-?\d+$/.test(value)) return false;
      const n = Number(value);
      const bound = Number(req.values[0]);
      return req.op === "gt" ? n > bound : n < bound;
    }
  }
}

/** Parses a labelSelector query parameter; throws a 400 ApiError on bad syntax. */
export function parseLabelSelector(selector: string | undefined): Selector {
  if (!selector?.trim()) return everything;
  const reqs = parseRequirements(selector);
  return (obj) => {
    const labels = obj.metadata.labels ?? {};
    return reqs.every((r) => matches(r, labels));
  };
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

/** A label selector from a LabelSelector object (matchLabels + matchExpressions), as in Deployment.spec.selector. */
export function labelSelectorFromObject(sel: {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}): (labels: Record<string, string>) => boolean {
  const reqs: Requirement[] = [];
  for (const [key, value] of Object.entries(sel.matchLabels ?? {})) reqs.push({ key, op: "=", values: [value] });
  for (const e of sel.matchExpressions ?? []) {
    const op: Op = e.operator === "In" ? "in" : e.operator === "NotIn" ? "notin" : e.operator === "Exists" ? "exists" : "!";
    reqs.push({ key: e.key, op, values: e.values ?? [] });
  }
  return (labels) => reqs.every((r) => matches(r, labels));
}
