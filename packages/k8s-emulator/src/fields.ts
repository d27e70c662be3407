// Field sets in the `FieldsV1` format used by metadata.managedFields.
//
// A field set is handled as a set of leaf paths. Path elements are those of
// structured-merge-diff: `f:<field>` for a map field, `k:{"<key>":<value>}`
// for an item of an associative list, and `.` for the item itself. The real
// server knows each list's keys from the OpenAPI schema; here a list of
// objects is associative when all items carry a unique value for one of the
// usual key fields (containerPort / port for ports, name for containers, env
// and volumes, mountPath, type for conditions). Everything else (other lists,
// scalars, empty maps) is an atomic leaf.
import { isObject, type JsonObject } from "./util.ts";

export type FieldPath = readonly string[];
export type FieldSet = Map<string, FieldPath>;

/** Which part of an object a request may write. */
export type Scope = "main" | "status";

// Fields the server owns; they never appear in managedFields.
const IGNORED_METADATA = new Set([
  "name",
  "namespace",
  "generateName",
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "managedFields",
  "selfLink",
]);

export function pathKey(path: FieldPath): string {
  return JSON.stringify(path);
}

const KEY_FIELDS = ["containerPort", "port", "name", "mountPath", "type"];

/** The key field of an associative list, or undefined for an atomic list. */
export function listKeyField(value: unknown): string | undefined {
  if (!Array.isArray(value) || value.length === 0 || !value.every(isObject)) return undefined;
  for (const field of KEY_FIELDS) {
    const keys = value.map((item) => (item as JsonObject)[field]);
    if (keys.every((k) => typeof k === "string" || typeof k === "number") && new Set(keys).size === keys.length) return field;
  }
  return undefined;
}

export function isAssociativeList(value: unknown): value is JsonObject[] {
  return listKeyField(value) !== undefined;
}

export function itemKey(item: JsonObject, field: string): string {
  return `k:${JSON.stringify({ [field]: item[field] })}`;
}

/** Whether `item` is the list item that the `k:` path element `el` designates. */
function isItem(item: unknown, el: string): boolean {
  if (!isObject(item)) return false;
  const key = JSON.parse(el.slice(2)) as JsonObject;
  return Object.entries(key).every(([k, v]) => item[k] === v);
}

function add(set: FieldSet, path: FieldPath): void {
  set.set(pathKey(path), path);
}

function collect(value: unknown, prefix: string[], out: FieldSet): void {
  if (isObject(value)) {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined);
    if (keys.length === 0 && prefix.length > 0) add(out, prefix);
    for (const k of keys) collect(value[k], [...prefix, `f:${k}`], out);
  } else if (listKeyField(value) !== undefined) {
    const field = listKeyField(value)!;
    for (const item of value as JsonObject[]) {
      const p = [...prefix, itemKey(item, field)];
      add(out, [...p, "."]);
      for (const k of Object.keys(item)) collect(item[k], [...p, `f:${k}`], out);
    }
  } else {
    add(out, prefix);
  }
}

/** The fields set in `obj` that a request with the given scope manages. */
export function fieldsOf(obj: JsonObject, scope: Scope, hasStatusSubresource: boolean): FieldSet {
  const out: FieldSet = new Map();
  for (const [k, v] of Object.entries(obj)) {
    if (v === undefined || k === "apiVersion" || k === "kind") continue;
    if (hasStatusSubresource && (scope === "status") !== (k === "status")) continue;
    if (k === "metadata" && isObject(v)) {
      for (const [mk, mv] of Object.entries(v)) {
        if (mv !== undefined && !IGNORED_METADATA.has(mk)) collect(mv, ["f:metadata", `f:${mk}`], out);
      }
      continue;
    }
    collect(v, [`f:${k}`], out);
  }
  return out;
}

/** String.prototype.localeCompare's order, without building a collator per comparison. */
const collator = new Intl.Collator();

export function toFieldsV1(set: FieldSet): JsonObject {
  const root: JsonObject = {};
  const sorted = [...set].sort(([a], [b]) => collator.compare(a, b));
  for (const [, path] of sorted) {
    let node = root;
    for (const el of path) {
      if (!isObject(node[el])) node[el] = {};
      node = node[el] as JsonObject;
    }
  }
  return root;
}

export function fromFieldsV1(tree: unknown): FieldSet {
  const out: FieldSet = new Map();
  const walk = (node: unknown, prefix: string[]) => {
    const children = isObject(node) ? Object.keys(node) : [];
    if (children.length === 0) {
      if (prefix.length) add(out, prefix);
      return;
    }
    for (const c of children) walk((node as JsonObject)[c], [...prefix, c]);
  };
  walk(tree, []);
  return out;
}

/** Looks up the value at a field path; `found` is false when it is not set. */
export function valueAt(obj: unknown, path: FieldPath): { found: boolean; value: unknown } {
  let cur: unknown = obj;
  for (const el of path) {
    if (el === ".") continue;
    if (el.startsWith("f:")) {
      const k = el.slice(2);
      if (!isObject(cur) || !Object.hasOwn(cur, k)) return { found: false, value: undefined };
      cur = cur[k];
    } else if (el.startsWith("k:")) {
      if (!Array.isArray(cur)) return { found: false, value: undefined };
      const item = cur.find((i) => isItem(i, el));
      if (item === undefined) return { found: false, value: undefined };
      cur = item;
    } else {
      return { found: false, value: undefined };
    }
  }
  return { found: true, value: cur };
}

/** Removes the field (or list item, for paths ending in `.`) at `path`. */
export function removeAt(obj: JsonObject, path: FieldPath): void {
  const target = path[path.length - 1] === "." ? path.slice(0, -1) : path;
  const parent = valueAt(obj, target.slice(0, -1));
  if (!parent.found) return;
  const last = target[target.length - 1];
  if (last.startsWith("f:") && isObject(parent.value)) {
    delete parent.value[last.slice(2)];
  } else if (last.startsWith("k:") && Array.isArray(parent.value)) {
    const idx = parent.value.findIndex((i) => isItem(i, last));
    if (idx >= 0) parent.value.splice(idx, 1);
  }
}

/** `.spec.template.spec.containers[name="app"].image`, as in apply conflict messages. */
export function formatPath(path: FieldPath): string {
  let out = "";
  for (const el of path) {
    if (el === ".") continue;
    if (el.startsWith("f:")) out += `.${el.slice(2)}`;
    else if (el.startsWith("k:")) {
      const key = JSON.parse(el.slice(2)) as Record<string, unknown>;
      out += `[${Object.entries(key)
        .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
        .join(",")}]`;
    }
  }
  return out;
}
