// What the observer keeps of the objects it watches (client-go's informer transform
// functions): only the fields that status reports, drift checks and applies read, so 100,000
// Deployments cost a couple of hundred bytes each rather than the 3–5 KB of a full object with
// its managedFields. The full object of a watch event or list page is still what the event
// handler (drift correction) compares; only the cache holds the reduced one.
//
// * A record is ONE string (fields joined by a separator, see pack()), decoded into a new reduced
//   object on every read: an object per record, with its labels object, conditions array and a
//   string per field, cost about three times as much (docs/benchmarks.md, finding 9).
// * Values that repeat on every object (label values, namespaces, condition types and reasons,
//   messages that do not name the object) are stored once, in a bounded table, and referenced
//   by index. Images are not: most Deployments run an image of their own.
// * The agent keeps each resource key's records in the key's desired-table entry, packed against
//   a shared dictionary (DesiredTable.attachment()): field values, separators and marks repeat
//   from one resource to the next.
// * Records are found by resource key, the one index the agent needs (status reports and applies
//   ask for a key's objects); the records of all objects of a key (a Deployment and a Service)
//   are one string. An object's location is derived: the agent names every object after
//   its resource id, so "namespace/name" is found under "<type>/<name>" for the few resource
//   types. Only objects named otherwise (someone else's, labelled as ours) and objects without a
//   resource key are kept by location, in two small maps that are empty in normal operation.
import { keyedStrings, type KeyedStrings } from "./keyed-strings.ts";
import { resourceKey, RESOURCE_TYPE_NAMES } from "./keys.ts";
import {
  DESIRED_VERSION_ANNOTATION,
  ID_LABEL,
  MANAGED_BY_LABEL,
  REGION_LABEL,
  resourceOfLabels,
  SECRET_ENV_CHECKSUM_ANNOTATION,
  secretEnvChecksumOf,
  TYPE_LABEL,
  type KubeObject,
} from "./manifests.ts";

/** Status fields of a Deployment that observations read. */
const KEPT_STATUS = ["observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas"] as const;
/** Deployment conditions reported to ctrl. */
const KEPT_CONDITIONS = new Set(["Progressing", "Available"]);

// A record is its kind's index (one character, see ObjectCache), then its fields: name,
// namespace, resourceVersion, generation, the desired-version annotation, the labels
// managed-by, region, resource type and resource id, the held digest (see ObjectCache.set());
// for a HorizontalPodAutoscaler also status.currentReplicas and desiredReplicas; for a Deployment also spec.replicas, the
// first container's image, the pod template's secret env checksum annotation, KEPT_STATUS and four fields (type, status, reason, message) per kept
// condition. A field is the value itself (a string, or a number's decimal form) or one of
// these marks (a value holding a mark character is stored as JSON, see holdsMarker()):
/** Between fields. */
const SEPARATOR = "\u0001";
/** A value that is absent (undefined), as opposed to an empty string. */
const ABSENT = "\u0002";
/** The name or a label that equals its part of the record's resource key ("<type>/<id>"). */
const FROM_KEY = "\u0003";
/** Followed by the base-36 index of a shared value. */
const SHARED = "\u0004";
/** Followed by JSON: a value of an unexpected type, or a string holding a character up to HIGHEST_MARKER. */
const JSON_VALUE = "\u0005";
/** Between the records of one resource key (see ObjectCache). */
const RECORD_SEPARATOR = "\u0006";
/** In a condition's message: the object's name (Progressing names the ReplicaSet "<name>-<hash>"). */
const NAME_IN_MESSAGE = "\u0007";
/** In a shared message template: the ReplicaSet's pod-template hash after "<name>-". */
const HASH_IN_MESSAGE = "\u0008";
/** Followed by the base-36 index of a shared message template, ":" and the hash it lacks (see putMessage()). */
const TEMPLATE = "\u0009";
const HIGHEST_MARKER = 9;
/** "<name>-<hash>" in a message, the name already replaced: the hash (a pod-template hash is base-36 digits). */
const REPLICA_SET_HASH = new RegExp(`${NAME_IN_MESSAGE}-([a-z0-9]{1,20})(?![a-z0-9])`);
const COMMON_FIELDS = 10;
const DEPLOYMENT_FIELDS = COMMON_FIELDS + 3 + KEPT_STATUS.length;

