// A stand-in for the deployment controller, the ReplicaSet controller and the
// kubelets. Per Deployment it keeps ReplicaSets (one per pod template, with
// revision numbers) and their pods in memory; a pod becomes ready
// `podReadyDelayMs` after it is created, or never when an image matches
// `failingImage`. Each reconcile follows the real controllers:
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
// resourceVersion and reaches watches as MODIFIED.
import { createHash } from "node:crypto";
import type { Registry } from "./registry.ts";
import { RESOURCE_TYPES } from "./resources.ts";
import type { StoreEvent } from "./store.ts";
import { isObject, nowRfc3339, type JsonObject, type KubeObject } from "./util.ts";

const DEPLOYMENTS = RESOURCE_TYPES.find((rt) => rt.kind === "Deployment")!;
const REVISION = "deployment.kubernetes.io/revision";
/** Bound on scale steps per reconcile (each step changes at least one ReplicaSet). */
const MAX_STEPS = 1000;

export interface RolloutOptions {
  /** Time from a pod's creation until it is ready. */
  podReadyDelayMs: number;
  /** Length of one second of spec.progressDeadlineSeconds, in ms. */
  deadlineSecondMs: number;
  failingImage: RegExp;
}

interface Condition {
  type: string;
  status: "True" | "False";
  reason: string;
  message: string;
  lastUpdateTime: string;
  lastTransitionTime: string;
}

interface Pod {
  /** performance.now() at which the pod is ready (Infinity: never, or not before release when held). */
  readyAt: number;
  /** Created while readiness was held: its delay starts on release. */
  held?: boolean;
}

interface ReplicaSet {
  hash: string;
  name: string;
  revision: number;
  /** spec.replicas of the ReplicaSet. */
  replicas: number;
  pods: Pod[];
}

interface DeploymentState {
  sets: ReplicaSet[];
  /** When the rollout last made progress (the Progressing condition's lastUpdateTime, in ms). */
  lastProgressAt: number;
  timer?: NodeJS.Timeout;
}

function spec(d: KubeObject): JsonObject {
  return isObject(d.spec) ? d.spec : {};
}

function statusOf(d: KubeObject): JsonObject {
  return isObject(d.status) ? d.status : {};
}

function images(d: KubeObject): string[] {
  const template = isObject(spec(d).template) ? (spec(d).template as JsonObject) : {};
  const pod = isObject(template.spec) ? template.spec : {};
  const out: string[] = [];
  for (const list of ["initContainers", "containers"]) {
    const cs = pod[list];
    if (Array.isArray(cs)) for (const c of cs) if (isObject(c) && typeof c.image === "string") out.push(c.image);
  }
  return out;
}

/** pod-template-hash style suffix of the ReplicaSet for the current template. */
function templateHash(d: KubeObject): string {
  return createHash("sha256")
    .update(JSON.stringify(spec(d).template ?? {}))
    .digest("hex")
    .slice(0, 10);
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

export class RolloutController {
  private readonly registry: Registry;
  private readonly opts: RolloutOptions;
  private readonly states = new Map<string, DeploymentState>();
  private readonly pending = new Set<string>();
  private held = false;
  private unsubscribe: (() => void) | undefined;

  constructor(registry: Registry, opts: RolloutOptions) {
    this.registry = registry;
    this.opts = opts;
  }

  start(): void {
    this.unsubscribe = this.registry.store.subscribe((e) => this.onEvent(e));
  }

  stop(): void {
    this.unsubscribe?.();
    for (const s of this.states.values()) clearTimeout(s.timer);
    this.states.clear();
    this.pending.clear();
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
        this.schedule(key);
      }
    };
  }

  private onEvent(e: StoreEvent): void {
    if (e.rt !== DEPLOYMENTS) return;
    const key = `${e.object.metadata.namespace}/${e.object.metadata.name}`;
    if (e.type === "DELETED") {
      clearTimeout(this.states.get(key)?.timer);
      this.states.delete(key);
      return;
    }
    this.schedule(key);
  }

  /** Reconciles asynchronously, like a controller fed by a watch: the triggering write is answered first. */
  private schedule(key: string): void {
    if (this.pending.has(key)) return;
    this.pending.add(key);
    setImmediate(() => {
      this.pending.delete(key);
      this.reconcile(key);
    });
  }

  private reconcile(key: string): void {
    const [ns, name] = key.split("/");
    const d = this.registry.store.get(DEPLOYMENTS, ns, name);
    if (!d) return;
    const now = performance.now();
    let state = this.states.get(key);
    if (!state) {
      state = { sets: [], lastProgressAt: now };
      this.states.set(key, state);
    }
    clearTimeout(state.timer);
    const conditions = (Array.isArray(statusOf(d).conditions) ? (statusOf(d).conditions as Condition[]) : []).map((c) => ({ ...c }));
    const newRS = this.newReplicaSet(d, state, conditions, now);
    const replicas = Number(spec(d).replicas ?? 1);
    const failing = images(d).some((i) => this.opts.failingImage.test(i));
    for (let i = 0; i < MAX_STEPS; i++) {
      const changed = isRecreate(d) ? this.stepRecreate(state, newRS, replicas) : this.stepRolling(d, state, newRS, replicas, now);
      for (const rs of state.sets) this.syncPods(rs, rs === newRS && failing, now);
      if (!changed) break;
    }
    const status = this.status(d, state, newRS, replicas, conditions, now);
    this.registry.writeStatus(DEPLOYMENTS, d, status, { [REVISION]: String(newRS.revision) });
    this.scheduleNext(key, d, state, status, now);
  }

  /** The ReplicaSet of the current template, created (with the next revision) when missing. */
  private newReplicaSet(d: KubeObject, state: DeploymentState, conditions: Condition[], now: number): ReplicaSet {
    const hash = templateHash(d);
    const maxRevision = Math.max(0, Number(d.metadata.annotations?.[REVISION] ?? 0) || 0, ...state.sets.map((s) => s.revision));
    let rs = state.sets.find((s) => s.hash === hash);
    if (rs) {
      // Rolling back to an older template gives its ReplicaSet the next revision.
      if (rs.revision < maxRevision && state.sets.some((s) => s !== rs && s.revision === maxRevision)) rs.revision = maxRevision + 1;
      return rs;
    }
    rs = { hash, name: `${d.metadata.name}-${hash}`, revision: maxRevision + 1, replicas: 0, pods: [] };
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

  /** The ReplicaSet controller: creates or deletes pods to match replicas, deleting unready pods first. */
  private syncPods(rs: ReplicaSet, failing: boolean, now: number): void {
    while (rs.pods.length < rs.replicas) {
      rs.pods.push(failing ? { readyAt: Infinity } : this.held ? { readyAt: Infinity, held: true } : { readyAt: now + this.opts.podReadyDelayMs });
    }
    if (rs.pods.length > rs.replicas) {
      rs.pods.sort((a, b) => b.readyAt - a.readyAt);
      rs.pods.splice(0, rs.pods.length - rs.replicas);
    }
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
    const timer = setTimeout(() => this.schedule(key), Math.max(0, Math.min(...times) - now));
    timer.unref();
    state.timer = timer;
  }
}

function readyPods(rs: ReplicaSet, now: number): number {
  return rs.pods.filter((p) => p.readyAt <= now).length;
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
