// A per-key work queue after client-go's workqueue (rate-limiting + delaying):
//
// * add(key) dedupes: a key waiting to be processed is queued once, however often it is added.
// * get() hands a key to one worker and marks it processing; a processing key is never handed
//   out again until done(key), so no key is ever processed by two workers at once.
// * add(key) while the key is processing marks it dirty: done(key) queues it exactly once more,
//   and that run reads the newest desired state (the queue holds keys, not states).
// * A key in a burst of changes settles before it is handed out: one added again within
//   `settleMs` of its previous add waits until it has had no add for twice its mean interval
//   between adds (capped at `settleMs`; the mean, as adds arrive in batches), but no longer
//   than `maxHoldMs` in all, so a burst of updates to a key costs one run with its final state
//   rather than one per change a worker happens to catch. A key's first add after a quiet
//   spell is handed out at once: a single change is not delayed.
// * addRateLimited(key) requeues after a per-key exponential backoff with jitter; forget(key)
//   resets that backoff after a success. A Retry-After from the server is a floor on the delay,
//   and a key waiting out a Retry-After is not pulled forward by add().
// * run(handler) processes keys with bounded concurrency (p-limit) until shutDown().
import pLimit from "p-limit";
import { backoffDelay, type BackoffOptions } from "./backoff.ts";

export interface WorkQueueOptions {
  /** Keys processed at once by run(). Default 8. */
  concurrency?: number;
  /** Per-key retry backoff. Default 100 ms .. 5 min. */
  backoff?: BackoffOptions;
  /** Random source of the jitter (tests make it deterministic). */
  random?: () => number;
  /** Longest wait after a key's last add while it is in a burst of adds. Default 1 s; 0 turns settling off. */
  settleMs?: number;
  /** Longest a key in a burst is held back in all. Default 5 s. */
  maxHoldMs?: number;
  /** Called when add() was absorbed by an already pending run of the key. */
  onCoalesced?: (key: string) => void;
  /** Called when a handler threw (the key is then retried with backoff). */
  onHandlerError?: (key: string, error: unknown) => void;
}

export const DEFAULT_CONCURRENCY = 8;
export const DEFAULT_RETRY_BACKOFF: BackoffOptions = { minMs: 100, maxMs: 5 * 60_000 };
export const DEFAULT_SETTLE_MS = 1000;
export const DEFAULT_MAX_HOLD_MS = 5000;

interface Waiting {
  timer: NodeJS.Timeout;
  /** When the timer fires (ms since epoch). */
  at: number;
  /** A retry backoff (add() pulls it forward), a server's Retry-After or a burst settling (add() must not). */
  kind: "backoff" | "retryAfter" | "settle";
}

/** A key's recent adds. */
interface RecentAdds {
  /** The last add (ms since epoch). */
  last: number;
  /** The key is in a burst (added again within settleMs): its first add, and adds since. */
  burst?: { since: number; adds: number };
}

export class WorkQueue {
  readonly concurrency: number;
  readonly backoff: BackoffOptions;
  readonly settleMs: number;
  readonly maxHoldMs: number;
  readonly #random: () => number;
  readonly #onCoalesced: (key: string) => void;
  readonly #onHandlerError: (key: string, error: unknown) => void;
  /** Keys ready to hand out, in order. */
  #ready: string[] = [];
  /** Keys that need a run: in #ready, or processing and to be queued again on done(). */
  readonly #dirty = new Set<string>();
  readonly #processing = new Set<string>();
  readonly #waiting = new Map<string, Waiting>();
  readonly #failures = new Map<string, number>();
  /** Keys added within the last settleMs, oldest last add first. */
  readonly #recent = new Map<string, RecentAdds>();
  #getters: ((key: string | undefined) => void)[] = [];
  #shuttingDown = false;

  constructor(options: WorkQueueOptions = {}) {
    this.concurrency = options.concurrency ?? DEFAULT_CONCURRENCY;
    this.backoff = options.backoff ?? DEFAULT_RETRY_BACKOFF;
    this.settleMs = options.settleMs ?? DEFAULT_SETTLE_MS;
    this.maxHoldMs = options.maxHoldMs ?? DEFAULT_MAX_HOLD_MS;
    this.#random = options.random ?? Math.random;
    this.#onCoalesced = options.onCoalesced ?? (() => {});
    this.#onHandlerError = options.onHandlerError ?? (() => {});
    if (!(this.concurrency >= 1)) throw new RangeError(`concurrency must be at least 1, got ${this.concurrency}`);
  }

