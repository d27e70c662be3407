// A stand-in for the disruption controller (pkg/controller/disruption/disruption.go): keeps
// each PodDisruptionBudget's status computed from the pods its selector matches in its
// namespace, as trySync does:
// - a null or empty selector matches no pods;
// - healthy pods are the Ready ones not being deleted (countHealthyPods);
// - expected pods and desired healthy follow getExpectedPodCount: an integer minAvailable
//   expects the matching pods and wants that many healthy; a percentage minAvailable, or any
//   maxUnavailable, expects the scale of the pods' controllers (a ReplicaSet's Deployment's
//   replicas, else the ReplicaSet's), percentages rounded up; pods without a controller are
//   not counted;
// - disruptionsAllowed is currentHealthy - desiredHealthy, never below 0, and 0 with no
//   expected pods (updatePdbStatus), with the DisruptionAllowed condition
//   (SufficientPods / InsufficientPods).
// Recomputed a turn after any write of a pod, ReplicaSet, Deployment or budget in the
// namespace; written through the status subresource only when it changed.
import { labelSelectorFromObject } from "@flotilla/labels";
import { deployments } from "./kinds/deployment.ts";
import { podDisruptionBudgets } from "./kinds/poddisruptionbudget.ts";
import type { Registry } from "./registry.ts";
import type { StoreEvent } from "./store.ts";
import { isObject, nowRfc3339, type JsonObject, type KubeObject } from "./util.ts";
import { PODS, REPLICA_SETS } from "./workloads.ts";

const CONDITION = "DisruptionAllowed";

export class DisruptionController {
  private readonly registry: Registry;
  /** Namespaces whose budgets are recomputed on the next turn. */
  private readonly pending = new Set<string>();
  private timer: NodeJS.Immediate | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(registry: Registry) {
    this.registry = registry;
  }

  start(): void {
    this.unsubscribe = this.registry.store.subscribe((e) => this.onEvent(e));
  }

  stop(): void {
    this.unsubscribe?.();
    if (this.timer) clearImmediate(this.timer);
    this.timer = undefined;
    this.pending.clear();
  }

  /** Runs inside the store's write: only notes the namespace (writes go to a later turn). */
  private onEvent(e: StoreEvent): void {
    if (e.rt !== PODS && e.rt !== REPLICA_SETS && e.rt !== deployments && e.rt !== podDisruptionBudgets) return;
    const namespace = e.object.metadata.namespace;
    if (namespace === undefined) return;
    this.pending.add(namespace);
    this.timer ??= setImmediate(() => this.syncPending());
  }

  private syncPending(): void {
    this.timer = undefined;
    const namespaces = [...this.pending];
    this.pending.clear();
    for (const namespace of namespaces) {
      const budgets = this.registry.store.list(podDisruptionBudgets, namespace);
      if (budgets.length === 0) continue;
      const pods = this.registry.store.list(PODS, namespace);
      for (const budget of budgets) {
        if (budget.metadata.deletionTimestamp) continue;
        this.registry.writeStatus(podDisruptionBudgets, budget, this.status(budget, pods));
      }
    }
  }

  /** The budget's status from `pods` (its namespace's), keeping the condition's transition time while its status holds. */
  private status(budget: KubeObject, pods: KubeObject[]): JsonObject {
    const spec = (budget.spec ?? {}) as JsonObject;
    const matching = matchingPods(spec.selector, pods);
    const currentHealthy = matching.filter((pod) => !pod.metadata.deletionTimestamp && isReady(pod)).length;
    let expectedPods = 0;
    let desiredHealthy = 0;
    if (spec.maxUnavailable !== undefined) {
      expectedPods = this.expectedScale(budget.metadata.namespace!, matching);
      desiredHealthy = Math.max(0, expectedPods - scaled(spec.maxUnavailable, expectedPods));
    } else if (typeof spec.minAvailable === "number") {
      expectedPods = matching.length;
      desiredHealthy = spec.minAvailable;
    } else if (typeof spec.minAvailable === "string") {
      expectedPods = this.expectedScale(budget.metadata.namespace!, matching);
      desiredHealthy = scaled(spec.minAvailable, expectedPods);
    }
    const disruptionsAllowed = expectedPods > 0 ? Math.max(0, currentHealthy - desiredHealthy) : 0;
    const previous = ((budget.status as JsonObject | undefined)?.conditions as JsonObject[] | undefined)?.find((c) => c.type === CONDITION);
    const allowed = disruptionsAllowed > 0 ? "True" : "False";
    const condition = {
      type: CONDITION,
      status: allowed,
      lastTransitionTime: previous?.status === allowed ? previous.lastTransitionTime : nowRfc3339(),
      reason: disruptionsAllowed > 0 ? "SufficientPods" : "InsufficientPods",
      message: "",
    };
    return {
      observedGeneration: budget.metadata.generation ?? 1,
      disruptionsAllowed,
      currentHealthy,
      desiredHealthy,
      expectedPods,
      conditions: [condition],
    };
  }

  /** The replicas of the pods' controllers, each counted once (getExpectedScale). */
  private expectedScale(namespace: string, pods: KubeObject[]): number {
    const scales = new Map<string, number>();
    for (const pod of pods) {
      const owner = controllerOf(pod);
      if (owner?.kind !== "ReplicaSet") continue;
      const rs = this.registry.store.get(REPLICA_SETS, namespace, owner.name);
      if (!rs) continue;
      const deploymentOwner = controllerOf(rs);
      const deployment = deploymentOwner?.kind === "Deployment" ? this.registry.store.get(deployments, namespace, deploymentOwner.name) : undefined;
      const controller = deployment ?? rs;
      scales.set(controller.metadata.uid as string, replicasOf(controller));
    }
    return [...scales.values()].reduce((sum, n) => sum + n, 0);
  }
}

function matchingPods(selector: unknown, pods: KubeObject[]): KubeObject[] {
  if (!isObject(selector)) return [];
  const matchLabels = isObject(selector.matchLabels) ? selector.matchLabels : {};
  const matchExpressions = Array.isArray(selector.matchExpressions) ? selector.matchExpressions : [];
  if (Object.keys(matchLabels).length === 0 && matchExpressions.length === 0) return [];
  const matches = labelSelectorFromObject(selector as Parameters<typeof labelSelectorFromObject>[0]);
  return pods.filter((pod) => matches(pod.metadata.labels ?? {}));
}

function isReady(pod: KubeObject): boolean {
  const conditions = ((pod.status as JsonObject | undefined)?.conditions ?? []) as JsonObject[];
  return conditions.some((c) => c.type === "Ready" && c.status === "True");
}

function controllerOf(object: KubeObject): { kind: string; name: string } | undefined {
  const refs = (object.metadata.ownerReferences ?? []) as { kind: string; name: string; controller?: boolean }[];
  return refs.find((ref) => ref.controller);
}

function replicasOf(controller: KubeObject): number {
  const replicas = ((controller.spec ?? {}) as JsonObject).replicas;
  return typeof replicas === "number" ? replicas : 1;
}

/** GetScaledValueFromIntOrPercent(value, total, roundUp=true). */
function scaled(value: unknown, total: number): number {
  if (typeof value === "number") return value;
  const percent = Number(String(value).slice(0, -1));
  return Math.ceil((percent * total) / 100);
}
