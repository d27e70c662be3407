// Drives active rollouts through their waves (gate.ts decides, the store writes with a
// compare-and-set). One replica drives at a time: the one holding the database lease
// "rollout-driver" (renewed every third of --rollout-lease-duration; another replica takes it
// once it has expired, so a killed driver's rollouts wait at most that long). The others only
// apply operators' controls and look at once at the rollouts whose analysis measurements they
// just stored (lookNow: the driver would learn of those at its next poll of the status feed),
// each a compare-and-set too, so a replica that lost its turn (or its lease, mid-look) writes
// nothing, and no wave is judged twice.
//
// The driver looks at a rollout when something it waits for may have changed: a status event
// of its deployment (an agent's report, through the status feed: at once for this process's
// writes, within the poll interval for other replicas'), its stored due time (a bake's end, a
// wave's deadline: one timer per process, armed for the earliest), an operator's control, its
// own transition (what it stored may let it move on), or the moment it takes the lease (what
// happened before: every progressing rollout, once). Nothing polls every rollout, so rollouts
// waiting on a bake cost nothing at rest.
//
// Looks are queued by deployment and taken in batches (--rollout-batch-size) by up to
// LOOKS_AT_ONCE loops: a batch is read at once (its active rollouts, their statuses) and its
// transitions written in one transaction, each still a compare-and-set of its own (a rollout
// moved meanwhile by another replica is left out of the write and looked at again; the others
// are written), so when many waves end at once each region's version row is taken once per
// batch, not once per rollout. A second loop takes what was queued meanwhile while the first
// batch's write waits on the database, so one slow write does not hold every later hand-off
// back. A rollout is in at most one look at a time (a deployment being looked at stays queued
// until that look ends), so a wave starts once; a batch whose write fails is written again in
// halves, down to one rollout, so one that cannot be written holds no other back. What is stored (the rollouts' rows, their due times) is all
// there is: a driver killed mid-batch leaves each rollout as its last committed transition
// left it, and the next driver's first look (every progressing rollout) takes them on.
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { ResourceType, RolloutState, type RegionStatus } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Logger } from "@flotilla/runtime";
import { ACTIVE_ROLLOUT_STATES, type RolloutChange, type StatusEvent, type Store, type StoredRollout } from "@flotilla/store";
import type { CtrlMetrics } from "../metrics.ts";
import { statusesOf, type StatusOptions } from "../status/region-status.ts";
import type { StatusFeed } from "../streaming/status-feed.ts";
import { bakeUnderAnalysis } from "./analysis.ts";
import { evaluateSteps, type Decision } from "./gate.ts";

/** Transitions a rollout may make in a row without an outside cause (a look's own steps and the looks again after them). */
const MAX_STEPS = 20;
/** How soon a rollout whose due time passed without a transition is looked at again. */
const OVERDUE_RETRY_MS = 250;
/** How soon a rollout whose look failed (the database) is looked at again. */
const RETRY_MS = 1000;
/** Longest a timer is set for: the due time of another replica's new rollout is found by then. */
const MAX_TIMER_MS = 60_000;
/** The lease whose holder drives. */
const LEASE = "rollout-driver";
export const DEFAULT_ROLLOUT_LEASE_MS = 5000;
/** Rollouts looked at, and their transitions written, per transaction. */
export const DEFAULT_ROLLOUT_BATCH_SIZE = 100;
/** Batches looked at (read and written) at once. */
const LOOKS_AT_ONCE = 2;

export interface RolloutDriverOptions {
  /** How long the driver's lease lasts unrenewed (DEFAULT_ROLLOUT_LEASE_MS). */
  leaseMs?: number;
  /** Rollouts per look and per transaction (DEFAULT_ROLLOUT_BATCH_SIZE). */
  batchSize?: number;
}

export class RolloutDriver {
  readonly #store: Store;
  readonly #statusOptions: StatusOptions;
  readonly #metrics: CtrlMetrics;
  readonly #log: Logger;
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Number.POSITIVE_INFINITY;
  #stopped = false;
  #unsubscribe: (() => void) | undefined;
  /** Deployments whose active rollout is to be looked at, in order, each with the transitions it made in a row before. */
  readonly #queue = new Map<string, number>();
  /** Deployments in a look now: queued again, they wait for it to end. */
  readonly #looking = new Set<string>();
  /** Loops taking the queue that run. */
  #working = 0;
  /** Called when the last loop ends (nothing left to take). */
  #idle: (() => void)[] = [];
  readonly #leaseMs: number;
  readonly #batchSize: number;
  readonly #holder = `${hostname()}-${process.pid}-${randomBytes(4).toString("hex")}`;
  #leading = false;
  #leaseTimer: NodeJS.Timeout | undefined;

