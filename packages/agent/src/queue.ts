// A per-key work queue after client-go's workqueue (rate-limiting + delaying):
//
// * add(key) dedupes: a key waiting to be processed is queued once, however often it is added.
// * get() hands a key to one worker and marks it processing; a processing key is never handed
//   out again until done(key), so no key is ever processed by two workers at once.
// * add(key) while the key is processing marks it dirty: done(key) queues it exactly once more,
//   and that run reads the newest desired state (the queue holds keys, not states).
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
  /** Called when add() was absorbed by an already pending run of the key. */
  onCoalesced?: (key: string) => void;
  /** Called when a handler threw (the key is then retried with backoff). */
  onHandlerError?: (key: string, error: unknown) => void;
}

export const DEFAULT_CONCURRENCY = 8;
export const DEFAULT_RETRY_BACKOFF: BackoffOptions = { minMs: 100, maxMs: 5 * 60_000 };

interface Waiting {
  timer: NodeJS.Timeout;
  /** When the timer fires (ms since epoch). */
  at: number;
  /** Waiting out a server's Retry-After: add() must not pull it forward. */
  retryAfter: boolean;
}

export class WorkQueue {
  readonly concurrency: number;
  readonly backoff: BackoffOptions;
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
  #getters: ((key: string | undefined) => void)[] = [];
  #shuttingDown = false;

  constructor(options: WorkQueueOptions = {}) {
    this.concurrency = options.concurrency ?? DEFAULT_CONCURRENCY;
    this.backoff = options.backoff ?? DEFAULT_RETRY_BACKOFF;
    this.#random = options.random ?? Math.random;
    this.#onCoalesced = options.onCoalesced ?? (() => {});
    this.#onHandlerError = options.onHandlerError ?? (() => {});
    if (!(this.concurrency >= 1)) throw new RangeError(`concurrency must be at least 1, got ${this.concurrency}`);
  }

  /** Marks `key` as needing a run (deduped; collapses into one more run if it is processing). */
  add(key: string): void {
    if (this.#shuttingDown) return;
    const waiting = this.#waiting.get(key);
    if (waiting?.retryAfter) return this.#onCoalesced(key);
    if (waiting) this.#cancelWait(key);
    if (this.#dirty.has(key)) return this.#onCoalesced(key);
    this.#dirty.add(key);
    if (this.#processing.has(key)) return;
    this.#push(key);
  }

  /** Adds `key` after `delayMs`; of several pending delays for a key the earliest wins. */
  addAfter(key: string, delayMs: number, retryAfter = false): void {
    if (this.#shuttingDown) return;
    if (delayMs <= 0) return this.add(key);
    const at = Date.now() + delayMs;
    const existing = this.#waiting.get(key);
    if (existing && existing.at <= at) return;
    if (existing) this.#cancelWait(key);
    const timer = setTimeout(() => {
      this.#waiting.delete(key);
      this.add(key);
    }, delayMs);
    this.#waiting.set(key, { timer, at, retryAfter });
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
    const key = this.#ready.shift();
    if (key !== undefined) return Promise.resolve(this.#take(key));
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

  #push(key: string): void {
    const getter = this.#getters.shift();
    if (getter) getter(this.#take(key));
    else this.#ready.push(key);
  }

  #take(key: string): string {
    this.#dirty.delete(key);
    this.#processing.add(key);
    return key;
  }

  #cancelWait(key: string): void {
    const waiting = this.#waiting.get(key);
    if (!waiting) return;
    clearTimeout(waiting.timer);
    this.#waiting.delete(key);
  }
}
