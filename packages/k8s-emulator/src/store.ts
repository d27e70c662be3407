// The object store: what etcd is to the real API server. It owns the global
// resourceVersion counter (bumped on every write, shared by all resources, as
// etcd's revision is) and, per resource type, a bounded history of events that
// watches can resume from (the API server's watch cache is per resource, so
// churn of pods or events does not expire a watch of deployments).
import type { ResourceType } from "./resources.ts";
import { clone, type KubeObject } from "./util.ts";

export type EventType = "ADDED" | "MODIFIED" | "DELETED";

export interface StoreEvent {
  type: EventType;
  rt: ResourceType;
  /** The object after the change (for DELETED: the last state, with the deletion's resourceVersion). */
  object: KubeObject;
  /** The object before the change, for MODIFIED/DELETED; used to filter watches by selector. */
  previous?: KubeObject;
  rv: number;
}

export type Listener = (event: StoreEvent) => void;

const METADATA_ORDER = [
  "name",
  "generateName",
  "namespace",
  "uid",
  "resourceVersion",
  "generation",
  "creationTimestamp",
  "deletionTimestamp",
  "deletionGracePeriodSeconds",
  "labels",
  "annotations",
  "ownerReferences",
  "finalizers",
  "managedFields",
];

/**
 * Field order as the real server serializes (Go struct order): apiVersion,
 * kind, metadata, then the rest, with metadata fields in ObjectMeta order.
 * Purely cosmetic, but makes dumps read like real ones.
 */
function normalize(obj: KubeObject): KubeObject {
  const meta: Record<string, unknown> = {};
  for (const k of METADATA_ORDER) if (obj.metadata[k] !== undefined) meta[k] = obj.metadata[k];
  for (const [k, v] of Object.entries(obj.metadata)) if (!(k in meta) && v !== undefined) meta[k] = v;
  const { apiVersion, kind, metadata: _m, ...rest } = obj;
  return { apiVersion, kind, metadata: meta as KubeObject["metadata"], ...rest };
}

export interface PageOptions {
  namespace?: string;
  /** Start after this key (`namespace/name`; cluster-scoped: `/name`). */
  after?: string;
  /** Reads the stored object: it must not change it. */
  filter?: (obj: KubeObject) => boolean;
  limit?: number;
}

/** The index of the first of the sorted `keys` greater than `key`. */
function upperBound(keys: readonly string[], key: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (keys[mid] <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function key(namespace: string | undefined, name: string): string {
  return `${namespace ?? ""}/${name}`;
}

export class ObjectStore {
  private rv = 0;
  private readonly objects = new Map<ResourceType, Map<string, KubeObject>>();
  /** Each bucket's keys in order, while no key was added or removed since. */
  private readonly keyOrder = new Map<ResourceType, string[]>();
  private readonly history = new Map<ResourceType, { events: StoreEvent[]; compactedRv: number }>();
  /** Every type's events at or below this resourceVersion are gone (reset). */
  private resetRv = 0;
  private readonly listeners = new Set<Listener>();
  private readonly historyLimit: number;

  constructor(historyLimit: number) {
    this.historyLimit = Math.max(1, historyLimit);
  }

  get resourceVersion(): number {
    return this.rv;
  }

  private bucket(rt: ResourceType): Map<string, KubeObject> {
    let b = this.objects.get(rt);
    if (!b) {
      b = new Map();
      this.objects.set(rt, b);
    }
    return b;
  }

  get(rt: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined {
    const obj = this.bucket(rt).get(key(rt.namespaced ? namespace : undefined, name));
    return obj && clone(obj);
  }

  /** Objects of a type, optionally in one namespace, in etcd key order (namespace, then name). */
  list(rt: ResourceType, namespace?: string): KubeObject[] {
    return this.page(rt, { namespace }).items;
  }

  /**
   * One page of a list: the objects (optionally in one namespace) that `filter` accepts, in key
   * order after the object at `after` (`namespace/name`), at most `limit` of them, and how many
   * more match. Only the returned objects are copied, so paging through 100,000 objects costs
   * one copy per object, not one per object per page.
   */
  page(rt: ResourceType, options: PageOptions): { items: KubeObject[]; remaining: number } {
    const { namespace, after = "", filter, limit = Infinity } = options;
    const bucket = this.bucket(rt);
    const keys = this.sortedKeys(rt, bucket);
    const items: KubeObject[] = [];
    let remaining = 0;
    for (let i = after === "" ? 0 : upperBound(keys, after); i < keys.length; i++) {
      const obj = bucket.get(keys[i])!;
      if (namespace !== undefined && obj.metadata.namespace !== namespace) continue;
      if (filter && !filter(obj)) continue;
      if (items.length < limit) items.push(clone(obj));
      else remaining++;
    }
    return { items, remaining };
  }

  /** A bucket's keys in order, kept until a key is added or removed (a modification keeps them). */
  private sortedKeys(rt: ResourceType, bucket: Map<string, KubeObject>): string[] {
    let keys = this.keyOrder.get(rt);
    if (!keys) {
      keys = [...bucket.keys()].sort();
      this.keyOrder.set(rt, keys);
    }
    return keys;
  }

  /** Creates or replaces an object, assigning the next resourceVersion. */
  write(rt: ResourceType, obj: KubeObject): KubeObject {
    const k = key(obj.metadata.namespace, obj.metadata.name ?? "");
    const previous = this.bucket(rt).get(k);
    if (!previous) this.keyOrder.delete(rt);
    const copy = clone(obj);
    copy.metadata.resourceVersion = String(++this.rv);
    const stored = normalize(copy);
    this.bucket(rt).set(k, stored);
    this.emit({ type: previous ? "MODIFIED" : "ADDED", rt, object: stored, previous, rv: this.rv });
    return clone(stored);
  }

  /** Removes an object; the DELETED event carries a fresh resourceVersion, as with etcd. */
  remove(rt: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined {
    const k = key(rt.namespaced ? namespace : undefined, name);
    const previous = this.bucket(rt).get(k);
    if (!previous) return undefined;
    this.bucket(rt).delete(k);
    this.keyOrder.delete(rt);
    const last = clone(previous);
    last.metadata.resourceVersion = String(++this.rv);
    this.emit({ type: "DELETED", rt, object: last, previous, rv: this.rv });
    return clone(last);
  }

  /** Events of a type after `rv`, or 'expired' when some of them have been dropped from its history. */
  eventsSince(rt: ResourceType, rv: number): StoreEvent[] | "expired" {
    const h = this.history.get(rt);
    if (rv < Math.max(this.resetRv, h?.compactedRv ?? 0)) return "expired";
    return h ? h.events.filter((e) => e.rv > rv) : [];
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Drops every object and the history; resourceVersions keep increasing, so old ones become expired. */
  reset(): void {
    this.objects.clear();
    this.keyOrder.clear();
    this.forgetHistory();
  }

  /**
   * Drops the history, keeping the objects, as a restarted API server's watch cache starts from a
   * list at the current resourceVersion: a watch from an older one is expired (410).
   */
  forgetHistory(): void {
    this.history.clear();
    this.resetRv = this.rv;
  }

  private emit(event: StoreEvent): void {
    let h = this.history.get(event.rt);
    if (!h) {
      h = { events: [], compactedRv: 0 };
      this.history.set(event.rt, h);
    }
    h.events.push(event);
    if (h.events.length > this.historyLimit) {
      const dropped = h.events.splice(0, h.events.length - this.historyLimit);
      h.compactedRv = dropped[dropped.length - 1].rv;
    }
    for (const l of [...this.listeners]) l(event);
  }
}