  /** Marks `key` as needing a run (deduped; collapses into one more run if it is processing). */
  add(key: string): void {
    if (this.#shuttingDown) return;
    this.#noteAdd(key);
    const waiting = this.#waiting.get(key);
    if (waiting && waiting.kind !== "backoff") return this.#onCoalesced(key);
    if (waiting) this.#cancelWait(key);
    this.#enqueue(key);
  }

  /** Adds `key` after `delayMs`; of several pending delays for a key the earliest wins. */
  addAfter(key: string, delayMs: number, retryAfter = false): void {
    if (this.#shuttingDown) return;
    if (delayMs <= 0) return this.add(key);
    const at = Date.now() + delayMs;
    const existing = this.#waiting.get(key);
    if (existing && existing.at <= at) return;
    if (existing) this.#cancelWait(key);
    this.#wait(key, delayMs, retryAfter ? "retryAfter" : "backoff");
  }

  /**
   * Counts a failure of `key` and adds it after its backoff; `retryAfterMs` (a server's
   * Retry-After) is a floor on the delay. Returns the delay chosen.
   */
  addRateLimited(key: string, retryAfterMs?: number): number {
    const failures = this.#failures.get(key) ?? 0;
    this.#failures.set(key, failures + 1);
    const delay = Math.max(backoffDelay(failures, this.backoff, this.#random), retryAfterMs ?? 0);
    this.addAfter(key, delay, retryAfterMs !== undefined);
    return delay;
  }

  /** Resets the backoff of `key` (after a success). */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  /** Consecutive failures counted for `key` since its last forget(). */
  failures(key: string): number {
    return this.#failures.get(key) ?? 0;
  }

  /** The next key to process (now marked processing), or undefined once shut down. */
  get(): Promise<string | undefined> {
    if (this.#shuttingDown) return Promise.resolve(undefined);
    // A queued key may have been added again since it was queued: it may have to settle now.
    for (let key = this.#ready.shift(); key !== undefined; key = this.#ready.shift()) {
      if (!this.#settle(key)) return Promise.resolve(this.#take(key));
    }
    return new Promise((resolve) => this.#getters.push(resolve));
  }

  /** Ends the processing of `key`; queues it again if it was added meanwhile. */
  done(key: string): void {
    this.#processing.delete(key);
    if (this.#dirty.has(key)) this.#push(key);
  }

  /** Keys ready to be processed (not counting processing or delayed ones). */
  get length(): number {
    return this.#ready.length;
  }

  /** Keys waiting out a backoff or Retry-After. */
  get delayed(): number {
    return this.#waiting.size;
  }

  /**
   * Processes keys with at most `concurrency` handlers at once until shutDown(); resolves when
   * the handlers in flight have finished. The handler decides about retries (forget /
   * addRateLimited / addAfter); one that throws is retried with backoff.
   */
  async run(handler: (key: string) => Promise<void>): Promise<void> {
    const limit = pLimit(this.concurrency);
    const inFlight = new Set<Promise<void>>();
    for (;;) {
      // Take a key only when a slot is free: keys not yet taken stay in the queue, where
      // further adds of them are deduped.
      while (inFlight.size >= this.concurrency) await Promise.race(inFlight);
      const key = await this.get();
      if (key === undefined) break;
      const run: Promise<void> = limit(() => handler(key))
        .catch((error: unknown) => {
          this.#onHandlerError(key, error);
          this.addRateLimited(key);
        })
        .finally(() => {
          this.done(key);
          inFlight.delete(run);
        });
      inFlight.add(run);
    }
    await Promise.all(inFlight);
  }

  /** Stops handing out keys and cancels delayed adds; run() resolves after its handlers finish. */
  shutDown(): void {
    this.#shuttingDown = true;
    for (const key of [...this.#waiting.keys()]) this.#cancelWait(key);
    for (const resolve of this.#getters) resolve(undefined);
    this.#getters = [];
  }

  /** Marks `key` dirty and queues it unless it is queued or processing already. */
  #enqueue(key: string): void {
    if (this.#dirty.has(key)) return this.#onCoalesced(key);
    this.#dirty.add(key);
    if (this.#processing.has(key)) return;
    this.#push(key);
  }

  #push(key: string): void {
    if (this.#settle(key)) return;
    const getter = this.#getters.shift();
    if (getter) getter(this.#take(key));
    else this.#ready.push(key);
  }

  #take(key: string): string {
    this.#dirty.delete(key);
    this.#processing.add(key);
    // Handed out: the burst's hold is over (later adds begin a new one).
    const recent = this.#recent.get(key);
    if (recent) delete recent.burst;
    return key;
  }

  #noteAdd(key: string): void {
    if (this.settleMs <= 0) return;
    const now = Date.now();
    const previous = this.#recent.get(key);
    // Re-inserted, so the map stays ordered by last add and stale entries leave from its front.
    this.#recent.delete(key);
    if (previous && now - previous.last < this.settleMs) {
      const burst = previous.burst ?? { since: previous.last, adds: 1 };
      this.#recent.set(key, { last: now, burst: { since: burst.since, adds: burst.adds + 1 } });
    } else {
      this.#recent.set(key, { last: now });
    }
    for (const [stale, { last }] of this.#recent) {
      if (last > now - this.settleMs) break;
      this.#recent.delete(stale);
    }
  }

  /** Holds a queued key back while its burst settles (it is queued again then); whether it did. */
  #settle(key: string): boolean {
    const recent = this.#recent.get(key);
    if (!recent?.burst) return false;
    const { since, adds } = recent.burst;
    const meanInterval = (recent.last - since) / (adds - 1);
    const at = Math.min(recent.last + Math.min(2 * meanInterval, this.settleMs), since + this.maxHoldMs);
    const delay = at - Date.now();
    if (delay <= 0) return false;
    this.#dirty.delete(key);
    this.#wait(key, delay, "settle");
    return true;
  }

  /** Queues `key` again after `delayMs` (not counted as an add). */
  #wait(key: string, delayMs: number, kind: Waiting["kind"]): void {
    const timer = setTimeout(() => {
      this.#waiting.delete(key);
      this.#enqueue(key);
    }, delayMs);
    this.#waiting.set(key, { timer, at: Date.now() + delayMs, kind });
  }

  #cancelWait(key: string): void {
    const waiting = this.#waiting.get(key);
    if (!waiting) return;
    clearTimeout(waiting.timer);
    this.#waiting.delete(key);
  }
}
