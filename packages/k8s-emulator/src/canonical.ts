// What a built-in object looks like after the real server decoded it into its
// Go struct and encoded it again for storage:
// - fields tagged `omitempty` disappear when empty: "" strings, empty lists,
//   null, and empty maps (labels, annotations, matchLabels, nodeSelector,
//   resource lists, Service selector) - e.g. an env var `{name: X, value: ""}`
//   comes back as `{name: X}` (core/v1 types.go: `Value string
//   json:"value,omitempty"`). Structs are never omitted (encoding/json), so
//   `{}` stays; entries inside maps stay even when "".
// - resource.Quantity values come back in canonical form (see quantity.ts).
// - int-or-string values keep their JSON type (intstr.IntOrString).
// - non-pointer `omitempty` booleans and integers disappear when false / 0;
//   the served types' fields of that kind are listed in ZERO_OMITTED.
// Custom resources are stored as sent (apart from structural pruning, see
// schema.ts), so none of this applies to them.
import { badRequest } from "./errors.ts";
import { canonicalQuantity, QuantityError } from "./quantity.ts";
import type { KindStrategy } from "./kinds/strategy.ts";
import { isObject, type JsonObject, type KubeObject } from "./util.ts";

/** Fields of Go map type: their entries are data, not struct fields. */
const MAP_FIELDS = new Set(["labels", "annotations", "matchLabels", "nodeSelector", "limits", "requests", "overhead"]);
/** Map fields whose values are resource.Quantity. */
const QUANTITY_MAPS = new Set(["limits", "requests", "overhead"]);
/** Quantity-typed struct fields (EmptyDirVolumeSource.sizeLimit). */
const QUANTITY_FIELDS = new Set(["sizeLimit"]);
/** Fields whose `[]` survives (no omitempty): PodSpec.containers. */
const KEEP_EMPTY_LIST = new Set(["containers"]);

/**
 * Non-pointer bool/int32 fields tagged omitempty in the served types (their
 * names are unique among the fields here): DeploymentSpec minReadySeconds,
 * paused; PodSpec hostNetwork, hostPID, hostIPC; Container stdin, stdinOnce,
 * tty; ContainerPort hostPort; VolumeMount (and volume sources) readOnly;
 * ServicePort nodePort; Probe initialDelaySeconds.
 */
const ZERO_OMITTED = new Set([
  "minReadySeconds",
  "paused",
  "hostNetwork",
  "hostPID",
  "hostIPC",
  "stdin",
  "stdinOnce",
  "tty",
  "hostPort",
  "readOnly",
  "nodePort",
  "initialDelaySeconds",
]);

/**
 * Pointer fields (`*string`, omitempty) keep "": a nil pointer is omitted, a pointer to "" is
 * not. LeaseSpec.holderIdentity (coordination/v1 types.go), which a leader's release sets to "".
 */
const KEEP_EMPTY_STRING = new Set(["holderIdentity"]);

function isEmpty(key: string, value: unknown): boolean {
  if (ZERO_OMITTED.has(key) && (value === false || value === 0)) return true;
  if (KEEP_EMPTY_STRING.has(key) && value === "") return false;
  return value === null || value === "" || (Array.isArray(value) && value.length === 0);
}

/** Applies the rules above to the struct `o`; `path` names it for error messages. */
function canonicalStruct(o: JsonObject, path: string, mapFields: Set<string>): void {
  for (const [key, value] of Object.entries(o)) {
    if (key === "managedFields" || key === "status") continue;
    const here = path ? `${path}.${key}` : key;
    if (mapFields.has(key) && isObject(value)) {
      if (QUANTITY_MAPS.has(key)) for (const [k, v] of Object.entries(value)) value[k] = quantityAt(`${here}.${k}`, v);
      if (Object.keys(value).length === 0) delete o[key];
      continue;
    }
    if (QUANTITY_FIELDS.has(key) && value !== null && value !== undefined) {
      o[key] = quantityAt(here, value);
      continue;
    }
    if (isEmpty(key, value) && !(KEEP_EMPTY_LIST.has(key) && Array.isArray(value))) {
      delete o[key];
      continue;
    }
    if (isObject(value)) canonicalStruct(value, here, mapFields);
    else if (Array.isArray(value)) for (const item of value) if (isObject(item)) canonicalStruct(item, here, mapFields);
  }
}

function quantityAt(path: string, value: unknown): string {
  if (typeof value !== "string" && typeof value !== "number") throw new QuantityError(`${path}: quantity must be a string or a number`);
  return canonicalQuantity(value);
}

/**
 * Canonicalizes a built-in object in place. A bad quantity fails decoding,
 * which the server reports as 400 `<Kind> in version "<v>" cannot be handled
 * as a <Kind>: <error>` (apiserver/pkg/endpoints/handlers/rest.go).
 */
export function canonicalize(rt: KindStrategy, o: KubeObject): void {
  const mapFields = rt.mapFields ? new Set([...MAP_FIELDS, ...rt.mapFields]) : MAP_FIELDS;
  try {
    canonicalStruct(o, "", mapFields);
  } catch (err) {
    if (!(err instanceof QuantityError)) throw err;
    throw badRequest(`${rt.kind} in version "${rt.version}" cannot be handled as a ${rt.kind}: ${err.message}`);
  }
}
