// The conditions of a rollout analysis: small expressions on `result` (a measurement's number),
// e.g. `result < 0.01`, `result >= 0.99 && !isNaN(result)`. Parsed once into a closure by a
// recursive-descent parser of our own — never eval, never a general-purpose language: numbers,
// `result`, true/false, arithmetic (+ - * /), comparisons (< <= > >= == !=), logic (&& || !,
// also and/or/not), parentheses, and isNaN(x), isInf(x), abs(x). A comparison with NaN is false
// (IEEE), so a NaN result satisfies no `result < x`.
//
// Types are checked when the expression is compiled (a condition must be a boolean; arithmetic
// takes numbers), so a condition that compiles cannot fail when a measurement is judged.

export class ConditionError extends Error {}

type Value = number | boolean;
type Node = (result: number) => Value;
type Typed = { type: "number" | "boolean"; eval: Node };

/** Longest accepted expression, in characters. */
export const MAX_CONDITION_LENGTH = 1024;

const FUNCTIONS: Record<string, { returns: "number" | "boolean"; fn: (x: number) => Value }> = {
  isNaN: { returns: "boolean", fn: (x) => Number.isNaN(x) },
  isInf: { returns: "boolean", fn: (x) => x === Infinity || x === -Infinity },
  abs: { returns: "number", fn: (x) => Math.abs(x) },
};

const TOKEN = /\s*(?:(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_][A-Za-z0-9_]*)|(<=|>=|==|!=|&&|\|\||[<>!()+\-*/]))/y;

function tokenize(text: string): string[] {
  const tokens: string[] = [];
  TOKEN.lastIndex = 0;
  let at = 0;
  while (at < text.length) {
    if (/^\s*$/.test(text.slice(at))) break;
    TOKEN.lastIndex = at;
    const m = TOKEN.exec(text);
    if (!m)
      throw new ConditionError(`unexpected ${JSON.stringify(text.slice(at).trim()[0])} at ${at + (text.slice(at).length - text.slice(at).trimStart().length)}`);
    tokens.push(m[1] ?? m[2] ?? m[3]!);
    at = TOKEN.lastIndex;
  }
  return tokens;
}

const WORDS: Record<string, string> = { and: "&&", or: "||", not: "!" };

/** Compiles `text` into a predicate on `result`; a ConditionError says what is wrong with it. */
export function compileCondition(text: string): (result: number) => boolean {
  if (text.length > MAX_CONDITION_LENGTH) throw new ConditionError(`at most ${MAX_CONDITION_LENGTH} characters`);
  const tokens = tokenize(text).map((t) => WORDS[t] ?? t);
  let i = 0;
  const peek = () => tokens[i];
  const take = (expected?: string) => {
    const token = tokens[i];
    if (token === undefined) throw new ConditionError(expected ? `expected ${JSON.stringify(expected)} at the end` : "unexpected end");
    if (expected !== undefined && token !== expected) throw new ConditionError(`expected ${JSON.stringify(expected)}, found ${JSON.stringify(token)}`);
    i++;
    return token;
  };
  const want = (node: Typed, type: Typed["type"], what: string): Node => {
    if (node.type !== type) throw new ConditionError(`${what} takes a ${type}, not a ${node.type}`);
    return node.eval;
  };
  const binary = (next: () => Typed, ops: readonly string[], apply: (op: string, a: Typed, b: Typed) => Typed) => () => {
    let left = next();
    while (ops.includes(peek() ?? "")) {
      const op = take();
      left = apply(op, left, next());
    }
    return left;
  };
  const primary = (): Typed => {
    const token = take();
    if (token === "(") {
      const inner = or();
      take(")");
      return inner;
    }
    if (/^[\d.]/.test(token)) {
      const n = Number(token);
      return { type: "number", eval: () => n };
    }
    if (token === "result") return { type: "number", eval: (r) => r };
    if (token === "true" || token === "false") {
      const b = token === "true";
      return { type: "boolean", eval: () => b };
    }
    const fn = FUNCTIONS[token];
    if (fn) {
      take("(");
      const arg = want(or(), "number", `${token}()`);
      take(")");
      return { type: fn.returns, eval: (r) => fn.fn(arg(r) as number) };
    }
    throw new ConditionError(`unknown name ${JSON.stringify(token)} (use result, true, false, ${Object.keys(FUNCTIONS).join(", ")})`);
  };
  const unary = (): Typed => {
    if (peek() === "-") {
      take();
      const arg = want(unary(), "number", "-");
      return { type: "number", eval: (r) => -(arg(r) as number) };
    }
    if (peek() === "!") {
      take();
      const arg = want(unary(), "boolean", "!");
      return { type: "boolean", eval: (r) => !arg(r) };
    }
    return primary();
  };
  const arithmetic = (op: string, a: Typed, b: Typed): Typed => {
    const [x, y] = [want(a, "number", op), want(b, "number", op)];
    const f = {
      "+": (p: number, q: number) => p + q,
      "-": (p: number, q: number) => p - q,
      "*": (p: number, q: number) => p * q,
      "/": (p: number, q: number) => p / q,
    }[op]!;
    return { type: "number", eval: (r) => f(x(r) as number, y(r) as number) };
  };
  const product = binary(unary, ["*", "/"], arithmetic);
  const sum = binary(product, ["+", "-"], arithmetic);
  const comparison = (): Typed => {
    const left = sum();
    const op = peek();
    if (!op || !["<", "<=", ">", ">=", "==", "!="].includes(op)) return left;
    take();
    const right = sum();
    if (op === "==" || op === "!=") {
      if (left.type !== right.type) throw new ConditionError(`${op} compares a ${left.type} with a ${right.type}`);
      const [x, y] = [left.eval, right.eval];
      return { type: "boolean", eval: op === "==" ? (r) => x(r) === y(r) : (r) => x(r) !== y(r) };
    }
    const [x, y] = [want(left, "number", op), want(right, "number", op)];
    const f = {
      "<": (p: number, q: number) => p < q,
      "<=": (p: number, q: number) => p <= q,
      ">": (p: number, q: number) => p > q,
      ">=": (p: number, q: number) => p >= q,
    }[op]!;
    return { type: "boolean", eval: (r) => f(x(r) as number, y(r) as number) };
  };
  const logic = (op: string, a: Typed, b: Typed): Typed => {
    const [x, y] = [want(a, "boolean", op), want(b, "boolean", op)];
    return { type: "boolean", eval: op === "&&" ? (r) => (x(r) as boolean) && (y(r) as boolean) : (r) => (x(r) as boolean) || (y(r) as boolean) };
  };
  const and = binary(comparison, ["&&"], logic);
  const or = binary(and, ["||"], logic);

  if (tokens.length === 0) throw new ConditionError("empty");
  const root = or();
  if (i < tokens.length) throw new ConditionError(`unexpected ${JSON.stringify(tokens[i])}`);
  if (root.type !== "boolean") throw new ConditionError("must be true or false, e.g. result < 0.01, not a number");
  const predicate = root.eval;
  return (result) => predicate(result) as boolean;
}
