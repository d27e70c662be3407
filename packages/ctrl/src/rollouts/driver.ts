// Drives active rollouts through their waves (gate.ts decides, the store writes with a
// compare-and-set). One replica drives at a time: the one holding the database lease
// "rollout-driver" (renewed every third of --rollout-lease-duration; another replica takes it
// once it has expired, so a killed driver's rollouts wait at most that long). The others only
// apply operators' controls, each a compare-and-set too, so a replica that lost its turn (or
// its lease, mid-look) writes nothing.
//
// The driver looks at a rollout when something it waits for may have changed: a status event
// of its deployment (an agent's report, through the status feed: at once for this process's
// writes, within the poll interval for other replicas'), its stored due time (a bake's end, a
// wave's deadline: one timer per process, armed for the earliest), an operator's control, or
// the moment it takes the lease (what happened before: every progressing rollout, once).
// Nothing polls every rollout, so rollouts waiting on a bake cost nothing at rest.
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { ResourceType, RolloutState, type RegionStatus } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Logger } from "@flotilla/runtime";
import type { StatusEvent, Store, StoredRollout } from "@flotilla/store";
import type { CtrlMetrics } from "../metrics.ts";
import { statusesOf, type StatusOptions } from "../status/region-status.ts";
import type { StatusFeed } from "../streaming/status-feed.ts";
import { evaluate, type Decision } from "./gate.ts";

/** Transitions one look at a rollout may make in a row (a wave with no bake ends and the next starts at once). */
const MAX_STEPS = 20;
/** Due rollouts handled per timer run. */
const DUE_BATCH = 100;
/** How soon a rollout whose due time passed without a transition is looked at again. */
const OVERDUE_RETRY_MS = 250;
/** How soon a rollout whose look failed (the database) is looked at again. */
const RETRY_MS = 1000;
/** Longest a timer is set for: the due time of another replica's new rollout is found by then. */
const MAX_TIMER_MS = 60_000;
/** The lease whose holder drives. */
const LEASE = "rollout-driver";
export const DEFAULT_ROLLOUT_LEASE_MS = 5000;

export class RolloutDriver {
  readonly #store: Store;
  readonly #statusOptions: StatusOptions;
  readonly #metrics: CtrlMetrics;
  readonly #log: Logger;
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Number.POSITIVE_INFINITY;
  #stopped = false;
  #unsubscribe: (() => void) | undefined;
  /** Rollouts being looked at now, with a flag to look again once done (a change meanwhile). */
  readonly #inFlight = new Map<string, { again: boolean }>();
  readonly #leaseMs: number;
  readonly #holder = `${hostname()}-${process.pid}-${randomBytes(4).toString("hex")}`;
  #leading = false;
  #leaseTimer: NodeJS.Timeout | undefined;

  constructor(store: Store, statusOptions: StatusOptions, metrics: CtrlMetrics, log: Logger, leaseMs = DEFAULT_ROLLOUT_LEASE_MS) {
    this.#store = store;
    this.#statusOptions = statusOptions;
    this.#metrics = metrics;
    this.#log = log;
    this.#leaseMs = leaseMs;
  }

  /** Whether this replica drives now (holds the lease). */
  get leading(): boolean {
    return this.#leading;
  }

