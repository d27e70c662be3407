// The object store: what etcd is to the real API server. It owns the global
// resourceVersion counter (bumped on every write, shared by all resources, as
// etcd's revision is) and a bounded history of events that watches can resume
// from.
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

function key(namespace: string | undefined, name: string): string {
  return `${namespace ?? ""}/${name}`;
}

export class ObjectStore {
  private rv = 0;
  private readonly objects = new Map<ResourceType, Map<string, KubeObject>>();
  private history: StoreEvent[] = [];
  /** Events at or below this resourceVersion are no longer in the history. */
  private compactedRv = 0;
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
    const out: KubeObject[] = [];
    const keys = [...this.bucket(rt).keys()].sort();
    for (const k of keys) {
      const obj = this.bucket(rt).get(k)!;
      if (namespace === undefined || obj.metadata.namespace === namespace) out.push(clone(obj));
    }
    return out;
  }

  /** Creates or replaces an object, assigning the next resourceVersion. */
  write(rt: ResourceType, obj: KubeObject): KubeObject {
    const k = key(obj.metadata.namespace, obj.metadata.name ?? "");
    const previous = this.bucket(rt).get(k);
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
    const last = clone(previous);
    last.metadata.resourceVersion = String(++this.rv);
    this.emit({ type: "DELETED", rt, object: last, previous, rv: this.rv });
    return clone(last);
  }

  /** Events after `rv`, or 'expired' when some of them have been dropped from the history. */
  eventsSince(rv: number): StoreEvent[] | "expired" {
    if (rv < this.compactedRv) return "expired";
    return this.history.filter((e) => e.rv > rv);
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Drops every object and the history; resourceVersions keep increasing, so old ones become expired. */
  reset(): void {
    this.objects.clear();
    this.history = [];
    this.compactedRv = this.rv;
  }

  private emit(event: StoreEvent): void {
    this.history.push(event);
    if (this.history.length > this.historyLimit) {
      const dropped = this.history.splice(0, this.history.length - this.historyLimit);
      this.compactedRv = dropped[dropped.length - 1].rv;
    }
    for (const l of [...this.listeners]) l(event);
  }
}
