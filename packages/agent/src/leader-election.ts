// Leader election among the agents of one region on a coordination.k8s.io/v1 Lease, following
// client-go's tools/leaderelection (leaderelection.go) and its LeaseLock (resourcelock/leaselock.go):
//
// * A candidate tries every retryPeriod (jittered, client-go's JitterFactor 1.2, but no later
//   than when the observed lease expires) to acquire the Lease: it may when the Lease has no holder, or when its record has not changed for the
//   holder's leaseDurationSeconds as measured on this candidate's own clock from when it last
//   saw the record change (never from renewTime: clocks of different hosts may differ).
// * Every write is an update carrying the resourceVersion read (optimistic concurrency): of two
//   candidates racing for an expired Lease one gets 409 Conflict and stays a candidate.
// * Taking the Lease from another holder (or from none after a release) increments
//   leaseTransitions, which is thereby an epoch: ctrl fences reports by it.
// * The leader renews every retryPeriod. Unlike client-go, whose renew deadline starts after the
//   wait of the round, it steps down once renewDeadline has passed since the start of its last
//   successful renew — checked by a timer and on every isLeading() — so it stops before any
//   other candidate (who waits leaseDuration > renewDeadline from a later moment) can take over.
// * On stop, a leader releases the Lease (client-go's ReleaseOnCancel): no holder,
//   leaseDurationSeconds 1, so a standby takes over at its next retry.
import type { Logger } from "@flotilla/runtime";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { resourcePath, statusCodeOf, type ApiObject, type KubeClient } from "./kube-api.ts";
import { sleep } from "./backoff.ts";

/** Leader election timing and the Lease's place, with client-go's (and controller-runtime's) defaults. */
export interface LeaderElectionOptions {
  /** How long standbys wait after the last observed change of the Lease before taking it. Default 15 s. */
  leaseDurationMs: number;
  /** A leader that has not renewed for this long steps down. Default 10 s; must be < leaseDurationMs. */
  renewDeadlineMs: number;
  /** Interval of acquire and renew attempts. Default 2 s; renewDeadlineMs must exceed 1.2× it. */
  retryPeriodMs: number;
  /** Namespace of the Lease. Default: the pod's namespace in a cluster, else `default`. */
  namespace: string | undefined;
  /** Name of the Lease. Default `flotilla-agent-<region>`. */
  name: string | undefined;
  /** This candidate's holderIdentity. Default `<hostname>_<random UUID>` (controller-runtime's). */
  identity: string | undefined;
}

/** client-go's JitterFactor of the acquire loop. */
const JITTER_FACTOR = 1.2;

/** Throws a RangeError unless the timings are valid as client-go's NewLeaderElector demands. */
export function validateTimings({
  leaseDurationMs,
  renewDeadlineMs,
  retryPeriodMs,
}: Pick<LeaderElectionOptions, "leaseDurationMs" | "renewDeadlineMs" | "retryPeriodMs">): void {
  if (!(retryPeriodMs > 0)) throw new RangeError("the leader election retry period must be greater than zero");
  if (!(leaseDurationMs > renewDeadlineMs)) throw new RangeError("the leader election lease duration must be greater than the renew deadline");
  if (!(renewDeadlineMs > JITTER_FACTOR * retryPeriodMs))
    throw new RangeError(`the leader election renew deadline must be greater than ${JITTER_FACTOR}× the retry period`);
  if (leaseDurationMs % 1000 !== 0) throw new RangeError("the leader election lease duration must be whole seconds (the Lease stores seconds)");
}