/**
 * Values stored once and referenced by index. Bounded: values longer than `MAX_SHARED_LENGTH` or
 * beyond `MAX_SHARED` distinct ones are stored in each record. Never shrinks: the values that
 * repeat (label values, namespaces, condition reasons) are few.
 */
const MAX_SHARED = 10_000;
const MAX_SHARED_LENGTH = 64;
const sharedValues: string[] = [];
const sharedIndex = new Map<string, number>();

function putString(value: unknown, shared = false): string {
  if (value === undefined) return ABSENT;
  if (typeof value !== "string" || holdsMarker(value)) return JSON_VALUE + JSON.stringify(value);
  const index = shared ? sharedIndexOf(value) : undefined;
  if (index === undefined) return value;
  const reference = SHARED + index.toString(36);
  return reference.length < value.length ? reference : value;
}

/** The index of `value` in the shared values, added if there is room; undefined if it is not shared. */
function sharedIndexOf(value: string): number | undefined {
  if (value.length > MAX_SHARED_LENGTH) return undefined;
  let index = sharedIndex.get(value);
  if (index === undefined) {
    if (sharedValues.length >= MAX_SHARED) return undefined;
    index = sharedValues.push(value) - 1;
    sharedIndex.set(value, index);
  }
  return index;
}

function holdsMarker(value: string): boolean {
  for (let at = 0; at < value.length; at++) if (value.charCodeAt(at) <= HIGHEST_MARKER) return true;
  return false;
}

/**
 * A message naming the object (each is different) keeps the name as NAME_IN_MESSAGE; others are
 * shared. One that names a ReplicaSet "<name>-<hash>" (Progressing: 'ReplicaSet "web-5d8f7c9b6"
 * has successfully progressed.') is a shared template and the hash, about 40 bytes less each.
 */
function putMessage(message: unknown, name: string): string {
  if (typeof message !== "string" || holdsMarker(message) || name === "" || !message.includes(name)) return putString(message, true);
  const named = message.split(name).join(NAME_IN_MESSAGE);
  const hash = REPLICA_SET_HASH.exec(named)?.[1];
  const template = hash === undefined ? undefined : named.split(`${NAME_IN_MESSAGE}-${hash}`).join(`${NAME_IN_MESSAGE}-${HASH_IN_MESSAGE}`);
  const index = template === undefined ? undefined : sharedIndexOf(template);
  return index === undefined ? named : `${TEMPLATE}${index.toString(36)}:${hash}`;
}

function readMessage(field: string, name: string): string | undefined {
  if (field === ABSENT || field.startsWith(SHARED) || field.startsWith(JSON_VALUE)) return readString(field);
  if (field.startsWith(TEMPLATE)) {
    const colon = field.indexOf(":");
    const template = sharedValues[parseInt(field.slice(1, colon), 36)]!;
    return template.replaceAll(HASH_IN_MESSAGE, field.slice(colon + 1)).replaceAll(NAME_IN_MESSAGE, name);
  }
  return field.replaceAll(NAME_IN_MESSAGE, name);
}

function putNumber(value: unknown): string {
  if (value === undefined) return ABSENT;
  return typeof value === "number" && Number.isFinite(value) ? String(value) : JSON_VALUE + JSON.stringify(value);
}

function readString(field: string): string | undefined {
  if (field === ABSENT) return undefined;
  if (field.startsWith(SHARED)) return sharedValues[parseInt(field.slice(1), 36)];
  return field.startsWith(JSON_VALUE) ? JSON.parse(field.slice(1)) : field;
}

