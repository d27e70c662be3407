// A stand-in for the deployment controller and kubelets: when a Deployment's
// generation is not yet observed it reports a rollout in progress, and after
// `delayMs` a finished (or, for images matching `failingImage`, a timed-out)
// rollout. Status goes through the status subresource, so each change bumps
// the resourceVersion and reaches watches as MODIFIED.
import { createHash } from 'node:crypto';
import type { Registry } from './registry.ts';
import { RESOURCE_TYPES } from './resources.ts';
import type { StoreEvent } from './store.ts';
import { isObject, nowRfc3339, type JsonObject, type KubeObject } from './util.ts';

const DEPLOYMENTS = RESOURCE_TYPES.find((rt) => rt.kind === 'Deployment')!;
const REVISION = 'deployment.kubernetes.io/revision';

export interface RolloutOptions {
  delayMs: number;
  failingImage: RegExp;
}

interface Condition {
  type: string;
  status: 'True' | 'False';
  reason: string;
  message: string;
  lastUpdateTime?: string;
  lastTransitionTime?: string;
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
  for (const list of ['initContainers', 'containers']) {
    const cs = pod[list];
    if (Array.isArray(cs)) for (const c of cs) if (isObject(c) && typeof c.image === 'string') out.push(c.image);
  }
  return out;
}

/** pod-template-hash style suffix of the ReplicaSet for the current template. */
function templateHash(d: KubeObject): string {
  return createHash('sha256').update(JSON.stringify(spec(d).template ?? {})).digest('hex').slice(0, 10);
}

export class RolloutController {
  private readonly registry: Registry;
  private readonly opts: RolloutOptions;
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly pending = new Set<string>();
  /** Last template hash and revision number per deployment. */
  private readonly revisions = new Map<string, { hash: string; revision: number }>();
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
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.pending.clear();
  }

  private onEvent(e: StoreEvent): void {
    if (e.rt !== DEPLOYMENTS) return;
    const key = `${e.object.metadata.namespace}/${e.object.metadata.name}`;
    if (e.type === 'DELETED') {
      clearTimeout(this.timers.get(key));
      this.timers.delete(key);
      this.revisions.delete(key);
      return;
    }
    if (e.object.metadata.generation === statusOf(e.object).observedGeneration || this.pending.has(key)) return;
    // React asynchronously, like a controller fed by a watch: the write that
    // triggered us completes (and is answered) first.
    this.pending.add(key);
    setImmediate(() => {
      this.pending.delete(key);
      this.begin(key);
    });
  }

  private current(key: string): KubeObject | undefined {
    const [ns, name] = key.split('/');
    return this.registry.store.get(DEPLOYMENTS, ns, name);
  }

  private begin(key: string): void {
    const d = this.current(key);
    if (!d) return;
    const generation = d.metadata.generation ?? 1;
    if (generation === statusOf(d).observedGeneration) return;
    clearTimeout(this.timers.get(key));
    const annotations = { [REVISION]: String(this.revisionFor(key, d)) };
    if (this.opts.delayMs <= 0) {
      this.finish(key, generation, annotations);
      return;
    }
    this.write(d, this.progressingStatus(d), annotations);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.finish(key, generation);
    }, this.opts.delayMs);
    timer.unref();
    this.timers.set(key, timer);
  }

  private finish(key: string, generation: number, annotations?: Record<string, string>): void {
    const d = this.current(key);
    if (!d || (d.metadata.generation ?? 1) !== generation) return;
    this.write(d, this.finalStatus(d), annotations);
  }

  private revisionFor(key: string, d: KubeObject): number {
    const hash = templateHash(d);
    const known = this.revisions.get(key);
    if (known?.hash === hash) return known.revision;
    const fromAnnotation = Number(d.metadata.annotations?.[REVISION] ?? 0) || 0;
    const revision = Math.max(known?.revision ?? 0, fromAnnotation) + 1;
    this.revisions.set(key, { hash, revision });
    return revision;
  }

  private write(d: KubeObject, status: JsonObject, annotations?: Record<string, string>): void {
    this.registry.writeStatus(DEPLOYMENTS, d, status, annotations);
  }

  private replicaSetName(d: KubeObject): string {
    return `${d.metadata.name}-${templateHash(d)}`;
  }

  private progressingStatus(d: KubeObject): JsonObject {
    const replicas = Number(spec(d).replicas ?? 1);
    const prev = statusOf(d);
    // Pods of the previous revision keep serving during the rollout.
    const ready = Math.min(Number(prev.readyReplicas ?? 0), replicas);
    const wasAvailable = this.conditionStatus(d, 'Available') === 'True';
    return {
      observedGeneration: d.metadata.generation ?? 1,
      replicas,
      updatedReplicas: 0,
      readyReplicas: ready,
      availableReplicas: ready,
      unavailableReplicas: replicas - ready,
      conditions: this.conditions(d, [
        wasAvailable
          ? { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable', message: 'Deployment has minimum availability.' }
          : { type: 'Available', status: 'False', reason: 'MinimumReplicasUnavailable', message: 'Deployment does not have minimum availability.' },
        { type: 'Progressing', status: 'True', reason: 'ReplicaSetUpdated', message: `ReplicaSet "${this.replicaSetName(d)}" is progressing.` },
      ]),
    };
  }

  private finalStatus(d: KubeObject): JsonObject {
    const replicas = Number(spec(d).replicas ?? 1);
    const rs = this.replicaSetName(d);
    if (replicas > 0 && images(d).some((i) => this.opts.failingImage.test(i))) {
      return {
        observedGeneration: d.metadata.generation ?? 1,
        replicas,
        updatedReplicas: replicas,
        readyReplicas: 0,
        availableReplicas: 0,
        unavailableReplicas: replicas,
        conditions: this.conditions(d, [
          { type: 'Available', status: 'False', reason: 'MinimumReplicasUnavailable', message: 'Deployment does not have minimum availability.' },
          { type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: `ReplicaSet "${rs}" has timed out progressing.` },
        ]),
      };
    }
    return {
      observedGeneration: d.metadata.generation ?? 1,
      replicas,
      updatedReplicas: replicas,
      readyReplicas: replicas,
      availableReplicas: replicas,
      conditions: this.conditions(d, [
        { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable', message: 'Deployment has minimum availability.' },
        { type: 'Progressing', status: 'True', reason: 'NewReplicaSetAvailable', message: `ReplicaSet "${rs}" has successfully progressed.` },
      ]),
    };
  }

  private conditionStatus(d: KubeObject, type: string): string | undefined {
    const conds = statusOf(d).conditions;
    if (!Array.isArray(conds)) return undefined;
    const c = conds.find((x) => isObject(x) && x.type === type) as Condition | undefined;
    return c?.status;
  }

  /** Stamps times, keeping lastTransitionTime when a condition's status did not change. */
  private conditions(d: KubeObject, next: Condition[]): Condition[] {
    const prev = Array.isArray(statusOf(d).conditions) ? (statusOf(d).conditions as Condition[]) : [];
    const now = nowRfc3339();
    return next.map((c) => {
      const old = prev.find((p) => p.type === c.type);
      const unchanged = old && old.status === c.status && old.reason === c.reason && old.message === c.message;
      return {
        ...c,
        lastUpdateTime: unchanged ? old.lastUpdateTime ?? now : now,
        lastTransitionTime: old && old.status === c.status ? old.lastTransitionTime ?? now : now,
      };
    });
  }
}
