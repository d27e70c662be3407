// Label selectors with the grammar and semantics of k8s.io/apimachinery/pkg/labels:
//
//   selector    = [requirement {"," requirement}]        every requirement must hold
//   requirement = key                                    the label is set (any value)
//               | "!" key                                the label is not set
//               | key ("=" | "==" | "!=") value          "!=" also holds when the label is not set
//               | key ("in" | "notin") "(" values ")"    "notin" also holds when the label is not set
//               | key (">" | "<") integer              the label's value is an integer above/below
//
// An empty selector selects everything.
import { labelKeyProblem, labelValueProblem } from "./syntax.ts";

export type Labels = Readonly<Record<string, string>>;

/** Whether a set of labels is selected. */
export type LabelMatcher = (labels: Labels) => boolean;

/** A selector that does not parse; the message says where, as the Kubernetes API server does. */
export class LabelSelectorError extends Error {
  override readonly name = "LabelSelectorError";
}

type Operator = "exists" | "!" | "=" | "!=" | "in" | "notin" | "gt" | "lt";

interface Requirement {
  key: string;
  op: Operator;
  values: string[];
}

const SYMBOLS = ["!", "=", "==", "!=", "(", ")", ",", "<", ">"];

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

function parseError(selector: string, detail: string): LabelSelectorError {
  return new LabelSelectorError(`unable to parse requirement: ${detail} (selector: ${JSON.stringify(selector)})`);
}

function isWord(tok: string | undefined): tok is string {
  return tok !== undefined && !SYMBOLS.includes(tok);
}

function parseRequirements(selector: string): Requirement[] {
  const tokens = tokenize(selector);
  const reqs: Requirement[] = [];
  let pos = 0;
  const peek = () => tokens[pos];
  const next = () => tokens[pos++];
  const checkValue = (v: string) => {
    if (labelValueProblem(v) !== undefined) throw parseError(selector, `invalid label value: ${JSON.stringify(v)}`);
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
    if (labelKeyProblem(key) !== undefined) throw parseError(selector, `invalid label key ${JSON.stringify(key)}`);
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

function matches(req: Requirement, labels: Labels): boolean {
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

function matcher(reqs: Requirement[]): LabelMatcher {
  return (labels) => reqs.every((r) => matches(r, labels));
}

/** Parses a selector in its string form (`tier=canary,geo in (eu,us)`); throws LabelSelectorError on bad syntax. */
export function parseLabelSelector(selector: string): LabelMatcher {
  return matcher(parseRequirements(selector));
}

/** A selector from a LabelSelector object (matchLabels + matchExpressions), as in a Deployment's spec.selector. */
export function labelSelectorFromObject(sel: {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}): LabelMatcher {
  const reqs: Requirement[] = [];
  for (const [key, value] of Object.entries(sel.matchLabels ?? {})) reqs.push({ key, op: "=", values: [value] });
  for (const e of sel.matchExpressions ?? []) {
    const op: Operator = e.operator === "In" ? "in" : e.operator === "NotIn" ? "notin" : e.operator === "Exists" ? "exists" : "!";
    reqs.push({ key: e.key, op, values: e.values ?? [] });
  }
  return matcher(reqs);
}
