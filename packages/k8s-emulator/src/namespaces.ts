// A stand-in for the namespace controller (pkg/controller/namespace): once a
// namespace is Terminating it reports the deletion conditions, and after
// `delayMs` deletes everything in it, removes the `kubernetes` finalizer
// (the /finalize subresource upstream) and, with no finalizers left, the
// namespace itself. Conditions and messages follow
// namespaced_resources_deleter.go.
import { KINDS } from "./kinds/index.ts";
import { namespaces } from "./kinds/namespace.ts";
import type { Registry } from "./registry.ts";
import { resourceKey } from "./resources.ts";
import type { StoreEvent } from "./store.ts";
import { isObject, nowRfc3339, type KubeObject } from "./util.ts";

const FINALIZER = "kubernetes";

export class NamespaceController {
  private readonly registry: Registry;
  private readonly delayMs: number;
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** Namespaces whose delay passed while held: finalized on release. */
  private readonly due = new Set<string>();
  private held = false;
  private unsubscribe: (() => void) | undefined;

  constructor(registry: Registry, delayMs: number) {
    this.registry = registry;
    this.delayMs = delayMs;
  }

  start(): void {
    this.unsubscribe = this.registry.store.subscribe((e) => this.onEvent(e));
  }

  stop(): void {
    this.unsubscribe?.();
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.due.clear();
    this.held = false;
  }

  /**
   * Keeps Terminating namespaces (and their content) as they are until the returned release is
   * called, which finalizes those whose delay has passed: a test can then observe the
   * Terminating phase however slowly it runs.
   */
  hold(): () => void {
    this.held = true;
    return () => {
      this.held = false;
      for (const name of this.due) this.finalize(name);
      this.due.clear();
    };
  }

  private onEvent(e: StoreEvent): void {
    if (e.rt !== namespaces || e.type === "DELETED" || !e.object.metadata.deletionTimestamp) return;
    const name = e.object.metadata.name ?? "";
    if (this.timers.has(name)) return;
    // Asynchronous, like a controller: the DELETE is answered first.
    const timer = setTimeout(() => {
      this.timers.delete(name);
      if (this.held) this.due.add(name);
      else this.finalize(name);
    }, this.delayMs);
    timer.unref();
    this.timers.set(name, timer);
    setImmediate(() => this.reportConditions(name));
  }

  private current(name: string): KubeObject | undefined {
    return this.registry.store.get(namespaces, undefined, name);
  }

  private reportConditions(name: string): void {
    const ns = this.current(name);
    if (!ns?.metadata.deletionTimestamp) return;
    const remaining = KINDS.filter((rt) => rt.namespaced)
      .map((rt) => ({ key: resourceKey(rt), count: this.registry.store.list(rt, name).length }))
      .filter((r) => r.count > 0)
      .sort((a, b) => a.key.localeCompare(b.key))
      .map((r) => `${r.key} has ${r.count} resource instances`);
    const now = nowRfc3339();
    const condition = (type: string, status: string, reason: string, message: string) => ({ type, status, lastTransitionTime: now, reason, message });
    const conditions = [
      condition("NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered", "All resources successfully discovered"),
      condition("NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
      condition("NamespaceDeletionContentFailure", "False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
      remaining.length > 0
        ? condition("NamespaceContentRemaining", "True", "SomeResourcesRemain", `Some resources are remaining: ${remaining.join(", ")}`)
        : condition("NamespaceContentRemaining", "False", "ContentRemoved", "All content successfully removed"),
      condition("NamespaceFinalizersRemaining", "False", "ContentHasNoFinalizers", "All content-preserving finalizers have been removed"),
    ];
    const status = isObject(ns.status) ? ns.status : {};
    this.registry.writeStatus(namespaces, ns, { ...status, phase: "Terminating", conditions });
  }

  private finalize(name: string): void {
    // Only a namespace still being deleted is emptied (namespaced_resources_deleter.go Delete():
    // nothing to do without a deletionTimestamp): one deleted and created anew since keeps its content.
    const ns = this.current(name);
    if (!ns?.metadata.deletionTimestamp) return;
    this.registry.removeContent(name);
    const spec = isObject(ns.spec) ? ns.spec : {};
    const finalizers = (Array.isArray(spec.finalizers) ? spec.finalizers : []).filter((f) => f !== FINALIZER);
    if (finalizers.length > 0 || (ns.metadata.finalizers?.length ?? 0) > 0) {
      // Someone else's finalizer: leave the namespace Terminating until it is removed.
      this.registry.store.write(namespaces, { ...ns, spec: { ...spec, finalizers } });
      return;
    }
    this.registry.store.remove(namespaces, undefined, name);
  }
}
