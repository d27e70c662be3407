// The work queue's delaying and rate-limiting layer, after client-go's DelayingInterface and
// RateLimitingInterface.
//
// Invariants:
// * addAfter(key, ms) adds the key once the delay ran out; of several pending delays for a key
//   the earliest wins.
// * addRateLimited(key) counts a failure and adds the key after a per-key exponential backoff
//   with jitter (backoffDelay()); forget(key) resets that count after a success.
// * A server's Retry-After is a floor on that delay, and a key waiting out a Retry-After is not
//   pulled forward: add() of it is absorbed (counted as coalesced).
// * add() of a key waiting out a plain backoff cancels the wait and adds it now: a new change
//   does not wait for the retry of an old one.
// * shutDown() cancels every pending delay.
import { backoffDelay, type BackoffOptions } from "../backoff.ts";
import { AGENT_DEFAULTS } from "../config.ts";
import { QueueLayer, type Queue } from "./key-queue.ts";

export interface RateLimitingOptions {
  /** Per-key retry backoff. Default: AGENT_DEFAULTS.retryBackoff (100 ms .. 5 min). */
  backoff?: BackoffOptions;
  /** Random source of the jitter (tests make it deterministic). */
  random?: () => number;
  /** Called when add() was absorbed by a key waiting out a Retry-After. */
  onCoalesced?: (key: string) => void;
}

interface Waiting {
  timer: NodeJS.Timeout;
  /** When the timer fires (ms since epoch). */
  at: number;
  /** A server's Retry-After (add() must not pull it forward), not a plain backoff. */
  retryAfter: boolean;
}

export class RateLimitingQueue extends QueueLayer {
  readonly backoff: BackoffOptions;
  readonly #random: () => number;
  readonly #onCoalesced: (key: string) => void;
  readonly #waiting = new Map<string, Waiting>();
  readonly #failures = new Map<string, number>();

  constructor(inner: Queue, options: RateLimitingOptions = {}) {
    super(inner);
    this.backoff = options.backoff ?? AGENT_DEFAULTS.retryBackoff;
    this.#random = options.random ?? Math.random;
    this.#onCoalesced = options.onCoalesced ?? (() => {});
  }

  add(key: string, change = true): void {
    if (this.shuttingDown) return;
    const waiting = this.#waiting.get(key);
    if (waiting?.retryAfter) return this.#onCoalesced(key);
    if (waiting) this.#cancelWait(key);
    this.inner.add(key, change);
  }

  /** Adds `key` after `delayMs`; of several pending delays for a key the earliest wins. */
  addAfter(key: string, delayMs: number, retryAfter = false): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) return this.add(key);
    const at = Date.now() + delayMs;
    const existing = this.#waiting.get(key);
    if (existing && existing.at <= at) return;
    if (existing) this.#cancelWait(key);
    const timer = setTimeout(() => {
      this.#waiting.delete(key);
      this.inner.add(key, false);
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

  override shutDown(): void {
    for (const key of [...this.#waiting.keys()]) this.#cancelWait(key);
    super.shutDown();
  }

  /** Keys waiting out a backoff or Retry-After. */
  get delayed(): number {
    return this.#waiting.size;
  }

  #cancelWait(key: string): void {
    const waiting = this.#waiting.get(key);
    if (!waiting) return;
    clearTimeout(waiting.timer);
    this.#waiting.delete(key);
  }
}