  /** Follows `feed` and competes for the lease. */
  start(feed: StatusFeed): void {
    this.#unsubscribe = feed.subscribe((events) => void this.#observed(events));
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
   * Applies `decide` to the rollout `id` (an operator's control, or the gate) and drives it
   * on: returns the rollout as stored after, or undefined when `decide` had nothing to do.
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

  /** Looks at rollout `id` now and moves it as far as the gate allows. */
  async drive(id: string): Promise<void> {
    if (!this.#leading) return;
    const flight = this.#inFlight.get(id);
    if (flight) {
      flight.again = true;
      return;
    }
    const mine = { again: true };
    this.#inFlight.set(id, mine);
    try {
      while (mine.again && !this.#stopped && this.#leading) {
        mine.again = false;
        for (let step = 0; step < MAX_STEPS; step++) {
          const rollout = await this.#store.rollouts.get(id);
          const decision = evaluate(rollout, await this.#statuses(rollout), Date.now());
          if (!decision) {
            // Staged by a write (not by this driver): its deadline is due here too.
            if (rollout.dueAt !== undefined && rollout.dueAt < this.#timerAt) this.#setTimer(rollout.dueAt, Date.now());
            break;
          }
          // Lost to another replica: look again at what it stored.
          await this.apply(rollout, decision, "rollout");
        }
      }
    } catch (error) {
      // A transient failure (a deadlock, a lost connection) must not leave it waiting for its next due time.
      this.#log.error(`rollout ${id}: ${error instanceof Error ? error.message : String(error)}; looking again in ${RETRY_MS} ms`);
      if (!this.#stopped) setTimeout(() => void this.drive(id), RETRY_MS).unref();
    } finally {
      this.#inFlight.delete(id);
    }
  }

  /** Drives every progressing rollout once, a page at a time. */
  async #driveProgressing(): Promise<void> {
    try {
      let pageToken = "";
      do {
        const page = await this.#store.rollouts.list({ state: RolloutState.PROGRESSING }, 0, pageToken);
        await Promise.all(page.items.map((r) => this.drive(r.id)));
        pageToken = page.nextPageToken;
      } while (pageToken !== "" && !this.#stopped);
    } catch (error) {
      this.#log.error(`rollouts: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /** The rollout's deployment's status per region, by region name. */
  async #statuses(rollout: StoredRollout): Promise<Map<string, RegionStatus>> {
    const statuses = await statusesOf(this.#store, ResourceType.DEPLOYMENT, [rollout.deploymentId], this.#statusOptions);
    return new Map((statuses.get(rollout.deploymentId) ?? []).map((s) => [s.region, s]));
  }

  async #observed(events: StatusEvent[]): Promise<void> {
    const ids = [...new Set(events.filter((e) => e.type === ResourceType.DEPLOYMENT).map((e) => e.id))];
    if (ids.length === 0 || this.#stopped || !this.#leading) return;
    try {
      for (const rollout of await this.#store.rollouts.activeOf(ids)) {
        if (rollout.state === RolloutState.PROGRESSING) void this.drive(rollout.id);
      }
    } catch (error) {
      this.#log.error(`rollouts: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  #transitioned(before: StoredRollout, after: StoredRollout, now: number): void {
    if (before.state !== after.state) {
      const ended = ![RolloutState.PROGRESSING, RolloutState.WAITING_APPROVAL, RolloutState.PAUSED, RolloutState.FAILED].includes(after.state);
      if (ended) this.#metrics.rolloutsEnded.inc({ result: RolloutState[after.state] ?? "UNSPECIFIED" });
    }
    for (let i = 0; i < after.waves.length; i++) {
      const wave = after.waves[i]!;
      if (wave.endTime !== undefined && before.waves[i]?.endTime === undefined && wave.startTime !== undefined) {
        this.#metrics.waveSeconds.observe((wave.endTime - wave.startTime) / 1000);
      }
    }
    if (after.dueAt !== undefined && after.dueAt < this.#timerAt) this.#setTimer(after.dueAt, now);
  }

  /** Sets the timer for the earliest due rollout (looked up once per run, not per rollout). */
  async #arm(): Promise<void> {
    if (this.#stopped || !this.#leading) return;
    try {
      const due = await this.#store.rollouts.nextDue();
      const now = Date.now();
      // One still due after it was driven waits for a change (its gate had nothing to do): no busy loop.
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

  async #fire(): Promise<void> {
    this.#timerAt = Number.POSITIVE_INFINITY;
    try {
      const due = await this.#store.rollouts.due(Date.now(), DUE_BATCH);
      await Promise.all(due.map((r) => this.drive(r.id)));
    } catch (error) {
      this.#log.error(`rollouts: ${error instanceof Error ? error.message : String(error)}`);
    }
    await this.#arm();
  }
}
