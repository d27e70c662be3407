// Server-side apply and managedFields bookkeeping.
//
// Each managedFields entry (manager, operation, subresource) owns a field set.
// Apply takes ownership of the applied fields, fails with 409 when another
// manager owns one of them with a different value (unless forced, which moves
// ownership), and removes fields the manager applied before but no longer
// applies, if nobody else owns them. Non-apply writes (create, update, patch)
// give the writer ownership of exactly the fields whose value changed.
import { ApiError } from "./errors.ts";
import { fieldsOf, formatPath, fromFieldsV1, removeAt, toFieldsV1, valueAt, type FieldPath, type FieldSet, type Scope } from "./fields.ts";
import { overlayApplied } from "./patch.ts";
import { clone, deepEqual, nowRfc3339, type JsonObject, type KubeObject, type ManagedFieldsEntry } from "./util.ts";

export interface ManagerContext {
  manager: string;
  apiVersion: string;
  scope: Scope;
  hasStatusSubresource: boolean;
}

function subresourceOf(scope: Scope): string {
  return scope === "status" ? "status" : "";
}

function sameScope(e: ManagedFieldsEntry, scope: Scope): boolean {
  return (e.subresource ?? "") === subresourceOf(scope);
}

function makeEntry(ctx: ManagerContext, operation: ManagedFieldsEntry["operation"], set: FieldSet): ManagedFieldsEntry {
  const entry: ManagedFieldsEntry = {
    manager: ctx.manager,
    operation,
    apiVersion: ctx.apiVersion,
    time: nowRfc3339(),
    fieldsType: "FieldsV1",
    fieldsV1: toFieldsV1(set),
  };
  if (ctx.scope === "status") entry.subresource = "status";
  return entry;
}

/** Puts `entry` in place of the entry with the same identity, or appends it; drops entries that own nothing. */
function upsert(entries: ManagedFieldsEntry[], entry: ManagedFieldsEntry): ManagedFieldsEntry[] {
  const id = (e: ManagedFieldsEntry) => `${e.manager}\0${e.operation}\0${e.subresource ?? ""}`;
  const idx = entries.findIndex((e) => id(e) === id(entry));
  const out = [...entries];
  if (idx >= 0) out[idx] = entry;
  else out.push(entry);
  return out.filter((e) => Object.keys(e.fieldsV1).length > 0);
}

interface Conflict {
  manager: string;
  apiVersion: string;
  path: FieldPath;
}

function conflictError(conflicts: Conflict[]): ApiError {
  const byManager = new Map<string, Conflict[]>();
  for (const c of conflicts) byManager.set(c.manager, [...(byManager.get(c.manager) ?? []), c]);
  const parts = [...byManager.values()].map((cs) => {
    const who = `"${cs[0].manager}" using ${cs[0].apiVersion}`;
    return cs.length === 1
      ? `conflict with ${who}: ${formatPath(cs[0].path)}`
      : `conflicts with ${who}:\n${cs.map((c) => `- ${formatPath(c.path)}`).join("\n")}`;
  });
  const n = conflicts.length;
  return new ApiError(409, `Apply failed with ${n} conflict${n === 1 ? "" : "s"}: ${parts.join("\n")}`, {
    details: {
      causes: conflicts.map((c) => ({
        reason: "FieldManagerConflict",
        message: `conflict with "${c.manager}" using ${c.apiVersion}`,
        field: formatPath(c.path),
      })),
    },
  });
}

/**
 * Applies `applied` onto `live` (undefined when creating) for `ctx.manager`.
 * Returns the merged object (metadata.managedFields updated); server-owned
 * metadata is left for the caller to fill in.
 */
