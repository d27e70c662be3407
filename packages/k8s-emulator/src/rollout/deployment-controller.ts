// A stand-in for the deployment controller. Per Deployment it models ReplicaSets (one per pod
// template, with revision numbers) and their pods in memory, run by the ReplicaSet controller
// (replicaset-controller.ts) and the kubelet (pods.ts) and collected by the garbage collector
// (garbage-collector.ts), and publishes them as ReplicaSet and Pod objects with Events
// (workloads.ts), so `kubectl get pods`, `rollout history` and `rollout undo` work. Each
// reconcile follows the real controllers:
// - rolling updates scale the new ReplicaSet up within maxSurge and old ones
//   down within maxUnavailable (pkg/controller/deployment/rolling.go:
//   reconcileNewReplicaSet, reconcileOldReplicaSets, cleanupUnhealthyReplicas;
//   fenceposts from deployment/util ResolveFenceposts); Recreate scales old
//   ReplicaSets to zero first (recreate.go);
// - a scaled-down pod leaves the counts at once: ReplicaSet status counts only
//   pods without a deletionTimestamp (replica_set_utils.go), so
//   status.replicas includes old pods until their deletion starts;
// - status and conditions as in sync.go calculateStatus and progress.go
//   syncRolloutStatus: Available (MinimumReplicasAvailable/Unavailable),
//   Progressing (NewReplicaSetCreated, ReplicaSetUpdated on progress,
//   NewReplicaSetAvailable when complete, ProgressDeadlineExceeded when no
//   progress for spec.progressDeadlineSeconds); zero counts are omitted
//   (omitempty).
// A second of progressDeadlineSeconds lasts `deadlineSecondMs`, so tests can
// run a 600 s deadline in a fraction of a second. Paused deployments and
// minReadySeconds are not modelled (available = ready).
// Status goes through the status subresource, so each change bumps the
// resourceVersion and reaches watches as MODIFIED. Old ReplicaSets beyond
// spec.revisionHistoryLimit are deleted once a rollout completes (sync.go
// cleanupDeployment). A deleted Deployment's ReplicaSets and pods are deleted
// after it, or only released with propagationPolicy Orphan (the garbage
// collector); a pod or ReplicaSet deleted by someone else is replaced, and one
// scaled by someone else gets its pods, then is scaled back (sync.go: the deployment
// controller owns its ReplicaSets' replicas).
import type { Registry } from "../registry.ts";
import { KINDS } from "../kinds/index.ts";
import type { StoreEvent } from "../store.ts";
import { isObject, nowRfc3339, type JsonObject, type KubeObject } from "../util.ts";
import { EventRecorder, PODS, copiedAnnotations, REPLICA_SETS, REVISION, replicaSetFor, replicaSetStatus, spec, templateHash } from "../workloads.ts";
import { WorkQueue } from "../work-queue.ts";
import { GarbageCollector, controllerOf } from "./garbage-collector.ts";
import { PodPublisher, podState, readyAfterMs, type Pod } from "./pods.ts";
import { ReplicaSetController, readyPods, type ReplicaSet } from "./replicaset-controller.ts";

const DEPLOYMENTS = KINDS.find((rt) => rt.kind === "Deployment")!;
/** Bound on scale steps per reconcile (each step changes at least one ReplicaSet). */
const MAX_STEPS = 1000;

export interface RolloutOptions {
  /** Time from a pod's creation until it is ready. */
  podReadyDelayMs: number;
  /** Length of one second of spec.progressDeadlineSeconds, in ms. */
  deadlineSecondMs: number;
  failingImage: RegExp;
  /** Events kept (EventRecorder). */
  eventLimit: number;
}

interface Condition {
  type: string;
  status: "True" | "False";
  reason: string;
  message: string;
  lastUpdateTime: string;
  lastTransitionTime: string;
}

interface DeploymentState {
  namespace: string;
  sets: ReplicaSet[];
  /** When the rollout last made progress (the Progressing condition's lastUpdateTime, in ms). */
  lastProgressAt: number;
  timer?: NodeJS.Timeout;
  /** Being deleted with propagationPolicy Orphan: its ReplicaSets are released, not deleted. */
  orphan?: boolean;
}

function statusOf(d: KubeObject): JsonObject {
  return isObject(d.status) ? d.status : {};
}