function readNumber(field: string): number | undefined {
  if (field === ABSENT) return undefined;
  return field.startsWith(JSON_VALUE) ? JSON.parse(field.slice(1)) : Number(field);
}

/** The type and id parts of a resource key (both undefined without a key). */
function keyParts(key: string | undefined): [string | undefined, string | undefined] {
  if (key === undefined) return [undefined, undefined];
  const slash = key.indexOf("/");
  return [key.slice(0, slash), key.slice(slash + 1)];
}

function putFromKey(value: string | undefined, part: string | undefined, shared = false): string {
  return value !== undefined && value === part ? FROM_KEY : putString(value, shared);
}

function readFromKey(field: string, part: string | undefined): string | undefined {
  return field === FROM_KEY ? part : readString(field);
}

/** The reduced `object` as a record of the kind `tag` (see the field list above). */
function pack(object: KubeObject, tag: string, kind: string, key: string | undefined, held: string | undefined): string {
  const { metadata } = object;
  const [type, id] = keyParts(key);
  const labels = metadata.labels;
  const fields = [
    // Joined below into one flat string (`tag + record` would keep a rope of the two).
    tag + putFromKey(metadata.name, id),
    putString(metadata.namespace, true),
    putString(metadata.resourceVersion),
    putNumber(metadata.generation),
    putString(metadata.annotations?.[DESIRED_VERSION_ANNOTATION]),
    putString(labels?.[MANAGED_BY_LABEL], true),
    putString(labels?.[REGION_LABEL], true),
    putFromKey(labels?.[TYPE_LABEL], type, true),
    putFromKey(labels?.[ID_LABEL], id),
    putString(held),
  ];
  if (kind === "HorizontalPodAutoscaler") {
    const status = object.status as AutoscalerStatus | undefined;
    fields.push(putNumber(status?.currentReplicas), putNumber(status?.desiredReplicas));
  }
  if (kind === "Deployment") {
    const spec = object.spec as DeploymentSpec | undefined;
    const status = object.status as DeploymentStatus | undefined;
    fields.push(putNumber(spec?.replicas), putString(spec?.template?.spec?.containers?.[0]?.image), putString(secretEnvChecksumOf(object)));
    for (const field of KEPT_STATUS) fields.push(putNumber(status?.[field]));
    for (const { type, status: conditionStatus, reason, message } of status?.conditions?.filter((c) => KEPT_CONDITIONS.has(c.type ?? "")) ?? []) {
      fields.push(putString(type, true), putString(conditionStatus, true), putString(reason, true), putMessage(message, metadata.name));
    }
  }
  return fields.join(SEPARATOR);
}

/**
 * The reduced object of a record's fields, those after its kind (a new one on every call): apiVersion, kind, name, namespace,
 * resourceVersion, generation, the agent's labels and desired-version annotation; for a
 * HorizontalPodAutoscaler also its current and desired replicas; for a Deployment also spec.replicas, the first container's image, the pod
 * template's secret env checksum annotation, and the status counters and Progressing/Available conditions.
 */
