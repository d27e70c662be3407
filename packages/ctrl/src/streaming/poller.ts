// One poller per ctrl process reads new outbox rows for every region that has watchers and
// fans them out. Its query rate depends on the poll interval and on how many regions
// changed, never on how many streams are open.
//
// Two kinds of poll:
// - full: every watched region's head in one query, then the new changes of those that moved.
//   Runs once per interval, from the previous full poll's start: other replicas' writes and
//   deleted regions are seen by it.
// - woken: a write of this process committed changes of some regions (wake), and only those
//   are polled, with no query for heads. The commit hands over the outbox rows it wrote: when
//   they follow on from what a region's streams were sent, they are fanned out as they are,
//   with no query at all; otherwise (another replica wrote in between, or a commit's rows
//   arrive before an earlier commit's) the region is read from the outbox. Wakes never put off
//   the next full poll.
import type { Logger } from "@flotilla/runtime";
import { changeOf, type Change, type ChangeLog, type CommittedChange } from "@flotilla/store";
import type { CtrlMetrics } from "../metrics.ts";
import { Subscription } from "./subscription.ts";

export interface PollerOptions {
  /** Bounds the latency of writes made by other ctrl replicas. */
  intervalMs: number;
  /** Outbox rows read per query. */
  readLimit: number;
}

/** What the poller reads of the outbox. */
export type ChangeSource = Pick<ChangeLog, "heads" | "read">;

/** The error that ends a region's streams when the outbox can no longer serve them. */
export type LostHandler = (regionName: string, why: "region_deleted" | "pruned", position: number) => Error;

interface RegionState {
  name: string;
  /** Every change up to here has been fanned out to the region's subscriptions. */
  position: number;
  subscriptions: Set<Subscription>;
}

/**
 * Streams served per event-loop turn during a fan-out: a region's 1,000 streams in one turn, a
 * larger region's in turns of about 7 ms (other calls wait no longer). Between turns HTTP/2
 * flushes what was written and runs the writes' completions; in one turn it frames a change for
 * all the streams at once and the completions come after the last stream's bytes are out. With
 * 64 streams a turn (before), a write's last of 1,000 streams over TLS got it at 10.5 ms (median
 * over 400 writes) against 7.8 ms in one turn, and the p99 of all streams read 14.7 against 13.6
 * ms, taking turns in one run (docs/benchmarks.md, "A fan-out in one turn").
 */
export const FAN_OUT_CHUNK = 1024;

/**
 * Pushes `changes` to every subscription, yielding to the event loop between chunks of
 * FAN_OUT_CHUNK streams.
 */
async function fanOut(subscriptions: Set<Subscription>, changes: Change[]): Promise<void> {
  const targets = [...subscriptions];
  for (let i = 0; i < targets.length; i += FAN_OUT_CHUNK) {
    if (i > 0) await new Promise((resolve) => setImmediate(resolve));
    for (const sub of targets.slice(i, i + FAN_OUT_CHUNK)) if (subscriptions.has(sub)) sub.push(changes);
  }
}

export class ChangePoller {
  readonly #changes: ChangeSource;
  readonly #options: PollerOptions;
  readonly #metrics: CtrlMetrics;
  readonly #regions = new Map<number, RegionState>();
  #running = false;
  #again = false;
  /** Regions whose changes this process committed since the last poll began. */
  readonly #woken = new Set<number>();
  /** The outbox rows of those commits, by watched region (null: not all known, or too many: read them). */
  readonly #committed = new Map<number, CommittedChange[] | null>();
  /** When the last full poll began (performance.now()). */
  #lastFullPoll = Number.NEGATIVE_INFINITY;
  #wakeSleep: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  readonly #lost: LostHandler;

  readonly #log: Logger;

  constructor(changes: ChangeSource, options: PollerOptions, metrics: CtrlMetrics, lost: LostHandler, log: Logger) {
    this.#log = log;
    this.#changes = changes;
    this.#options = options;
    this.#metrics = metrics;
    this.#lost = lost;
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#run();
  }

  async stop(): Promise<void> {
    this.#running = false;
    this.#wakeSleep?.();
    await this.#loop;
  }

  /**
   * Joins the region's fan-out. `head` is the region version the caller read; the
   * subscription receives every change after max(cursor, joinedAt) through push(), so the
   * caller must itself read (cursor, joinedAt] when cursor < joinedAt.
   */
  subscribe(regionId: number, regionName: string, cursor: number, head: number, bufferLimit: number): Subscription {
    let state = this.#regions.get(regionId);
    if (!state) {
      state = { name: regionName, position: head, subscriptions: new Set() };
      this.#regions.set(regionId, state);
    }
    const sub = new Subscription(regionId, cursor, state.position, bufferLimit);
    state.subscriptions.add(sub);
    return sub;
  }

  unsubscribe(sub: Subscription): void {
    sub.close();
    const state = this.#regions.get(sub.regionId);
    if (!state?.subscriptions.delete(sub)) return;
    if (state.subscriptions.size === 0) this.#regions.delete(sub.regionId);
  }