  constructor(store: Store, statusOptions: StatusOptions, metrics: CtrlMetrics, log: Logger, options: RolloutDriverOptions = {}) {
    this.#store = store;
    this.#statusOptions = statusOptions;
    this.#metrics = metrics;
    this.#log = log;
    this.#leaseMs = options.leaseMs ?? DEFAULT_ROLLOUT_LEASE_MS;
    this.#batchSize = options.batchSize ?? DEFAULT_ROLLOUT_BATCH_SIZE;
  }

  /** Whether this replica drives now (holds the lease). */
  get leading(): boolean {
    return this.#leading;
  }

  /** Follows `feed` and competes for the lease. */
  start(feed: StatusFeed): void {
    this.#unsubscribe = feed.subscribe((events) => this.#observed(events));
    void this.#renew();
  }

  /** Stops driving and gives the lease up, so that another replica drives at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe?.();
    clearTimeout(this.#timer);
    clearTimeout(this.#leaseTimer);
    if (this.#leading) await this.#store.leases.release(LEASE, this.#holder).catch(() => {});
    this.#setLeading(false);
  }

  /**
   * Takes or renews the lease. On taking it: arms the timer and looks once at every progressing
   * rollout (an observation stored while no one drove, e.g. by a replica killed before it drove
   * the rollout on, wakes no one else and would leave the rollout waiting for its deadline).
   */
  async #renew(): Promise<void> {
    if (this.#stopped) return;
    let held = false;
    try {
      held = await this.#store.leases.acquire(LEASE, this.#holder, this.#leaseMs);
    } catch (error) {
      this.#log.error(`rollout driver lease: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (this.#stopped) return;
    if (held && !this.#leading) {
      this.#setLeading(true);
      void this.#arm();
      void this.#driveProgressing();
    } else if (!held && this.#leading) {
      this.#setLeading(false);
      clearTimeout(this.#timer);
      this.#timerAt = Number.POSITIVE_INFINITY;
      this.#queue.clear();
    }
    this.#leaseTimer = setTimeout(() => void this.#renew(), this.#leaseMs / 3);
    this.#leaseTimer.unref();
  }

  #setLeading(leading: boolean): void {
    if (leading !== this.#leading) this.#log.info(leading ? "driving rollouts (holds the rollout-driver lease)" : "no longer driving rollouts");
    this.#leading = leading;
    this.#metrics.rolloutDriverLeading.set(leading ? 1 : 0);
  }

  /**
   * Applies `decision` to `current` (an operator's control): returns the rollout as stored
   * after, or undefined when another writer moved it meanwhile.
   */
  async apply(current: StoredRollout, decision: Decision, actor: string): Promise<StoredRollout | undefined> {
    const now = Date.now();
    const stored = await this.#store.rollouts.transition(
      current,
      decision.next,
      { move: decision.move, restore: decision.restore },
      decision.action,
      actor,
      now,
    );
    if (stored) this.#transitioned(current, stored, now);
    return stored;
  }

  /**
   * Looks at these deployments' rollouts now, leading or not: the analysis measurements this
   * replica just stored for them may decide a wave. The driving replica learns of them from its
   * status feed (at once for its own writes); another's at its next poll, which a wave's
   * hand-off would wait for (B12A). Safe anywhere: every transition is a compare-and-set, so a
   * rollout the driver moved meanwhile is left to it; what this look stores wakes the driver's
   * feed like any write.
   */
  async lookNow(deploymentIds: readonly string[]): Promise<void> {
    if (this.#stopped || this.#leading) return;
    const free = deploymentIds.filter((id) => !this.#looking.has(id));
    if (free.length === 0) return;
    for (const id of free) this.#looking.add(id);
    try {
      await this.#look(new Map(free.map((id) => [id, 0])));
    } finally {
      for (const id of free) this.#looking.delete(id);
    }
  }

  /** Looks at `rollout` (its deployment's active rollout) soon and moves it as far as the gate allows. */
  drive(rollout: StoredRollout): void {
    this.#enqueue([rollout.deploymentId]);
  }

  /** Queues looks at these deployments' rollouts (`steps`: transitions they made in a row before) and starts the loop. */
  #enqueue(deploymentIds: Iterable<string>, steps = 0): void {
    if (!this.#leading || this.#stopped) return;
    for (const id of deploymentIds) if (!this.#queue.has(id)) this.#queue.set(id, steps);
    if (this.#working < LOOKS_AT_ONCE) void this.#work();
  }

  /** The next batch: queued deployments not in a look now, in queue order, at most a batch's size. */
  #take(): Map<string, number> {
    const batch = new Map<string, number>();
    for (const [id, steps] of this.#queue) {
      if (batch.size >= this.#batchSize) break;
      if (!this.#looking.has(id)) batch.set(id, steps);
    }
    for (const id of batch.keys()) {
      this.#queue.delete(id);
      this.#looking.add(id);
    }
    return batch;
  }

  /** Takes the queue a batch at a time until nothing is left to take (what waits for a look is taken when that look ends). */
  async #work(): Promise<void> {
    this.#working++;
    try {
      while (!this.#stopped && this.#leading) {
        const batch = this.#take();
        if (batch.size === 0) break;
        try {
          await this.#look(batch);
        } finally {
          for (const id of batch.keys()) this.#looking.delete(id);
        }
      }
    } finally {
      this.#working--;
      if (this.#working === 0) for (const resolve of this.#idle.splice(0)) resolve();
    }
  }

  /** Resolves once the loops have emptied the queue (at once when none runs). */
  #drained(): Promise<void> {
    if (this.#working === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Looks at the active rollouts of these deployments (deployment id → transitions in a row before) and writes what the gate decides. */
  async #look(batch: ReadonlyMap<string, number>): Promise<void> {
    let changes: RolloutChange[];
    try {
      const rollouts = (await this.#store.rollouts.activeOf([...batch.keys()])).filter((r) => r.state === RolloutState.PROGRESSING);
      if (rollouts.length === 0) return;
      const statuses = await statusesOf(
        this.#store,
        ResourceType.DEPLOYMENT,
        rollouts.map((r) => r.deploymentId),
        this.#statusOptions,
      );
      const measurements = Map.groupBy(await this.#store.analysis.ofBakes(rollouts.flatMap(bakeUnderAnalysis)), (m) => m.rolloutId);
      const now = Date.now();
      changes = [];
      for (const rollout of rollouts) {
        const byRegion = new Map<string, RegionStatus>((statuses.get(rollout.deploymentId) ?? []).map((s) => [s.region, s]));
        const ofBake = measurements.get(rollout.id) ?? [];
        const steps = evaluateSteps(rollout, byRegion, now, MAX_STEPS - batch.get(rollout.deploymentId)!, ofBake);
        if (steps.length > 0) {
          const effects = (d: Decision) => ({ move: d.move, restore: d.restore });
          changes.push({ current: rollout, steps: steps.map((d) => ({ next: d.next, effects: effects(d), action: d.action })), actor: "rollout" });
        } else if (this.#leading && rollout.dueAt !== undefined && rollout.dueAt < this.#timerAt) {
          // Staged by a write (not by this driver): its deadline is due here too.
          this.#setTimer(rollout.dueAt, now);
        }
      }
    } catch (error) {
      // A transient failure (a lost connection) must not leave them waiting for their next due time.
      this.#log.error(`rollouts: ${error instanceof Error ? error.message : String(error)}; looking again in ${RETRY_MS} ms`);
      this.#retry([...batch.keys()]);
      return;
    }
    await this.#write(changes, batch);
  }

  /**
   * Writes `changes` in one transaction; after a failure (a deadlock, a lost connection, one
   * rollout that cannot be written), each half on its own, down to one rollout, which is looked
   * at again in RETRY_MS. Each written (or lost to another writer) is looked at again at once.
   */
  async #write(changes: RolloutChange[], batch: ReadonlyMap<string, number>): Promise<void> {
    if (changes.length === 0) return;
    let stored: (StoredRollout | undefined)[];
    const now = Date.now();
    try {
      stored = await this.#store.rollouts.transitionMany(changes, now);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (changes.length === 1) {
        this.#log.error(`rollout ${changes[0]!.current.id}: ${message}; looking again in ${RETRY_MS} ms`);
        this.#retry([changes[0]!.current.deploymentId]);
        return;
      }
      this.#log.warn(`rollouts: a batch of ${changes.length} transitions failed (${message}); writing it in halves`);
      const half = Math.ceil(changes.length / 2);
      await this.#write(changes.slice(0, half), batch);
      await this.#write(changes.slice(half), batch);
      return;
    }
    for (const [i, change] of changes.entries()) {
      const after = stored[i];
      if (after) this.#transitioned(change.current, after, now);
      // What it stored may let it move on; lost to another replica: look at what that one stored.
      const steps = batch.get(change.current.deploymentId)! + (after ? change.steps.length : 1);
      if (steps < MAX_STEPS) this.#enqueue([change.current.deploymentId], steps);
    }
  }

  #retry(deploymentIds: string[]): void {
    if (!this.#stopped) setTimeout(() => this.#enqueue(deploymentIds), RETRY_MS).unref();
  }

  /** Looks at every progressing rollout once, a page at a time. */
  async #driveProgressing(): Promise<void> {
    try {
      let pageToken = "";
      do {
        const page = await this.#store.rollouts.list({ state: RolloutState.PROGRESSING }, 0, pageToken);
        this.#enqueue(page.items.map((r) => r.deploymentId));
        pageToken = page.nextPageToken;
      } while (pageToken !== "" && !this.#stopped && this.#leading);
    } catch (error) {
      this.#log.error(`rollouts: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  #observed(events: StatusEvent[]): void {
    this.#enqueue(events.filter((e) => e.type === ResourceType.DEPLOYMENT).map((e) => e.id));
  }

  #transitioned(before: StoredRollout, after: StoredRollout, now: number): void {
    if (before.state !== after.state) {
      const ended = !ACTIVE_ROLLOUT_STATES.includes(after.state);
      if (ended) this.#metrics.rolloutsEnded.inc({ result: RolloutState[after.state] ?? "UNSPECIFIED" });
    }
    for (let i = 0; i < after.waves.length; i++) {
      const wave = after.waves[i]!;
      if (wave.endTime !== undefined && before.waves[i]?.endTime === undefined && wave.startTime !== undefined) {
        this.#metrics.waveSeconds.observe((wave.endTime - wave.startTime) / 1000);
      }
    }
    if (this.#leading && after.dueAt !== undefined && after.dueAt < this.#timerAt) this.#setTimer(after.dueAt, now);
  }

  /** Sets the timer for the earliest due rollout (looked up once per run, not per rollout). */
  async #arm(): Promise<void> {
    if (this.#stopped || !this.#leading) return;
    try {
      const due = await this.#store.rollouts.nextDue();
      const now = Date.now();
      // One still due after it was looked at waits for a change (its gate had nothing to do): no busy loop.
      this.#setTimer(due === undefined ? now + MAX_TIMER_MS : Math.max(due, now + OVERDUE_RETRY_MS), now);
    } catch (error) {
      this.#log.error(`rollouts: ${error instanceof Error ? error.message : String(error)}`);
      this.#setTimer(Date.now() + 1000, Date.now());
    }
  }

  #setTimer(at: number, now: number): void {
    if (this.#stopped || !this.#leading) return;
    clearTimeout(this.#timer);
    const when = Math.min(at, now + MAX_TIMER_MS);
    this.#timerAt = when;
    this.#timer = setTimeout(() => void this.#fire(), Math.max(0, when - now));
    this.#timer.unref();
  }

  /** The due rollouts (a batch's worth) are looked at; then the timer is armed for the next. */
  async #fire(): Promise<void> {
    this.#timerAt = Number.POSITIVE_INFINITY;
    try {
      const due = await this.#store.rollouts.due(Date.now(), this.#batchSize);
      this.#enqueue(due.map((r) => r.deploymentId));
      await this.#drained();
    } catch (error) {
      this.#log.error(`rollouts: ${error instanceof Error ? error.message : String(error)}`);
    }
    await this.#arm();
  }
}
