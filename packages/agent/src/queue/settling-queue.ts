// The work queue's burst layer: a key in a burst of changes settles before it is handed out, so
// a burst of updates to a key costs one run with its final state rather than one per change a
// worker happens to catch (B6 measures this).
//
// Invariants:
// * A key's first change after a quiet spell (none within `settleMs`) is handed out at once: a
//   single change is not delayed, unless the region is in a burst.
// * The region is in a burst while at least `burstKeys` keys changed within `settleMs` (a mass
//   update, a restart's full sync). Then get() hands a key's first change out no sooner than
//   `burstHoldMs` after it, so that a mass update's next round finds the key still queued: the
//   worker that took the key waits with it (its slot is the bound; no timer per key), and changes
//   meanwhile mark the key dirty, so it settles as a burst below.
// * A key changed again within `settleMs` of its previous change is in a burst. When get() would
//   hand it out, it is held until it has had no change for twice its mean interval between
//   changes (the mean, as changes arrive in batches), capped at `settleMs`, but no longer than
//   `maxHoldMs` after the burst began; then it is queued again.
// * A change of a held key is absorbed (counted as coalesced) and extends the burst.
// * Adds that are not changes (`add(key, false)`: a delay ran out) do not count towards a burst.
// * Handing a key out ends its burst; later changes begin a new one.
// * settleMs 0 turns the layer off, burstHoldMs 0 the region-wide hold. shutDown() cancels
//   every hold and wakes every waiting worker.
import { sleep } from "../backoff.ts";
import { AGENT_DEFAULTS } from "../config.ts";
import { QueueLayer, type Queue } from "./key-queue.ts";

export interface SettlingOptions {
  /** Longest wait after a key's last change while it is in a burst. 0 turns settling off. Default: AGENT_DEFAULTS.settleMs (1 s). */
  settleMs?: number;
  /** Longest a key in a burst is held back in all. Default: AGENT_DEFAULTS.maxHoldMs (5 s). */
  maxHoldMs?: number;
  /** Keys changed within settleMs that put the region in a burst. Default: AGENT_DEFAULTS.burstKeys (50). */
  burstKeys?: number;
  /** How long after it a key's first change waits while the region is in a burst. 0: never. Default: AGENT_DEFAULTS.burstHoldMs (250 ms). */
  burstHoldMs?: number;
  /** Called when a change was absorbed by a key being held. */
  onCoalesced?: (key: string) => void;
}

/** A key's recent changes. */
interface RecentChanges {
  /** The last change (ms since epoch). */
  last: number;
  /** The key is in a burst (changed again within settleMs): its first change, and changes since. */
  burst?: { since: number; changes: number };
}

export class SettlingQueue extends QueueLayer {
  readonly settleMs: number;
  readonly maxHoldMs: number;
  readonly burstKeys: number;
  readonly burstHoldMs: number;
  readonly #onCoalesced: (key: string) => void;
  /** Keys changed within the last settleMs, oldest last change first. */
  readonly #recent = new Map<string, RecentChanges>();
  /** Held keys, and the timer that queues each again. */
  readonly #held = new Map<string, NodeJS.Timeout>();
  /** Aborted by shutDown(): wakes the workers waiting out a first change's hold. */
  readonly #shutdown = new AbortController();

  constructor(inner: Queue, options: SettlingOptions = {}) {
    super(inner);
    this.settleMs = options.settleMs ?? AGENT_DEFAULTS.settleMs;
    this.maxHoldMs = options.maxHoldMs ?? AGENT_DEFAULTS.maxHoldMs;
    this.burstKeys = options.burstKeys ?? AGENT_DEFAULTS.burstKeys;
    this.burstHoldMs = options.burstHoldMs ?? AGENT_DEFAULTS.burstHoldMs;
    if (!(Number.isInteger(this.burstKeys) && this.burstKeys >= 1)) throw new RangeError(`burstKeys must be a positive integer, got ${this.burstKeys}`);
    this.#onCoalesced = options.onCoalesced ?? (() => {});
  }

  add(key: string, change = true): void {
    if (this.shuttingDown) return;
    if (change) this.#noteChange(key);
    if (this.#held.has(key)) return this.#onCoalesced(key);
    this.inner.add(key, change);
  }

  override async get(): Promise<string | undefined> {
    for (;;) {
      const key = await this.inner.get();
      if (key === undefined) return undefined;
      let delay = this.#holdFor(key);
      // A first change in a region-wide burst: wait with the key taken (changes meanwhile mark
      // it dirty), then decide again. Again while no change came: a timer may fire a millisecond
      // before the clock the hold is counted on says it ran out.
      while (delay > 0 && !this.#recent.get(key)?.burst) {
        await sleep(delay, this.#shutdown.signal);
        if (this.shuttingDown) {
          this.inner.done(key);
          return undefined;
        }
        delay = this.#holdFor(key);
      }
      if (delay <= 0) {
        // Handed out: the burst's hold is over (later changes begin a new one).
        const recent = this.#recent.get(key);
        if (recent) delete recent.burst;
        return key;
      }
      this.inner.done(key);
      if (!this.#held.has(key)) {
        this.#held.set(
          key,
          setTimeout(() => {
            this.#held.delete(key);
            this.inner.add(key, false);
          }, delay),
        );
      }
    }
  }

  override shutDown(): void {
    for (const timer of this.#held.values()) clearTimeout(timer);
    this.#held.clear();
    this.#shutdown.abort();
    super.shutDown();
  }

  /** Keys held back while their burst settles. */
  get held(): number {
    return this.#held.size;
  }

  #noteChange(key: string): void {
    if (this.settleMs <= 0) return;
    const now = Date.now();
    const previous = this.#recent.get(key);
    // Re-inserted, so the map stays ordered by last change and stale entries leave from its front.
    this.#recent.delete(key);
    if (previous && now - previous.last < this.settleMs) {
      const burst = previous.burst ?? { since: previous.last, changes: 1 };
      this.#recent.set(key, { last: now, burst: { since: burst.since, changes: burst.changes + 1 } });
    } else {
      this.#recent.set(key, { last: now });
    }
    this.#forgetStale(now);
  }

  /** Drops the keys whose last change is older than settleMs (the map's front). */
  #forgetStale(now: number): void {
    for (const [stale, { last }] of this.#recent) {
      if (last > now - this.settleMs) break;
      this.#recent.delete(stale);
    }
  }

  /**
   * How long `key` must still be held back (≤ 0: not at all). Stale entries leave here too, or a
   * burst's 100,000 keys would stay until the next change and keep the region in a burst.
   */
  #holdFor(key: string): number {
    const now = Date.now();
    this.#forgetStale(now);
    const recent = this.#recent.get(key);
    if (!recent) return 0;
    if (!recent.burst) return this.#recent.size >= this.burstKeys ? recent.last + this.burstHoldMs - now : 0;
    const { since, changes } = recent.burst;
    const meanInterval = (recent.last - since) / (changes - 1);
    return Math.min(recent.last + Math.min(2 * meanInterval, this.settleMs), since + this.maxHoldMs) - now;
  }
}
