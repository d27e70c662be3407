// Patch formats: JSON merge patch (RFC 7386), a simplified strategic merge
// patch, JSON patch (RFC 6902), and the overlay used by server-side apply.
import { ApiError } from "./errors.ts";
import { listKeyField } from "./fields.ts";
import { clone, deepEqual, isObject, type JsonObject } from "./util.ts";

/** RFC 7386: objects merge recursively, null deletes, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return clone(patch);
  const out: JsonObject = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/**
 * Strategic merge patch, reduced to what matters here: like a merge patch, but
 * lists of keyed objects (containers, env, volumes and ports by name/port)
 * merge item by item instead of being replaced, and `$patch: delete` removes
 * such an item. Other directives sent by kubectl (`$setElementOrder/...`,
 * `$retainKeys`) are accepted and ignored.
 */
export function strategicMergePatch(target: unknown, patch: unknown): unknown {
  const field = Array.isArray(patch) ? listKeyField(target) : undefined;
  if (field && Array.isArray(patch) && patch.every((i) => isObject(i) && i[field] !== undefined)) {
    const out = (target as JsonObject[]).map((i) => clone(i));
    for (const item of patch as JsonObject[]) {
      const idx = out.findIndex((i) => i[field] === item[field]);
      if (item.$patch === "delete") {
        if (idx >= 0) out.splice(idx, 1);
      } else if (idx >= 0) {
        out[idx] = strategicMergePatch(out[idx], item) as JsonObject;
      } else {
        out.push(strategicMergePatch(undefined, item) as JsonObject);
      }
    }
    return out;
  }
  if (!isObject(patch)) return clone(patch);
  const out: JsonObject = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith("$")) continue;
    if (v === null) delete out[k];
    else out[k] = strategicMergePatch(out[k], v);
  }
  return out;
}

/** Server-side apply overlay: the applied configuration wins field by field. */
export function overlayApplied(live: unknown, applied: unknown): unknown {
  if (isObject(applied)) {
    const out: JsonObject = isObject(live) ? { ...live } : {};
    for (const [k, v] of Object.entries(applied)) out[k] = overlayApplied(out[k], v);
    return out;
  }
  const field = listKeyField(applied);
  if (field) {
    // Applied items come first, in applied order; items only other managers
    // set are kept after them.
    const appliedItems = applied as JsonObject[];
    const liveItems = Array.isArray(live) ? live.filter(isObject) : [];
    const merged = appliedItems.map((item) =>
      overlayApplied(
        liveItems.find((l) => l[field] === item[field]),
        item,
      ),
    );
    const rest = liveItems.filter((l) => l[field] !== undefined && !appliedItems.some((a) => a[field] === l[field])).map((l) => clone(l));
    return [...merged, ...rest];
  }
  return clone(applied);
}

// --- RFC 6902 JSON patch ---

interface JsonPatchOp {
  op: string;
  path: string;
  from?: string;
  value?: unknown;
}

/** A patch that cannot be applied: 422 with empty details, as apierrors.NewGenericServerResponse writes it. */
function patchError(message: string): ApiError {
  return new ApiError(422, message, { reason: "Invalid", details: {} });
}

function parsePointer(pointer: string): string[] {
  if (pointer === "") return [];
  if (!pointer.startsWith("/")) throw patchError(`invalid JSON pointer ${JSON.stringify(pointer)}`);
  return pointer
    .slice(1)
    .split("/")
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function resolveParent(doc: unknown, tokens: string[], op: string): unknown {
  let cur = doc;
  for (const t of tokens.slice(0, -1)) {
    if (Array.isArray(cur)) {
      const i = Number(t);
      if (!/^\d+$/.test(t) || i >= cur.length) throw patchError(`${op} operation does not apply: doc is missing path: "/${tokens.join("/")}"`);
      cur = cur[i];
    } else if (isObject(cur) && Object.hasOwn(cur, t)) {
      cur = cur[t];
    } else {
      throw patchError(`${op} operation does not apply: doc is missing path: "/${tokens.join("/")}"`);
    }
  }
  return cur;
}

function getAt(doc: unknown, tokens: string[], op: string): unknown {
  if (tokens.length === 0) return doc;
  const parent = resolveParent(doc, tokens, op);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent) && /^\d+$/.test(last) && Number(last) < parent.length) return parent[Number(last)];
  if (isObject(parent) && Object.hasOwn(parent, last)) return parent[last];
  throw patchError(`${op} operation does not apply: doc is missing path: "/${tokens.join("/")}"`);
}

function removeAtPointer(doc: unknown, tokens: string[], op: string): unknown {
  const parent = resolveParent(doc, tokens, op);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent) && /^\d+$/.test(last) && Number(last) < parent.length) return parent.splice(Number(last), 1)[0];
  if (isObject(parent) && Object.hasOwn(parent, last)) {
    const v = parent[last];
    delete parent[last];
    return v;
  }
  throw patchError(`${op} operation does not apply: doc is missing path: "/${tokens.join("/")}"`);
}

function addAt(doc: unknown, tokens: string[], value: unknown, op: string): unknown {
  if (tokens.length === 0) return value;
  const parent = resolveParent(doc, tokens, op);
  const last = tokens[tokens.length - 1];
  if (Array.isArray(parent)) {
    const i = last === "-" ? parent.length : Number(last);
    if (!(last === "-" || /^\d+$/.test(last)) || i > parent.length)
      throw patchError(`${op} operation does not apply: index out of range: "/${tokens.join("/")}"`);
    parent.splice(i, 0, value);
  } else if (isObject(parent)) {
    parent[last] = value;
  } else {
    throw patchError(`${op} operation does not apply: doc is missing path: "/${tokens.join("/")}"`);
  }
  return doc;
}

export function jsonPatch(target: unknown, ops: unknown): unknown {
  if (!Array.isArray(ops)) throw new ApiError(400, "json: cannot unmarshal object into Go value of type jsonpatch.Patch");
  let doc = clone(target);
  for (const raw of ops) {
    if (!isObject(raw) || typeof raw.op !== "string" || typeof raw.path !== "string") throw patchError("invalid JSON patch operation");
    const op = raw as unknown as JsonPatchOp;
    const tokens = parsePointer(op.path);
    switch (op.op) {
      case "add":
        doc = addAt(doc, tokens, clone(op.value), "add");
        break;
      case "remove":
        removeAtPointer(doc, tokens, "remove");
        break;
      case "replace":
        if (tokens.length === 0) {
          doc = clone(op.value);
        } else {
          removeAtPointer(doc, tokens, "replace");
          doc = addAt(doc, tokens, clone(op.value), "replace");
        }
        break;
      case "move": {
        const v = removeAtPointer(doc, parsePointer(op.from ?? ""), "move");
        doc = addAt(doc, tokens, v, "move");
        break;
      }
      case "copy":
        doc = addAt(doc, tokens, clone(getAt(doc, parsePointer(op.from ?? ""), "copy")), "copy");
        break;
      case "test":
        if (!deepEqual(getAt(doc, tokens, "test"), op.value)) throw patchError(`testing value /${tokens.join("/")} failed: test failed`);
        break;
      default:
        throw patchError(`Unexpected kind: ${op.op}`);
    }
  }
  return doc;
}
