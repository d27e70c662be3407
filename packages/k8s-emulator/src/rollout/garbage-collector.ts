// The garbage collector of the rollout model: a deleted Deployment's ReplicaSets and their pods
// deleted after it, or only released with propagationPolicy Orphan, and a deleted ReplicaSet's
// pods deleted. A dependent names its owner in its controller reference.
import type { Registry } from "../registry.ts";
import type { JsonObject, KubeObject } from "../util.ts";
import { PODS, REPLICA_SETS } from "../workloads.ts";
import type { Pod } from "./pods.ts";
import type { ReplicaSet } from "./replicaset-controller.ts";

/** The name of `object`'s controller of `kind` (its ownerReference with controller: true). */
export function controllerOf(object: KubeObject, kind: string): string | undefined {
  const refs = object.metadata.ownerReferences;
  const ref = Array.isArray(refs) ? (refs as JsonObject[]).find((r) => r.controller === true && r.kind === kind) : undefined;
  return typeof ref?.name === "string" ? ref.name : undefined;
}

export class GarbageCollector {
  private readonly registry: Registry;

  constructor(registry: Registry) {
    this.registry = registry;
  }

  /**
   * A deleted Deployment's dependents: deletes its ReplicaSets and their pods, or with `orphan`
   * removes the owner reference from the ReplicaSets (pods stay theirs).
   */
  collect(namespace: string, sets: ReplicaSet[], orphan: boolean): void {
    const { store } = this.registry;
    for (const rs of sets) {
      if (orphan) {
        const object = store.get(REPLICA_SETS, namespace, rs.name);
        if (object) {
          delete object.metadata.ownerReferences;
          this.registry.put(object);
        }
        continue;
      }
      this.deletePods(namespace, rs.pods);
      store.remove(REPLICA_SETS, namespace, rs.name);
    }
  }

  deletePods(namespace: string, pods: Pod[]): void {
    for (const pod of pods) this.registry.store.remove(PODS, namespace, pod.name);
  }
}
