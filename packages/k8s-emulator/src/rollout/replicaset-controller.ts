// The ReplicaSet controller of the rollout model: each ReplicaSet's pods created or deleted to
// match its replicas (the unready deleted first), with addresses from the pod CIDR, and a
// deleted pod's object removed with its Event.
import type { Registry } from "../registry.ts";
import { randomSuffix, type KubeObject } from "../util.ts";
import { PODS, type EventRecorder } from "../workloads.ts";
import type { Pod } from "./pods.ts";

export interface ReplicaSet {
  hash: string;
  name: string;
  revision: number;
  /** spec.replicas of the ReplicaSet. */
  replicas: number;
  pods: Pod[];
  /** Replicas, revision and counts its object shows ("" until it exists). */
  published: string;
  /** spec.replicas its object shows. */
  publishedReplicas: number;
}

export function readyPods(rs: ReplicaSet, now: number): number {
  return rs.pods.filter((p) => p.readyAt <= now).length;
}

export class ReplicaSetController {
  private readonly registry: Registry;
  private readonly events: EventRecorder;
  /** Pod IPs from 10.244.0.0 on, as a cluster's pod CIDR hands them out. */
  private nextPodIp = (244 << 16) + 2;

  constructor(registry: Registry, events: EventRecorder) {
    this.registry = registry;
    this.events = events;
  }

  /**
   * Creates or deletes pods to match replicas, deleting unready pods first; a new pod is ready
   * `readyAfterMs` after its creation (Infinity: never), or is held until release. Returns the deleted.
   */
  syncPods(rs: ReplicaSet, readyAfterMs: number, now: number, held: boolean): Pod[] {
    while (rs.pods.length < rs.replicas) {
      const n = this.nextPodIp++;
      const pod = { name: `${rs.name}-${randomSuffix(5)}`, ip: `10.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}` };
      rs.pods.push(
        readyAfterMs === Infinity ? { ...pod, readyAt: Infinity } : held ? { ...pod, readyAt: Infinity, held: true } : { ...pod, readyAt: now + readyAfterMs },
      );
    }
    if (rs.pods.length <= rs.replicas) return [];
    rs.pods.sort((a, b) => b.readyAt - a.readyAt);
    return rs.pods.splice(0, rs.pods.length - rs.replicas);
  }

  /** Removes a pod's object; its ReplicaSet's object, when there is one, gets the SuccessfulDelete Event. */
  deletePod(replicaSet: KubeObject | undefined, pod: Pod, namespace: string): void {
    if (this.registry.store.remove(PODS, namespace, pod.name) && replicaSet) {
      this.events.record(replicaSet, "Normal", "SuccessfulDelete", `Deleted pod: ${pod.name}`, "replicaset-controller");
    }
  }
}
