// A stand-in for the HPA controller (pkg/controller/podautoscaler/horizontal.go, reconcileAutoscaler)
// in a cluster without metrics-server: it reads the target Deployment's scale, brings replicas
// outside [minReplicas, maxReplicas] back inside, and otherwise cannot compute a replica count
// (ScalingActive False, FailedGetResourceMetric; the Targets column shows <unknown>). A test can
// stand in for the metrics API with setUtilization(): the HPA then scales as the controller does
// without `behavior`: desired = ceil(current × utilization / target) for the highest metric,
// nothing within the 10% tolerance, at most max(2 × current, 4) up at once, down no lower than
// the highest recommendation of the last 5 minutes (the downscale stabilization window), clamped to
// [minReplicas, maxReplicas]. It writes the Deployment's spec.replicas as the scale subresource
// does, as the field manager kube-controller-manager, and reconciles whenever the HPA, its
// Deployment or a utilization changes (the real one also every 15 s; here nothing else changes).
import { deployments } from "./kinds/deployment.ts";
import { horizontalPodAutoscalers as HPAS } from "./kinds/horizontalpodautoscaler.ts";
import type { Registry } from "./registry.ts";
import type { StoreEvent } from "./store.ts";
import { isObject, nowRfc3339, type JsonObject, type KubeObject } from "./util.ts";
import type { EventRecorder } from "./workloads.ts";
import { WorkQueue } from "./work-queue.ts";

/** --horizontal-pod-autoscaler-tolerance. */
const TOLERANCE = 0.1;
/** --horizontal-pod-autoscaler-downscale-stabilization. */
const DOWNSCALE_STABILIZATION_MS = 5 * 60_000;
const MANAGER = "kube-controller-manager";
const COMPONENT = "horizontal-pod-autoscaler";

/** Observed average utilization per resource (cpu, memory), in percent of the pods' requests. */
export type Utilization = Partial<Record<string, number>>;

interface Condition {
  type: string;
  status: "True" | "False";
  reason: string;
  message: string;
  lastTransitionTime?: string;
}

type SetCondition = (type: string, value: Condition["status"], reason: string, message: string) => void;

interface Recommendation {
  replicas: number;
  at: number;
}

const keyOf = (namespace: string, name: string) => `${namespace}/${name}`;

export class AutoscalerController {
  private readonly registry: Registry;
  private readonly events: EventRecorder;
  private readonly utilization = new Map<string, Utilization>();
  private readonly recommendations = new Map<string, Recommendation[]>();
  private readonly queue = new WorkQueue((key) => this.reconcile(key));
  /**
   * The HPAs (namespace/name) that scale each Deployment (namespace/name), and the reverse: a
   * Deployment event finds its HPAs without reading every HPA of its namespace, as the real
   * controller's resync finds each HPA's target from the HPA.
   */
  private readonly byTarget = new Map<string, Set<string>>();
  private readonly targetOf = new Map<string, string>();
  private unsubscribe: (() => void) | undefined;

  constructor(registry: Registry, events: EventRecorder) {
    this.registry = registry;
    this.events = events;
  }

  start(): void {
    this.unsubscribe = this.registry.store.subscribe((e) => this.onEvent(e));
    for (const hpa of this.registry.store.list(HPAS)) this.index(hpa);
  }

  stop(): void {
    this.unsubscribe?.();
    this.utilization.clear();
    this.recommendations.clear();
    this.queue.clear();
    this.byTarget.clear();
    this.targetOf.clear();
  }

  /** What the resource metrics API reports for the HPA's pods from now on; an empty object: no metrics again. */
  setUtilization(namespace: string, name: string, utilization: Utilization): void {
    const key = keyOf(namespace, name);
    if (Object.keys(utilization).length === 0) this.utilization.delete(key);
    else this.utilization.set(key, utilization);
    this.queue.add(key);
  }

  /** Runs inside the store's write: reconciles in a later turn. */
  private onEvent(e: StoreEvent): void {
    const { namespace = "", name = "" } = e.object.metadata;
    if (e.rt === HPAS) {
      if (e.type === "DELETED") {
        this.unindex(keyOf(namespace, name));
        this.recommendations.delete(keyOf(namespace, name));
        return;
      }
      this.index(e.object);
      this.queue.add(keyOf(namespace, name));
    } else if (e.rt === deployments) {
      for (const key of this.byTarget.get(keyOf(namespace, name)) ?? []) this.queue.add(key);
    }
  }