function unpack(fields: readonly string[], kind: ObjectKind, key: string | undefined): KubeObject {
  const [type, id] = keyParts(key);
  const labels: Record<string, string> = {};
  const labelValues = [readString(fields[5]!), readString(fields[6]!), readFromKey(fields[7]!, type), readFromKey(fields[8]!, id)];
  for (const [index, label] of [MANAGED_BY_LABEL, REGION_LABEL, TYPE_LABEL, ID_LABEL].entries()) {
    if (labelValues[index] !== undefined) labels[label] = labelValues[index];
  }
  const metadata: KubeObject["metadata"] = { name: readFromKey(fields[0]!, id)!, labels };
  const namespace = readString(fields[1]!);
  const resourceVersion = readString(fields[2]!);
  const generation = readNumber(fields[3]!);
  const desiredVersion = readString(fields[4]!);
  if (namespace !== undefined) metadata.namespace = namespace;
  if (resourceVersion !== undefined) metadata.resourceVersion = resourceVersion;
  if (generation !== undefined) metadata.generation = generation;
  if (desiredVersion !== undefined) metadata.annotations = { [DESIRED_VERSION_ANNOTATION]: desiredVersion };
  const object: KubeObject = { apiVersion: kind.apiVersion, kind: kind.kind, metadata };
  if (kind.kind === "HorizontalPodAutoscaler") {
    const status: AutoscalerStatus = {};
    const [currentReplicas, desiredReplicas] = [readNumber(fields[COMMON_FIELDS]!), readNumber(fields[COMMON_FIELDS + 1]!)];
    if (currentReplicas !== undefined) status.currentReplicas = currentReplicas;
    if (desiredReplicas !== undefined) status.desiredReplicas = desiredReplicas;
    object.status = status;
    return object;
  }
  if (kind.kind !== "Deployment") return object;
  const spec: DeploymentSpec = {};
  const replicas = readNumber(fields[COMMON_FIELDS]!);
  const image = readString(fields[COMMON_FIELDS + 1]!);
  const secretEnvChecksum = readString(fields[COMMON_FIELDS + 2]!);
  if (replicas !== undefined) spec.replicas = replicas;
  if (image !== undefined || secretEnvChecksum !== undefined) {
    spec.template = {
      ...(secretEnvChecksum !== undefined ? { metadata: { annotations: { [SECRET_ENV_CHECKSUM_ANNOTATION]: secretEnvChecksum } } } : {}),
      spec: { containers: image !== undefined ? [{ image }] : [] },
    };
  }
  const status: DeploymentStatus = {};
  for (const [index, field] of KEPT_STATUS.entries()) {
    const value = readNumber(fields[COMMON_FIELDS + 3 + index]!);
    if (value !== undefined) status[field] = value;
  }
  const conditions: NonNullable<DeploymentStatus["conditions"]> = [];
  for (let at = DEPLOYMENT_FIELDS; at < fields.length; at += 4) {
    const [type, conditionStatus, reason] = fields.slice(at, at + 3).map(readString);
    conditions.push({ type, status: conditionStatus, reason, message: readMessage(fields[at + 3]!, metadata.name) });
  }
  if (conditions.length > 0) status.conditions = conditions;
  object.spec = spec;
  object.status = status;
  return object;
}

/** A cached object: reduced (see unpack()), with the digest it holds (see ObjectCache.set()). */
export interface CachedObject {
  object: KubeObject;
  held: string | undefined;
}

function cachedObject(record: string, kind: ObjectKind, key: string | undefined): CachedObject {
  const fields = record.slice(1).split(SEPARATOR);
  return { object: unpack(fields, kind, key), held: readString(fields[COMMON_FIELDS - 1]!) };
}

/** "namespace/name" of a record (the fields after its kind). */
function recordLocation(record: string, key: string | undefined): string {
  const [name, namespace] = record.slice(1).split(SEPARATOR, 2);
  return `${readString(namespace!) ?? ""}/${readFromKey(name!, keyParts(key)[1])}`;
}

/** The resource key an object's labels name, if any. */
export function resourceKeyOf(object: KubeObject): string | undefined {
  const resource = resourceOfLabels(object.metadata.labels);
  return resource && resourceKey(resource.type, resource.id);
}

/** A kind of object the cache holds. */
export interface ObjectKind {
  apiVersion: string;
  kind: string;
}

/** A record's first character: the index of its kind, from "0". */
const FIRST_KIND = 0x30;
const MAX_KINDS = 10;

/**
 * The reduced objects of a few kinds, by location ("namespace/name") and by resource key. A
 * resource has an object of several kinds (a Deployment and a Service), so the records of one key
 * are one string (RECORD_SEPARATOR between them, each starting with its kind's index): one
 * string per resource, kept where the caller says (the agent: in the desired table's entries).
 */