/** intstr.GetScaledValueFromIntOrPercent. */
function scaled(value: unknown, total: number, roundUp: boolean): number {
  if (typeof value === "number") return value;
  if (typeof value === "string" && value.endsWith("%")) {
    const exact = (Number(value.slice(0, -1)) * total) / 100;
    return roundUp ? Math.ceil(exact) : Math.floor(exact);
  }
  return 0;
}

/** deployment/util ResolveFenceposts: surge rounds up, unavailable down; both 0 means unavailable 1. */
function fenceposts(d: KubeObject, replicas: number): { surge: number; unavailable: number } {
  const strategy = isObject(spec(d).strategy) ? (spec(d).strategy as JsonObject) : {};
  const ru = isObject(strategy.rollingUpdate) ? strategy.rollingUpdate : {};
  const surge = scaled(ru.maxSurge ?? "25%", replicas, true);
  const unavailable = scaled(ru.maxUnavailable ?? "25%", replicas, false);
  return { surge, unavailable: surge === 0 && unavailable === 0 ? 1 : unavailable };
}

function isRecreate(d: KubeObject): boolean {
  const strategy = spec(d).strategy;
  return isObject(strategy) && strategy.type === "Recreate";
}

/** deployment/util MaxUnavailable. */
function maxUnavailable(d: KubeObject, replicas: number): number {
  if (isRecreate(d) || replicas === 0) return 0;
  return Math.min(fenceposts(d, replicas).unavailable, replicas);
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

export class DeploymentController {
  private readonly registry: Registry;
  private readonly opts: RolloutOptions;
  private readonly states = new Map<string, DeploymentState>();
  private readonly queue = new WorkQueue((key) => this.reconcile(key));
  private readonly events: EventRecorder;
  private readonly replicaSets: ReplicaSetController;
  private readonly pods: PodPublisher;
  private readonly collector: GarbageCollector;
  private held = false;
  private unsubscribe: (() => void) | undefined;

  constructor(registry: Registry, opts: RolloutOptions) {
    this.registry = registry;
    this.opts = opts;
    this.events = new EventRecorder(registry, opts.eventLimit);
    this.replicaSets = new ReplicaSetController(registry, this.events);
    this.pods = new PodPublisher(registry, this.events);
    this.collector = new GarbageCollector(registry);
  }

  start(): void {
    this.unsubscribe = this.registry.store.subscribe((e) => this.onEvent(e));
  }

  stop(): void {
    this.unsubscribe?.();
    for (const s of this.states.values()) clearTimeout(s.timer);
    this.states.clear();
    this.queue.clear();
    this.events.clear();
    this.held = false;
  }

  /**
   * Pods created until the returned release is called stay unready, and no progress deadline
   * passes meanwhile (as if the kubelets and the controller's clock were paused): a test can
   * then observe a rollout in progress however slowly it runs. On release, held pods become
   * ready after the usual delay and the deadlines start anew.
   */
  hold(): () => void {
    this.held = true;
    return () => {
      this.held = false;
      const now = performance.now();
      for (const [key, state] of this.states) {
        state.lastProgressAt = now;
        for (const pod of state.sets.flatMap((rs) => rs.pods)) {
          if (!pod.held) continue;
          pod.readyAt = now + this.opts.podReadyDelayMs;
          delete pod.held;
        }
        this.queue.add(key);
      }
    };
  }

  /** Runs inside the store's write: changes nothing there (writes go to later turns). */
  private onEvent(e: StoreEvent): void {
    if (e.type === "DELETED" && (e.rt === PODS || e.rt === REPLICA_SETS)) return this.onDependentDeleted(e.object);
    if (e.type === "MODIFIED" && e.rt === REPLICA_SETS) return this.onReplicaSetWritten(e.object);
    const key = `${e.object.metadata.namespace}/${e.object.metadata.name}`;
    if (e.rt !== DEPLOYMENTS) return;
    const state = this.states.get(key);
    if (e.type === "DELETED") {
      clearTimeout(state?.timer);
      this.states.delete(key);
      if (state) setImmediate(() => this.collector.collect(state.namespace, state.sets, state.orphan ?? false));
      return;
    }
    if (e.object.metadata.deletionTimestamp) {
      if (state && e.object.metadata.finalizers?.includes("orphan")) state.orphan = true;
      return;
    }
    this.queue.add(key);
  }

  /**
   * A published pod or ReplicaSet deleted by someone else: the model forgets it and the next
   * reconcile replaces it. Its Deployment is found through the controller references (pod →
   * ReplicaSet → Deployment); one this controller deleted is no longer in the model, and an
   * orphaned ReplicaSet has no controller.
   */
  private onDependentDeleted(object: KubeObject): void {
    const namespace = object.metadata.namespace ?? "";
    const isPod = object.kind === "Pod";
    const model = this.modelOf(isPod ? this.registry.store.get(REPLICA_SETS, namespace, controllerOf(object, "ReplicaSet") ?? "") : object);
    if (!model) return;
    const { key, state, rs } = model;
    if (isPod) {
      const before = rs.pods.length;
      rs.pods = rs.pods.filter((p) => p.name !== object.metadata.name);
      if (rs.pods.length === before) return;
    } else {
      state.sets = state.sets.filter((s) => s !== rs);
      // The garbage collector deletes the pods of a deleted ReplicaSet.
      setImmediate(() => this.collector.deletePods(namespace, rs.pods));
    }
    this.queue.add(key);
  }

  /**
   * A ReplicaSet of a Deployment whose spec.replicas someone else changed (`kubectl scale rs`):
   * the model takes the new count, so the next reconcile lets the ReplicaSet controller create
   * or delete pods to match it, and then the deployment controller's sync scales the ReplicaSet
   * back to what the rollout wants (rolling.go reconcileNewReplicaSet and
   * reconcileOldReplicaSets, recreate.go), as upstream, where both controllers watch it. The
   * controller's own writes show the model's count.
   */
  private onReplicaSetWritten(object: KubeObject): void {
    const model = this.modelOf(object);
    const replicas = Number(spec(object).replicas ?? 1);
    if (!model || replicas === model.rs.replicas) return;
    model.rs.replicas = replicas;
    // Not this controller's scaling: no ScalingReplicaSet event for it.
    model.rs.publishedReplicas = replicas;
    this.queue.add(model.key);
  }

  /** The model of a ReplicaSet object, found through its controller reference; none for one this controller no longer has. */
  private modelOf(replicaSet: KubeObject | undefined): { key: string; state: DeploymentState; rs: ReplicaSet } | undefined {
    const deployment = replicaSet && controllerOf(replicaSet, "Deployment");
    if (!replicaSet || deployment === undefined) return undefined;
    const key = `${replicaSet.metadata.namespace}/${deployment}`;
    const state = this.states.get(key);
    const rs = state?.sets.find((s) => s.name === replicaSet.metadata.name);
    return state && rs && { key, state, rs };
  }

  private reconcile(key: string): void {
    const [ns, name] = key.split("/");
    const d = this.registry.store.get(DEPLOYMENTS, ns, name);
    if (!d) return;
    const now = performance.now();
    let state = this.states.get(key);
    if (!state) {
      state = { namespace: ns, sets: [], lastProgressAt: now };
      this.states.set(key, state);
    }
    clearTimeout(state.timer);
    const conditions = (Array.isArray(statusOf(d).conditions) ? (statusOf(d).conditions as Condition[]) : []).map((c) => ({ ...c }));
    const newRS = this.newReplicaSet(d, state, conditions, now);
    const replicas = Number(spec(d).replicas ?? 1);
    const newPodsReadyAfterMs = readyAfterMs(d, this.opts.podReadyDelayMs, this.opts.failingImage);
    const removed: [ReplicaSet, Pod][] = [];
    const syncAll = () => {
      for (const rs of state.sets) {
        const delay = rs !== newRS ? this.opts.podReadyDelayMs : newPodsReadyAfterMs;
        for (const pod of this.replicaSets.syncPods(rs, delay, now, this.held)) removed.push([rs, pod]);
      }
    };
    // The ReplicaSet controller first: pods for a ReplicaSet scaled by hand, or in place of
    // deleted ones, are published before this controller's sync scales anything.
    syncAll();
    if (removed.length > 0 || state.sets.some((rs) => rs.pods.some((p) => p.published === undefined))) {
      this.publish(d, state, newRS, removed, now);
      removed.length = 0;
    }
    for (let i = 0; i < MAX_STEPS; i++) {
      const changed = isRecreate(d) ? this.stepRecreate(state, newRS, replicas) : this.stepRolling(d, state, newRS, replicas, now);
      syncAll();
      if (!changed) break;
    }
    const status = this.status(d, state, newRS, replicas, conditions, now);
    // The ReplicaSets and pods first: a Deployment's status that says complete is the last write of its rollout.
    this.publish(d, state, newRS, removed, now);
    const complete = (status.conditions as Condition[]).some((c) => c.type === "Progressing" && c.reason === "NewReplicaSetAvailable");
    if (complete) this.cleanupHistory(d, state, newRS);
    this.registry.writeStatus(DEPLOYMENTS, d, status, { [REVISION]: String(newRS.revision) });
    this.scheduleNext(key, d, state, status, now);
  }

  /**
   * Makes the objects show the model: each ReplicaSet whose replicas, revision or counts
   * changed, each new, ready or removed pod, with the Events the controllers and the kubelet
   * record for them. The new ReplicaSet carries the Deployment's current annotations.
   */
  private publish(d: KubeObject, state: DeploymentState, newRS: ReplicaSet, removed: [ReplicaSet, Pod][], now: number): void {
    const { store } = this.registry;
    const ns = state.namespace;
    const replicas = Number(spec(d).replicas ?? 1);
    const maxReplicas = replicas + (isRecreate(d) ? 0 : fenceposts(d, replicas).surge);
    for (const rs of state.sets) {
      const counts = { replicas: rs.replicas, pods: rs.pods.length, ready: readyPods(rs, now) };
      // The new ReplicaSet follows the Deployment's annotations too (SetNewReplicaSetAnnotations), e.g. a change-cause.
      const annotations = rs === newRS ? JSON.stringify(copiedAnnotations(d)) : "";
      const signature = `${counts.replicas}/${rs.revision}/${counts.pods}/${counts.ready}/${annotations}`;
      let object: KubeObject | undefined;
      if (signature !== rs.published) {
        const existing = rs.published === "" ? undefined : store.get(REPLICA_SETS, ns, rs.name);
        // The new ReplicaSet is written whole; an old one keeps its annotations but its revision.
        object = rs === newRS || !existing ? replicaSetFor(d, rs.name, rs.hash, rs.revision, maxReplicas, counts) : existing;
        if (existing) object.spec = { ...(existing.spec as JsonObject), replicas: rs.replicas };
        if (object === existing) {
          object.status = replicaSetStatus(counts);
          object.metadata.annotations = { ...existing.metadata.annotations, [REVISION]: String(rs.revision) };
        }
        object = this.registry.put(object);
        if (rs.replicas !== rs.publishedReplicas) {
          const direction = rs.replicas > rs.publishedReplicas ? "up" : "down";
          this.events.record(
            d,
            "Normal",
            "ScalingReplicaSet",
            `Scaled ${direction} replica set ${rs.name} from ${rs.publishedReplicas} to ${rs.replicas}`,
            "deployment-controller",
          );
        }
        rs.published = signature;
        rs.publishedReplicas = rs.replicas;
      }
      for (const [from, pod] of removed) {
        if (from !== rs || pod.published === undefined) continue;
        object ??= store.get(REPLICA_SETS, ns, rs.name);
        this.replicaSets.deletePod(object, pod, ns);
      }
      for (const pod of rs.pods) {
        const shown = podState(pod, now);
        if (pod.published === shown) continue;
        object ??= store.get(REPLICA_SETS, ns, rs.name);
        if (!object) break;
        this.pods.publish(object, pod, shown);
      }
    }
  }

  /** sync.go cleanupDeployment: old ReplicaSets without replicas beyond spec.revisionHistoryLimit (default 10) go, oldest first. */
  private cleanupHistory(d: KubeObject, state: DeploymentState, newRS: ReplicaSet): void {
    const limit = Number(spec(d).revisionHistoryLimit ?? 10);
    const idle = state.sets.filter((rs) => rs !== newRS && rs.replicas === 0 && rs.pods.length === 0).sort((a, b) => a.revision - b.revision);
    const excess = idle.slice(0, Math.max(0, idle.length - limit));
    if (excess.length === 0) return;
    state.sets = state.sets.filter((rs) => !excess.includes(rs));
    this.collector.collect(state.namespace, excess, false);
  }

  /** The ReplicaSet of the current template, created (with the next revision) when missing. */
  private newReplicaSet(d: KubeObject, state: DeploymentState, conditions: Condition[], now: number): ReplicaSet {
    const hash = templateHash(spec(d).template);
    const maxRevision = Math.max(0, Number(d.metadata.annotations?.[REVISION] ?? 0) || 0, ...state.sets.map((s) => s.revision));
    let rs = state.sets.find((s) => s.hash === hash);
    if (rs) {
      // Rolling back to an older template gives its ReplicaSet the next revision.
      if (rs.revision < maxRevision && state.sets.some((s) => s !== rs && s.revision === maxRevision)) rs.revision = maxRevision + 1;
      return rs;
    }
    rs = { hash, name: `${d.metadata.name}-${hash}`, revision: maxRevision + 1, replicas: 0, pods: [], published: "", publishedReplicas: 0 };
    state.sets.push(rs);
    setCondition(conditions, { type: "Progressing", status: "True", reason: "NewReplicaSetCreated", message: `Created new replica set "${rs.name}"` });
    state.lastProgressAt = now;
    return rs;
  }

  /** One round of reconcileNewReplicaSet + reconcileOldReplicaSets; true when a ReplicaSet was scaled. */
  private stepRolling(d: KubeObject, state: DeploymentState, newRS: ReplicaSet, replicas: number, now: number): boolean {
    const { surge, unavailable } = fenceposts(d, replicas);
    const old = state.sets.filter((s) => s !== newRS).sort((a, b) => a.revision - b.revision);
    const total = sum(state.sets.map((s) => s.replicas));
    let changed = false;
    if (newRS.replicas > replicas) {
      newRS.replicas = replicas;
      changed = true;
    } else if (newRS.replicas < replicas && total < replicas + surge) {
      newRS.replicas += Math.min(replicas + surge - total, replicas - newRS.replicas);
      changed = true;
    }
    if (sum(old.map((s) => s.replicas)) === 0) return changed;
    const minAvailable = replicas - Math.min(unavailable, replicas);
    const allPods = sum(state.sets.map((s) => s.replicas));
    const newUnavailable = newRS.replicas - readyPods(newRS, now);
    // cleanupUnhealthyReplicas: old pods that are not available go first.
    let budget = allPods - minAvailable - newUnavailable;
    for (const rs of old) {
      if (budget <= 0) break;
      const unhealthy = rs.replicas - readyPods(rs, now);
      const down = Math.min(budget, unhealthy);
      if (down > 0) {
        rs.replicas -= down;
        budget -= down;
        changed = true;
      }
    }
    // scaleDownOldReplicaSetsForRollingUpdate: keep minAvailable available pods.
    const available = sum(state.sets.map((s) => Math.min(readyPods(s, now), s.replicas)));
    let excess = available - minAvailable;
    for (const rs of old) {
      if (excess <= 0) break;
      const down = Math.min(rs.replicas, excess);
      if (down > 0) {
        rs.replicas -= down;
        excess -= down;
        changed = true;
      }
    }
    return changed;
  }

  private stepRecreate(state: DeploymentState, newRS: ReplicaSet, replicas: number): boolean {
    let changed = false;
    for (const rs of state.sets) {
      if (rs !== newRS && rs.replicas > 0) {
        rs.replicas = 0;
        changed = true;
      }
    }
    if (newRS.replicas !== replicas) {
      newRS.replicas = replicas;
      changed = true;
    }
    return changed;
  }

  private status(d: KubeObject, state: DeploymentState, newRS: ReplicaSet, replicas: number, conditions: Condition[], now: number): JsonObject {
    const previous = statusOf(d);
    const counts = {
      replicas: sum(state.sets.map((s) => s.pods.length)),
      updatedReplicas: newRS.pods.length,
      readyReplicas: sum(state.sets.map((s) => readyPods(s, now))),
    };
    const availableReplicas = counts.readyReplicas;
    const unavailableReplicas = Math.max(0, replicas - availableReplicas);
    setCondition(
      conditions,
      availableReplicas >= replicas - maxUnavailable(d, replicas)
        ? { type: "Available", status: "True", reason: "MinimumReplicasAvailable", message: "Deployment has minimum availability." }
        : { type: "Available", status: "False", reason: "MinimumReplicasUnavailable", message: "Deployment does not have minimum availability." },
    );

    const progressing = conditions.find((c) => c.type === "Progressing");
    const complete = counts.updatedReplicas === replicas && counts.replicas === replicas && availableReplicas === replicas;
    const oldReplicas = (s: { replicas?: unknown; updatedReplicas?: unknown }) => Number(s.replicas ?? 0) - Number(s.updatedReplicas ?? 0);
    const progressed =
      counts.updatedReplicas > Number(previous.updatedReplicas ?? 0) ||
      oldReplicas(counts) < oldReplicas(previous) ||
      counts.readyReplicas > Number(previous.readyReplicas ?? 0) ||
      availableReplicas > Number(previous.availableReplicas ?? 0);
    if (complete) {
      setCondition(conditions, {
        type: "Progressing",
        status: "True",
        reason: "NewReplicaSetAvailable",
        message: `ReplicaSet "${newRS.name}" has successfully progressed.`,
      });
    } else if (progressed) {
      // Progress refreshes lastUpdateTime even with an unchanged reason (progress.go).
      const stamp = nowRfc3339();
      const keepTransition = progressing?.status === "True" ? progressing.lastTransitionTime : stamp;
      removeCondition(conditions, "Progressing");
      conditions.push({
        type: "Progressing",
        status: "True",
        reason: "ReplicaSetUpdated",
        message: `ReplicaSet "${newRS.name}" is progressing.`,
        lastUpdateTime: stamp,
        lastTransitionTime: keepTransition,
      });
      state.lastProgressAt = now;
    } else if (
      !this.held &&
      // DeploymentTimedOut (pkg/controller/deployment/util/deployment_util.go): a rollout whose
      // Progressing reason is still NewReplicaSetAvailable (a rollback to an existing ReplicaSet
      // before its first progress) has not started its deadline.
      progressing?.reason !== "NewReplicaSetAvailable" &&
      progressing?.reason !== "ProgressDeadlineExceeded" &&
      now - state.lastProgressAt >= this.deadlineMs(d)
    ) {
      setCondition(conditions, {
        type: "Progressing",
        status: "False",
        reason: "ProgressDeadlineExceeded",
        message: `ReplicaSet "${newRS.name}" has timed out progressing.`,
      });
    }
    const status: JsonObject = { observedGeneration: d.metadata.generation ?? 1 };
    // DeploymentStatus counts are omitempty: zeros are not stored.
    for (const [k, v] of Object.entries({ ...counts, availableReplicas, unavailableReplicas })) if (v !== 0) status[k] = v;
    status.conditions = conditions;
    return status;
  }

  private deadlineMs(d: KubeObject): number {
    return Number(spec(d).progressDeadlineSeconds ?? 600) * this.opts.deadlineSecondMs;
  }

  /** Wakes up when the next pod becomes ready or the progress deadline passes. */
  private scheduleNext(key: string, d: KubeObject, state: DeploymentState, status: JsonObject, now: number): void {
    const times = state.sets.flatMap((s) => s.pods.map((p) => p.readyAt)).filter((t) => t > now && Number.isFinite(t));
    const progressing = (status.conditions as Condition[]).find((c) => c.type === "Progressing");
    if (!this.held && progressing && progressing.reason !== "NewReplicaSetAvailable" && progressing.reason !== "ProgressDeadlineExceeded") {
      times.push(state.lastProgressAt + this.deadlineMs(d));
    }
    if (times.length === 0) return;
    const timer = setTimeout(() => this.queue.add(key), Math.max(0, Math.min(...times) - now));
    timer.unref();
    state.timer = timer;
  }
}

function removeCondition(conditions: Condition[], type: string): void {
  const i = conditions.findIndex((c) => c.type === type);
  if (i >= 0) conditions.splice(i, 1);
}

/**
 * deployment/util SetDeploymentCondition: nothing changes when status and
 * reason are the same; otherwise the condition moves to the end, keeping
 * lastTransitionTime when only the reason changed.
 */
function setCondition(conditions: Condition[], next: Omit<Condition, "lastUpdateTime" | "lastTransitionTime">): void {
  const current = conditions.find((c) => c.type === next.type);
  if (current && current.status === next.status && current.reason === next.reason) return;
  const stamp = nowRfc3339();
  removeCondition(conditions, next.type);
  conditions.push({ ...next, lastUpdateTime: stamp, lastTransitionTime: current?.status === next.status ? current.lastTransitionTime : stamp });
}