  /** Files the HPA under the Deployment its scaleTargetRef names now (none if it names another kind). */
  private index(hpa: KubeObject): void {
    const { namespace = "", name = "" } = hpa.metadata;
    const key = keyOf(namespace, name);
    this.unindex(key);
    const target = (hpa.spec as JsonObject | undefined)?.scaleTargetRef as JsonObject | undefined;
    if (target?.kind !== "Deployment") return;
    const targetKey = keyOf(namespace, String(target.name));
    this.targetOf.set(key, targetKey);
    const hpas = this.byTarget.get(targetKey);
    if (hpas) hpas.add(key);
    else this.byTarget.set(targetKey, new Set([key]));
  }

  private unindex(key: string): void {
    const targetKey = this.targetOf.get(key);
    if (targetKey === undefined) return;
    this.targetOf.delete(key);
    const hpas = this.byTarget.get(targetKey)!;
    hpas.delete(key);
    if (hpas.size === 0) this.byTarget.delete(targetKey);
  }

  private reconcile(key: string): void {
    const slash = key.indexOf("/");
    const hpa = this.registry.store.get(HPAS, key.slice(0, slash), key.slice(slash + 1));
    if (!hpa || hpa.metadata.deletionTimestamp) return;
    const namespace = hpa.metadata.namespace ?? "";
    const spec = hpa.spec as JsonObject;
    const status = isObject(hpa.status) ? { ...hpa.status } : {};
    const conditions = ((status.conditions ?? []) as Condition[]).map((c) => ({ ...c }));
    const setCondition: SetCondition = (type, value, reason, message) => {
      const existing = conditions.find((c) => c.type === type);
      if (existing) {
        if (existing.status !== value) existing.lastTransitionTime = nowRfc3339();
        Object.assign(existing, { status: value, reason, message });
      } else conditions.push({ type, status: value, reason, message, lastTransitionTime: nowRfc3339() });
    };
    const write = (fields: JsonObject) => {
      this.registry.writeStatus(HPAS, hpa, { ...status, ...fields, conditions, observedGeneration: hpa.metadata.generation });
    };
    const target = (spec.scaleTargetRef ?? {}) as JsonObject;
    const deployment = target.kind === "Deployment" ? this.registry.store.get(deployments, namespace, String(target.name)) : undefined;
    if (!deployment) {
      const message = `${String(target.kind ?? "").toLowerCase()}s/scale.apps "${target.name}" not found`;
      setCondition("AbleToScale", "False", "FailedGetScale", `the HPA controller was unable to get the target's current scale: ${message}`);
      return write({});
    }
    setCondition("AbleToScale", "True", "SucceededGetScale", "the HPA controller was able to get the target's current scale");
    const current = Number((deployment.spec as JsonObject).replicas ?? 1);
    const minReplicas = Number(spec.minReplicas ?? 1);
    const maxReplicas = Number(spec.maxReplicas);
    const metrics = (Array.isArray(spec.metrics) ? spec.metrics : []) as JsonObject[];
    this.windowOf(key, current);
    let desired: number;
    let reason: string;
    let currentMetrics: JsonObject[] = metrics.map(() => ({ type: "" }));
    if (current === 0) {
      setCondition("ScalingActive", "False", "ScalingDisabled", "scaling is disabled since the replica count of the target is zero");
      return write({ currentReplicas: 0, desiredReplicas: 0 });
    }
    if (current > maxReplicas) [desired, reason] = [maxReplicas, "Current number of replicas above Spec.MaxReplicas"];
    else if (current < minReplicas) [desired, reason] = [minReplicas, "Current number of replicas below Spec.MinReplicas"];
    else {
      const measured = this.utilization.get(key);
      const resource = metrics[0]?.resource as JsonObject | undefined;
      if (!measured || metrics.some((m) => m.type !== "Resource" || measured[String((m.resource as JsonObject).name)] === undefined)) {
        const name = String(resource?.name ?? "cpu");
        const reported = conditions.some((c) => c.type === "ScalingActive" && c.reason === "FailedGetResourceMetric");
        setCondition(
          "ScalingActive",
          "False",
          "FailedGetResourceMetric",
          `the HPA was unable to compute the replica count: failed to get ${name} utilization: unable to get metrics for resource ${name}: unable to fetch metrics from resource metrics API: the server could not find the requested resource (get pods.metrics.k8s.io)`,
        );
        if (!reported)
          this.events.record(
            hpa,
            "Warning",
            "FailedGetResourceMetric",
            `failed to get ${name} utilization: unable to get metrics for resource ${name}: no metrics returned from resource metrics API`,
            COMPONENT,
          );
        return write({ currentReplicas: current, currentMetrics });
      }
      let proposal = 0;
      let proposedBy = "";
      currentMetrics = metrics.map((m) => {
        const source = m.resource as JsonObject;
        const utilization = measured[String(source.name)]!;
        const targetUtilization = Number((source.target as JsonObject).averageUtilization ?? 100);
        const ratio = utilization / targetUtilization;
        const replicas = Math.abs(ratio - 1) <= TOLERANCE ? current : Math.ceil(ratio * current);
        if (replicas > proposal) [proposal, proposedBy] = [replicas, `${source.name} resource utilization (percentage of request)`];
        return { type: "Resource", resource: { name: source.name, current: { averageUtilization: utilization } } };
      });
      setCondition("ScalingActive", "True", "ValidMetricFound", `the HPA was able to successfully calculate a replica count from ${proposedBy}`);
      reason = proposal > current ? `${proposedBy} above target` : "All metrics below target";
      desired = this.normalize(key, current, proposal, minReplicas, maxReplicas, setCondition);
    }
    if (desired === current) {
      return write({ currentReplicas: current, desiredReplicas: current, currentMetrics });
    }
    this.registry.update(
      deployments,
      namespace,
      deployment.metadata.name ?? "",
      { ...deployment, spec: { ...(deployment.spec as JsonObject), replicas: desired } },
      { manager: MANAGER },
    );
    setCondition("AbleToScale", "True", "SucceededRescale", `the HPA controller was able to update the target scale to ${desired}`);
    this.events.record(hpa, "Normal", "SuccessfulRescale", `New size: ${desired}; reason: ${reason}`, COMPONENT);
    write({ currentReplicas: current, desiredReplicas: desired, currentMetrics, lastScaleTime: nowRfc3339() });
  }