export class ObjectCache {
  readonly #kinds: readonly ObjectKind[];
  /** The records of each resource key's objects, of every kind. */
  readonly #byKey: KeyedStrings;
  /** The resource key of each keyed object not named after its resource id, by place (see #place()). */
  readonly #renamed = new Map<string, string>();
  /** Records of objects without a resource key (their labels lack a known type or an id), by place. */
  readonly #unkeyed = new Map<string, string>();

  /** `records` keeps each resource key's records (default: a map of the cache's own). */
  constructor(kinds: readonly ObjectKind[], records: KeyedStrings = keyedStrings()) {
    if (kinds.length > MAX_KINDS) throw new Error(`an object cache holds at most ${MAX_KINDS} kinds`);
    this.#kinds = kinds;
    this.#byKey = records;
  }

  /** The reduced object of `kind` at namespace/name ("" for a cluster-scoped one), if cached. */
  get(kind: ObjectKind, namespace: string, name: string): KubeObject | undefined {
    return this.find(kind, namespace, name)?.object;
  }

  /** The reduced object of `kind` at namespace/name and the digest it holds (see set()), if cached. */
  find(kind: ObjectKind, namespace: string, name: string): CachedObject | undefined {
    const found = this.#find(this.#tag(kind), namespace, name);
    return found && cachedObject(found.record, kind, found.key);
  }

  /** The reduced objects of `kind` labelled as resource `key`'s. */
  objectsOf(kind: ObjectKind, key: string): KubeObject[] {
    return this.cachedOf(kind, key).map(({ object }) => object);
  }

  /** The reduced objects of `kind` labelled as resource `key`'s, with the digests they hold. */
  cachedOf(kind: ObjectKind, key: string): CachedObject[] {
    const tag = this.#tag(kind);
    return this.#records(key)
      .filter((record) => record[0] === tag)
      .map((record) => cachedObject(record, kind, key));
  }

  /** Resource keys of the cached objects of `kind`. */
  *keys(kind: ObjectKind): IterableIterator<string> {
    const tag = this.#tag(kind);
    for (const [key, records] of this.#byKey.entries()) if (records[0] === tag || records.includes(RECORD_SEPARATOR + tag)) yield key;
  }

  /** [namespace ("" if none), name] of every cached object of `kind`. */
  *locations(kind: ObjectKind): IterableIterator<[string, string]> {
    for (const { namespace, name } of this.keyed(kind)) yield [namespace, name];
    const tag = this.#tag(kind);
    for (const place of this.#unkeyed.keys()) if (place[0] === tag) yield splitLocation(place.slice(1));
  }

  /** The resource key, namespace ("" if none) and name of every cached object of `kind` that has a key. */
  *keyed(kind: ObjectKind): IterableIterator<{ key: string; namespace: string; name: string }> {
    const tag = this.#tag(kind);
    for (const [key, records] of this.#byKey.entries()) {
      for (const record of records.split(RECORD_SEPARATOR)) {
        if (record[0] !== tag) continue;
        const [namespace, name] = splitLocation(recordLocation(record, key));
        yield { key, namespace, name };
      }
    }
  }

  /**
   * Caches the reduced `object` of `kind` in place of the one at its location. `held`, if given,
   * is the contentDigest() of what the agent applies to this object, which the full `object`
   * was found to hold (at its resourceVersion): an apply of that content may be skipped while
   * the object stays at that version.
   */
  set(kind: ObjectKind, object: KubeObject, held?: string): void {
    const { namespace = "", name } = object.metadata;
    const tag = this.#tag(kind);
    const removed = this.#remove(tag, namespace, name);
    const key = resourceKeyOf(object);
    const record = pack(object, tag, kind.kind, key, held);
    // The key's records are written once (each write packs them): the old key's only if the object moved.
    if (removed?.key !== undefined && removed.key !== key) this.#setRecords(removed.key, removed.others);
    if (key === undefined) {
      this.#unkeyed.set(this.#place(tag, namespace, name), record);
      return;
    }
    this.#setRecords(key, [...(removed?.key === key ? removed.others : this.#records(key)), record]);
    if (name !== keyParts(key)[1]) this.#renamed.set(this.#place(tag, namespace, name), key);
  }

  /** Removes the object of `kind` at namespace/name; returns it (reduced) if it was cached. */
  delete(kind: ObjectKind, namespace: string, name: string): KubeObject | undefined {
    const removed = this.#remove(this.#tag(kind), namespace, name);
    if (!removed) return undefined;
    if (removed.key !== undefined) this.#setRecords(removed.key, removed.others);
    return cachedObject(removed.record, kind, removed.key).object;
  }

  /**
   * Takes the object at namespace/name out of the maps by place; returns its record and the
   * other records of its key, which the caller writes back (see #setRecords()).
   */
  #remove(tag: string, namespace: string, name: string): { key: string | undefined; record: string; others: string[] } | undefined {
    const found = this.#find(tag, namespace, name);
    if (!found) return undefined;
    const place = this.#place(tag, namespace, name);
    if (found.key === undefined) this.#unkeyed.delete(place);
    else this.#renamed.delete(place);
    return { key: found.key, record: found.record, others: found.records.filter((candidate) => candidate !== found.record) };
  }

  #setRecords(key: string, records: readonly string[]): void {
    // join() makes one flat string; `+` would keep a rope of the parts.
    this.#byKey.set(key, records.length === 0 ? undefined : records.join(RECORD_SEPARATOR));
  }