  /**
   * Polls `regionIds` now: a write of this process just committed changes of them, and wrote
   * the outbox rows `written` (undefined: not known).
   */
  wake(regionIds: readonly number[], written?: readonly CommittedChange[]): void {
    for (const id of regionIds) {
      this.#woken.add(id);
      if (!this.#regions.has(id)) continue;
      const held = this.#committed.get(id);
      const rows = written?.filter((row) => row.regionId === id);
      const known = held === null || rows === undefined ? null : [...(held ?? []), ...rows];
      this.#committed.set(id, known !== null && known.length <= this.#options.readLimit ? known : null);
    }
    this.#again = true;
    this.#wakeSleep?.();
  }

  async #run(): Promise<void> {
    while (this.#running) {
      this.#again = false;
      const started = performance.now();
      const full = started - this.#lastFullPoll >= this.#options.intervalMs;
      // A full poll covers the woken regions too.
      const woken = [...this.#woken];
      const committed = new Map(this.#committed);
      this.#woken.clear();
      this.#committed.clear();
      try {
        if (full) {
          this.#lastFullPoll = started;
          await this.#pollAll();
        } else {
          await this.#pollWoken(woken, committed);
        }
      } catch (error) {
        this.#log.error(`change poller: ${error instanceof Error ? error.message : String(error)}`);
      }
      if (this.#again || !this.#running) continue;
      await new Promise<void>((resolve) => {
        // The interval runs from the full poll's start: a long fan-out does not stretch it.
        const timer = setTimeout(resolve, Math.max(0, this.#options.intervalMs - (performance.now() - this.#lastFullPoll)));
        this.#wakeSleep = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wakeSleep = undefined;
    }
  }

  async #query<T>(run: () => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await run();
    } finally {
      this.#metrics.pollerQueries.inc();
      this.#metrics.pollerQueryDuration.observe((performance.now() - started) / 1000);
    }
  }

  /** The full poll: every watched region's head, then the changes of those that moved. */
  async #pollAll(): Promise<void> {
    const ids = [...this.#regions.keys()];
    if (ids.length === 0) return;
    const heads = await this.#query(() => this.#changes.heads(ids));
    for (const id of ids) {
      const state = this.#regions.get(id);
      if (!state) continue;
      const head = heads.get(id);
      if (head === undefined) {
        this.#failAll(id, state, this.#lost(state.name, "region_deleted", state.position));
        continue;
      }
      this.#metrics.headVersion.set({ region: state.name }, head);
      if (state.position < head) await this.#drain(id, state, head);
    }
  }

  /** The woken regions' new changes: those their commits wrote when they follow on, else read without heads. */
  async #pollWoken(ids: readonly number[], committed: ReadonlyMap<number, CommittedChange[] | null>): Promise<void> {
    for (const id of ids) {
      const state = this.#regions.get(id);
      if (!state) continue;
      const changes = followingOn(committed.get(id), state.position);
      if (changes === undefined) {
        await this.#drain(id, state, undefined);
        continue;
      }
      if (changes.length === 0) continue; // sent already (a full poll read them)
      state.position = changes[changes.length - 1]!.version;
      this.#metrics.headVersion.set({ region: state.name }, state.position);
      await fanOut(state.subscriptions, changes);
    }
  }

  /**
   * Reads and fans out the region's changes after its position, up to `head` when it is known,
   * else until a read comes back short (then nothing newer had committed when it ran).
   */
  async #drain(id: number, state: RegionState, head: number | undefined): Promise<void> {
    while (this.#regions.get(id) === state) {
      const changes = await this.#query(() => this.#changes.read(id, state.position, this.#options.readLimit));
      if (changes.length === 0 && head === undefined) return;
      if (changes.length === 0 || changes[0]!.version !== state.position + 1) {
        // Pruned past our position (or the region was recreated): nobody here can resume.
        this.#failAll(id, state, this.#lost(state.name, "pruned", state.position));
        return;
      }
      state.position = changes[changes.length - 1]!.version;
      if (head === undefined) this.#metrics.headVersion.set({ region: state.name }, state.position);
      await fanOut(state.subscriptions, changes);
      if (changes.length < this.#options.readLimit || (head !== undefined && state.position >= head)) return;
    }
  }

  #failAll(id: number, state: RegionState, error: Error): void {
    for (const sub of state.subscriptions) sub.fail(error);
    this.#regions.delete(id);
  }
}

/**
 * The changes of `rows` (a region's committed outbox rows) after `position`, when they are
 * exactly the versions right after it: [] when all were sent; undefined when unknown (null),
 * or when some version between is missing (written by another replica, or by a commit whose
 * rows have not been handed over yet).
 */
function followingOn(rows: readonly CommittedChange[] | null | undefined, position: number): Change[] | undefined {
  if (!rows) return undefined;
  const fresh = rows.filter((row) => row.version > position).sort((a, b) => a.version - b.version);
  for (let i = 0; i < fresh.length; i++) if (fresh[i]!.version !== position + 1 + i) return undefined;
  return fresh.map((row) => changeOf(row.body));
}