  /**
   * normalizeDesiredReplicas: the highest recommendation of the stabilization window (the
   * proposal included), then at most max(2 × current, 4) and [min, max] (convertDesiredReplicasWithRules).
   */
  private normalize(key: string, current: number, proposal: number, minReplicas: number, maxReplicas: number, setCondition: SetCondition): number {
    const stabilized = Math.max(proposal, ...this.windowOf(key).map((r) => r.replicas));
    this.recommendations.get(key)!.push({ replicas: proposal, at: performance.now() });
    if (stabilized === proposal) setCondition("AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size");
    else
      setCondition(
        "AbleToScale",
        "True",
        "ScaleDownStabilized",
        "recent recommendations were higher than current one, applying the highest recent recommendation",
      );
    const scaleUpLimit = Math.max(2 * current, 4);
    const [upper, upperReason, upperMessage] =
      maxReplicas > scaleUpLimit
        ? [scaleUpLimit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"]
        : [maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"];
    if (stabilized < minReplicas) {
      setCondition("ScalingLimited", "True", "TooFewReplicas", "the desired replica count is less than the minimum replica count");
      return minReplicas;
    }
    if (stabilized > upper) {
      setCondition("ScalingLimited", "True", upperReason, upperMessage);
      return upper;
    }
    setCondition("ScalingLimited", "False", "DesiredWithinRange", "the desired count is within the acceptable range");
    return stabilized;
  }

  /** The recommendations of the last DOWNSCALE_STABILIZATION_MS, the current replicas when there are none (recordInitialRecommendation). */
  private windowOf(key: string, current?: number): Recommendation[] {
    const now = performance.now();
    const kept = (this.recommendations.get(key) ?? []).filter((r) => now - r.at < DOWNSCALE_STABILIZATION_MS);
    if (kept.length === 0 && current !== undefined) kept.push({ replicas: current, at: now });
    this.recommendations.set(key, kept);
    return kept;
  }
}