  /** The character that starts the records of `kind`. */
  #tag(kind: ObjectKind): string {
    const index = this.#kinds.findIndex((known) => known.kind === kind.kind && known.apiVersion === kind.apiVersion);
    if (index < 0) throw new Error(`the object cache does not hold ${kind.apiVersion} ${kind.kind}`);
    return String.fromCharCode(FIRST_KIND + index);
  }

  /** Where the maps by location keep an object: its kind's tag, then "namespace/name". */
  #place(tag: string, namespace: string, name: string): string {
    return [tag, namespace, "/", name].join("");
  }

  #records(key: string): string[] {
    return this.#byKey.get(key)?.split(RECORD_SEPARATOR) ?? [];
  }

  /** The record (of the kind `tag`) at namespace/name, its key and all its key's records: kept by place, else under "<type>/<name>". */
  #find(tag: string, namespace: string, name: string): { key: string | undefined; record: string; records: string[] } | undefined {
    const place = this.#place(tag, namespace, name);
    const unkeyed = this.#unkeyed.get(place);
    if (unkeyed !== undefined) return { key: undefined, record: unkeyed, records: [unkeyed] };
    const renamed = this.#renamed.get(place);
    const at = place.slice(1);
    for (const key of renamed !== undefined ? [renamed] : RESOURCE_TYPE_NAMES.map((type) => `${type}/${name}`)) {
      const records = this.#records(key);
      const record = records.find((candidate) => candidate[0] === tag && recordLocation(candidate, key) === at);
      if (record !== undefined) return { key, record, records };
    }
    return undefined;
  }
}

function splitLocation(at: string): [string, string] {
  const slash = at.indexOf("/");
  return [at.slice(0, slash), at.slice(slash + 1)];
}

interface DeploymentSpec {
  replicas?: number;
  template?: { metadata?: { annotations?: Record<string, string> }; spec?: { containers?: { image?: string }[] } };
}

/** The status fields of a HorizontalPodAutoscaler the agent reports, and all the cache keeps of it. */
export interface AutoscalerStatus {
  currentReplicas?: number;
  desiredReplicas?: number;
}

/** The status fields of a Deployment the agent reads (observation.ts), and all the cache keeps of its status. */
export interface DeploymentStatus {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  readyReplicas?: number;
  availableReplicas?: number;
  conditions?: { type?: string; status?: string; reason?: string; message?: string }[];
}
