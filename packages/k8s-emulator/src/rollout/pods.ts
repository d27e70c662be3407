// Pods of the rollout model as the kubelet runs them: when each is ready (the readiness delay
// after its creation, at least its probes' initial delay; never when an image cannot be pulled),
// the state its object shows, and its Pod object with the Events the ReplicaSet controller, the
// scheduler and the kubelet record for it.
import type { Registry } from "../registry.ts";
import { isObject, nowRfc3339, type JsonObject, type KubeObject } from "../util.ts";
import { PODS, podFor, podStatus, spec, type EventRecorder, type PodState } from "../workloads.ts";

export interface Pod {
  name: string;
  ip: string;
  /** performance.now() at which the pod is ready (Infinity: never, its image cannot be pulled; or not before release when held). */
  readyAt: number;
  /** Created while readiness was held: its delay starts on release. */
  held?: boolean;
  /** The state its object shows; undefined until the object exists. */
  published?: PodState;
}

/**
 * How long a pod of `d` takes at least to be ready: the kubelet runs no readiness probe before
 * its initialDelaySeconds, nor before a startup probe's first success.
 */
function probeDelayMs(d: KubeObject): number {
  const template = isObject(spec(d).template) ? (spec(d).template as JsonObject) : {};
  const pod = isObject(template.spec) ? template.spec : {};
  let delay = 0;
  for (const c of Array.isArray(pod.containers) ? pod.containers : []) {
    if (!isObject(c)) continue;
    for (const probe of [c.readinessProbe, c.startupProbe]) {
      if (isObject(probe)) delay = Math.max(delay, Number(probe.initialDelaySeconds ?? 0) * 1000);
    }
  }
  return delay;
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

/**
 * How long after its creation a new pod of `d` is ready: `podReadyDelayMs`, or its probes' initial
 * delay when longer; never (Infinity, ImagePullBackOff) when an image matches `failingImage`.
 */
export function readyAfterMs(d: KubeObject, podReadyDelayMs: number, failingImage: RegExp): number {
  return images(d).some((i) => failingImage.test(i)) ? Infinity : Math.max(podReadyDelayMs, probeDelayMs(d));
}

/** The state a pod's object shows at `now`: a held pod is starting, not failing. */
export function podState(pod: Pod, now: number): PodState {
  return pod.readyAt <= now ? "ready" : pod.readyAt === Infinity && !pod.held ? "imagePullBackOff" : "starting";
}

/** Writes the pod objects of the model, each when its state changes. */
export class PodPublisher {
  private readonly registry: Registry;
  private readonly events: EventRecorder;

  constructor(registry: Registry, events: EventRecorder) {
    this.registry = registry;
    this.events = events;
  }

  publish(rs: KubeObject, pod: Pod, state: PodState): void {
    const ns = rs.metadata.namespace!;
    const existing = pod.published === undefined ? undefined : this.registry.store.get(PODS, ns, pod.name);
    let object: KubeObject;
    if (existing) {
      existing.status = podStatus(rs, pod.ip, state, nowRfc3339());
      object = this.registry.put(existing);
    } else {
      object = this.registry.put(podFor(rs, pod.name, pod.ip, state));
      this.events.record(rs, "Normal", "SuccessfulCreate", `Created pod: ${pod.name}`, "replicaset-controller");
      this.events.record(
        object,
        "Normal",
        "Scheduled",
        `Successfully assigned ${ns}/${pod.name} to ${String((object.spec as JsonObject).nodeName)}`,
        "default-scheduler",
      );
    }
    const containers = ((object.spec as JsonObject).containers ?? []) as JsonObject[];
    if (state === "ready") for (const c of containers) this.events.record(object, "Normal", "Started", `Started container ${String(c.name)}`, "kubelet");
    if (state === "imagePullBackOff") {
      for (const c of containers) this.events.record(object, "Warning", "Failed", `Failed to pull image ${JSON.stringify(c.image)}: not found`, "kubelet");
    }
    pod.published = state;
  }
}