export function serverSideApply(live: KubeObject | undefined, applied: JsonObject, ctx: ManagerContext, force: boolean): KubeObject {
  const base: JsonObject = live ? clone(live) : {};
  const entries = (live?.metadata.managedFields ?? []).map((e) => ({ ...e }));
  const appliedSet = fieldsOf(applied, ctx.scope, ctx.hasStatusSubresource);

  const conflicts: Conflict[] = [];
  const otherSets = new Map<ManagedFieldsEntry, FieldSet>();
  for (const e of entries) {
    if (!sameScope(e, ctx.scope) || (e.manager === ctx.manager && e.operation === "Apply")) continue;
    const set = fromFieldsV1(e.fieldsV1);
    otherSets.set(e, set);
    if (e.manager === ctx.manager) continue; // a manager never conflicts with itself
    for (const [key, path] of set) {
      if (!appliedSet.has(key) || path[path.length - 1] === ".") continue;
      if (!deepEqual(valueAt(base, path).value, valueAt(applied, path).value)) {
        conflicts.push({ manager: e.manager, apiVersion: e.apiVersion, path });
        if (force) set.delete(key);
      }
    }
  }
  if (conflicts.length > 0 && !force) throw conflictError(conflicts);

  const previous = entries.find((e) => e.manager === ctx.manager && e.operation === "Apply" && sameScope(e, ctx.scope));
  const merged = overlayApplied(base, applied) as KubeObject;

  // Fields this manager applied before but dropped now are removed, unless
  // another manager also owns them.
  if (previous) {
    const ownedByOthers = new Set<string>();
    for (const set of otherSets.values()) for (const k of set.keys()) ownedByOthers.add(k);
    const dropped = [...fromFieldsV1(previous.fieldsV1)].filter(([k]) => !appliedSet.has(k) && !ownedByOthers.has(k));
    // Remove deepest paths first so list items vanish after their fields.
    dropped.sort((a, b) => b[1].length - a[1].length);
    for (const [, path] of dropped) removeAt(merged, path);
  }

  let newEntries = entries.map((e) => {
    const set = otherSets.get(e);
    return set && force ? { ...e, fieldsV1: toFieldsV1(set) } : e;
  });
  const entry = makeEntry(ctx, "Apply", appliedSet);
  // Keep the previous timestamp when ownership did not change, so that a no-op
  // apply leaves the object byte-for-byte identical.
  if (previous && deepEqual(previous.fieldsV1, entry.fieldsV1)) entry.time = previous.time;
  newEntries = upsert(newEntries, entry);
  merged.metadata = { ...(merged.metadata ?? {}), managedFields: newEntries };
  return merged;
}

/**
 * Managed fields after a non-apply write by `ctx.manager`: it takes ownership
 * of every field whose value changed; fields this write removed are dropped
 * from all entries of the same scope. Fields an applier owns that were never
 * stored (e.g. an env var's empty `value`, dropped by the server) stay owned,
 * as in structured-merge-diff's Updater, which only removes what the update
 * removed.
 */
export function trackUpdate(oldObj: KubeObject | undefined, newObj: KubeObject, ctx: ManagerContext): ManagedFieldsEntry[] {
  const entries = oldObj?.metadata.managedFields ?? [];
  const newSet = fieldsOf(newObj, ctx.scope, ctx.hasStatusSubresource);
  const oldSet = oldObj ? fieldsOf(oldObj, ctx.scope, ctx.hasStatusSubresource) : new Map<string, FieldPath>();
  const changed: FieldSet = new Map();
  for (const [key, path] of newSet) {
    const before = oldObj ? valueAt(oldObj, path) : { found: false, value: undefined };
    const after = valueAt(newObj, path);
    if (path[path.length - 1] === "." ? !before.found : !before.found || !deepEqual(before.value, after.value)) {
      changed.set(key, path);
    }
  }
  const isMine = (e: ManagedFieldsEntry) => e.manager === ctx.manager && e.operation === "Update" && sameScope(e, ctx.scope);
  let out = entries.map((e) => {
    if (!sameScope(e, ctx.scope)) return e;
    const set = fromFieldsV1(e.fieldsV1);
    let modified = false;
    for (const key of [...set.keys()]) {
      if ((oldSet.has(key) && !newSet.has(key)) || (changed.has(key) && !isMine(e))) {
        set.delete(key);
        modified = true;
      }
    }
    return modified ? { ...e, fieldsV1: toFieldsV1(set) } : e;
  });
  out = out.filter((e) => Object.keys(e.fieldsV1).length > 0);
  if (changed.size > 0) {
    const mine = out.find(isMine);
    const set = mine ? fromFieldsV1(mine.fieldsV1) : new Map<string, FieldPath>();
    for (const [k, p] of changed) set.set(k, p);
    out = upsert(out, makeEntry(ctx, "Update", set));
  }
  return out;
}