/** The namespace of the pod this process runs in (its service account's), if it runs in one. */
export function podNamespace(): string | undefined {
  try {
    return readFileSync("/var/run/secrets/kubernetes.io/serviceaccount/namespace", "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

/** controller-runtime's default identity: unique per process, recognisable per host. */
export function defaultIdentity(): string {
  return `${hostname()}_${randomUUID()}`;
}

/** The Lease's spec as client-go's LeaderElectionRecord. Times are ms since the epoch. */
export interface LeaseRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime: number | undefined;
  renewTime: number | undefined;
  leaseTransitions: number;
}

export interface LeaderElectorOptions {
  kubeClient: KubeClient;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** Became leader; `epoch` is the Lease's leaseTransitions at the acquire. */
  onStartedLeading(epoch: number): void;
  /** Stopped leading (renew deadline passed, Lease lost, released, or stepDown()). */
  onStoppedLeading(reason: string): void;
  log: Logger;
  /** Monotonic milliseconds (tests may replace it). Default performance.now(). */
  monotonic?: () => number;
}

export class LeaderElector {
  readonly #options: LeaderElectorOptions;
  readonly #api: KubeClient;
  readonly #monotonic: () => number;
  /** The record last seen (read or written) and when it was first seen as such (monotonic). */
  #observed: { record: LeaseRecord; resourceVersion: string | undefined; at: number } | undefined;
  /** While leading: the epoch, and the start of the last successful renew (monotonic). */
  #leading: { epoch: number; renewedAt: number; deadline: NodeJS.Timeout } | undefined;
  /** Lease calls failed in a row (not counting conflicts). */
  #failures = 0;
  /** Aborted by stepDown(): ends the current renew loop. */
  #stepDown = new AbortController();

  constructor(options: LeaderElectorOptions) {
    validateTimings(options);
    this.#options = options;
    this.#api = options.kubeClient;
    this.#monotonic = options.monotonic ?? (() => performance.now());
  }

  get identity(): string {
    return this.#options.identity;
  }

  /** Leading, and the last renew is younger than the renew deadline (whatever the timers did). */
  isLeading(): boolean {
    if (!this.#leading) return false;
    if (this.#monotonic() - this.#leading.renewedAt < this.#options.renewDeadlineMs) return true;
    this.#stopLeading("renew deadline passed");
    return false;
  }

  /** The epoch (leaseTransitions) this agent leads in, while it leads. */
  get epoch(): number | undefined {
    return this.isLeading() ? this.#leading!.epoch : undefined;
  }

  /** Stop leading now (e.g. ctrl fenced this agent's reports); the candidate loop goes on. */
  stepDown(reason: string): void {
    if (!this.#leading) return;
    this.#stopLeading(reason);
    this.#stepDown.abort();
  }

  /** Campaigns, leads, and campaigns again after losing the Lease, until `signal` aborts; then releases it if held. */
  async run(signal: AbortSignal): Promise<void> {
    const { retryPeriodMs, log } = this.#options;
    while (!signal.aborted) {
      const acquired = await this.#tryAcquireOrRenew(signal);
      if (acquired) {
        this.#startLeading(acquired);
        await this.#renewWhileLeading(signal);
      } else {
        // client-go's wait.JitterUntil(retryPeriod, JitterFactor): retryPeriod .. 2.2× it; but
        // no later than the moment the observed holder's lease expires, so a standby takes
        // over within the lease duration plus one retry (in which it observed the last renew).
        const expiresIn = this.#observed ? this.#observed.at + this.#observed.record.leaseDurationSeconds * 1000 - this.#monotonic() + 1 : Infinity;
        await sleep(Math.min(retryPeriodMs * (1 + Math.random() * JITTER_FACTOR), Math.max(0, expiresIn)), signal);
      }
    }
    this.#stopLeading("stopping");
    await this.#release().catch((error) => log.warn(`releasing the lease failed (standbys take over once it expires): ${messageOf(error)}`));
  }

  /** Renews every retryPeriod until the renew deadline passes, the Lease is lost, or `signal` aborts. */
  async #renewWhileLeading(signal: AbortSignal): Promise<void> {
    const { retryPeriodMs } = this.#options;
    this.#stepDown = new AbortController();
    const stopped = AbortSignal.any([signal, this.#stepDown.signal]);
    while (!stopped.aborted && this.isLeading()) {
      await sleep(retryPeriodMs, stopped);
      if (stopped.aborted || !this.isLeading()) return;
      const renewed = await this.#tryAcquireOrRenew(stopped);
      if (renewed) {
        // A renew that ended after the deadline comes too late: run() acquires afresh.
        if (!this.isLeading()) return;
        this.#renewed(renewed.started);
      } else if (this.#observed?.record.holderIdentity !== this.#options.identity) {
        this.#stopLeading(`lease taken by ${this.#observed?.record.holderIdentity || "nobody"}`);
      }
      // Otherwise the renew failed (API error, conflict): retry until the deadline.
    }
  }

  /**
   * client-go's tryAcquireOrRenew: if this candidate holds the Lease after the call, its epoch
   * and when the call started (monotonic); else undefined.
   */
  async #tryAcquireOrRenew(signal: AbortSignal): Promise<Acquired | undefined> {
    const { namespace, name, identity, leaseDurationMs, log } = this.#options;
    const started = this.#monotonic();
    const now = Date.now();
    const path = leasePath(namespace, name);
    const ours: LeaseRecord = { holderIdentity: identity, leaseDurationSeconds: leaseDurationMs / 1000, acquireTime: now, renewTime: now, leaseTransitions: 0 };
    try {
      let lease: Lease;
      try {
        lease = await this.#bounded(this.#api.get<Lease>(path));
      } catch (error) {
        if (statusCodeOf(error) !== 404) throw error;
        const created = await this.#bounded(this.#api.create(leasePath(namespace), toLease(name, ours, undefined)));
        this.#observe(ours, created.metadata?.resourceVersion, started);
        this.#failures = 0;
        return { epoch: 0, started };
      }
      const old = fromLease(lease);
      if (!sameRecord(old, this.#observed?.record)) this.#observe(old, lease.metadata?.resourceVersion, started);
      else this.#observed!.resourceVersion = lease.metadata?.resourceVersion;
      const heldByOther = old.holderIdentity !== "" && old.holderIdentity !== identity;
      if (heldByOther && this.#observed!.at + old.leaseDurationSeconds * 1000 > this.#monotonic()) {
        this.#failures = 0;
        return undefined;
      }
      const next: LeaseRecord =
        old.holderIdentity === identity
          ? { ...ours, acquireTime: old.acquireTime, leaseTransitions: old.leaseTransitions }
          : { ...ours, leaseTransitions: old.leaseTransitions + 1 };
      if (signal.aborted) return undefined;
      const updated = await this.#bounded(this.#api.replace(path, toLease(name, next, lease.metadata?.resourceVersion)));
      this.#observe(next, updated.metadata?.resourceVersion, started);
      this.#failures = 0;
      return { epoch: next.leaseTransitions, started };
    } catch (error) {
      if (statusCodeOf(error) === 409) return undefined; // another candidate wrote first
      // Logged at first and then every tenth time: a standby without access retries for ever.
      if (++this.#failures <= 3 || this.#failures % 10 === 0) {
        log.warn(
          `leader election: ${this.#leading ? "renewing" : "acquiring"} lease ${namespace}/${name} failed (${this.#failures}× in a row): ${messageOf(error)}`,
        );
      }
      return undefined;
    }
  }

  /** client-go's release: if the Lease was last seen held by this candidate, no holder, duration 1 s, same epoch. */
  async #release(): Promise<void> {
    const { namespace, name, log } = this.#options;
    const observed = this.#observed;
    if (observed?.record.holderIdentity !== this.#options.identity) return;
    const now = Date.now();
    const released: LeaseRecord = {
      holderIdentity: "",
      leaseDurationSeconds: 1,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: observed.record.leaseTransitions,
    };
    await this.#bounded(this.#api.replace(leasePath(namespace, name), toLease(name, released, observed.resourceVersion)));
    this.#observed = { record: released, resourceVersion: undefined, at: this.#monotonic() };
    log.info(`leader election: released lease ${namespace}/${name}`);
  }

  /**
   * `call`, given up on after the renew deadline (client-go bounds every call by that context):
   * a hanging API server must neither keep a leader leading nor hold up a stop.
   */
  async #bounded<T>(call: Promise<T>): Promise<T> {
    const { renewDeadlineMs } = this.#options;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within the renew deadline (${renewDeadlineMs} ms)`)), renewDeadlineMs);
    });
    try {
      return await Promise.race([call, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  #observe(record: LeaseRecord, resourceVersion: string | undefined, at: number): void {
    this.#observed = { record, resourceVersion, at };
  }

  #startLeading({ epoch, started }: Acquired): void {
    this.#leading = { epoch, renewedAt: started, deadline: this.#deadlineTimer(started) };
    const { namespace, name, identity, log } = this.#options;
    log.info(`leader election: ${identity} became leader of lease ${namespace}/${name} (epoch ${epoch})`);
    this.#options.onStartedLeading(epoch);
  }

  #renewed(started: number): void {
    const leading = this.#leading!;
    clearTimeout(leading.deadline);
    leading.renewedAt = started;
    leading.deadline = this.#deadlineTimer(started);
  }

  #deadlineTimer(renewedAt: number): NodeJS.Timeout {
    const timer = setTimeout(() => this.isLeading(), renewedAt + this.#options.renewDeadlineMs - this.#monotonic());
    timer.unref();
    return timer;
  }

  #stopLeading(reason: string): void {
    const leading = this.#leading;
    if (!leading) return;
    clearTimeout(leading.deadline);
    this.#leading = undefined;
    const { namespace, name, log } = this.#options;
    log.warn(`leader election: stopped leading lease ${namespace}/${name} (epoch ${leading.epoch}): ${reason}`);
    this.#options.onStoppedLeading(reason);
  }
}

interface Acquired {
  epoch: number;
  /** When the successful call started (monotonic): the renew deadline counts from here. */
  started: number;
}

/** A coordination.k8s.io/v1 Lease; times are MicroTime strings (RFC 3339 with microseconds). */
interface Lease extends ApiObject {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

function leasePath(namespace: string, name?: string): string {
  return resourcePath({ apiVersion: "coordination.k8s.io/v1", kind: "Lease", namespace, name });
}

function toLease(name: string, record: LeaseRecord, resourceVersion: string | undefined): Lease {
  // metav1.MicroTime: 2006-01-02T15:04:05.000000Z07:00 (milliseconds are all a Date has).
  const time = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString().replace(/Z$/, "000Z"));
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name, resourceVersion },
    spec: {
      holderIdentity: record.holderIdentity,
      leaseDurationSeconds: record.leaseDurationSeconds,
      acquireTime: time(record.acquireTime),
      renewTime: time(record.renewTime),
      leaseTransitions: record.leaseTransitions,
    },
  };
}

/** client-go's LeaseSpecToLeaderElectionRecord: absent fields are "" and 0. */
export function fromLease(lease: Lease): LeaseRecord {
  const spec = lease.spec ?? {};
  const time = (value: Date | string | undefined) => (value === undefined ? undefined : new Date(value).getTime());
  return {
    holderIdentity: spec.holderIdentity ?? "",
    leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
    acquireTime: time(spec.acquireTime),
    renewTime: time(spec.renewTime),
    leaseTransitions: spec.leaseTransitions ?? 0,
  };
}

function sameRecord(a: LeaseRecord, b: LeaseRecord | undefined): boolean {
  return (
    b !== undefined &&
    a.holderIdentity === b.holderIdentity &&
    a.leaseDurationSeconds === b.leaseDurationSeconds &&
    a.acquireTime === b.acquireTime &&
    a.renewTime === b.renewTime &&
    a.leaseTransitions === b.leaseTransitions
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
