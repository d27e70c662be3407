// Returning the memory of a burst of work to the system (what Go's debug.FreeOSMemory does).
//
// A full sync of 100,000 resources makes far more garbage than it leaves live (decoded
// resources, manifests, API requests and responses, watch events). V8 frees it in the heap but
// keeps the pages resident afterwards, and an idle process runs no further GC that would give
// them back, so the agent's RSS stays at the peak of its busiest moment for as long as it runs
// (measured: 459 MB RSS for a 125 MB heap after ordinary full GCs; 104 MB after one
// memory-reducing GC). Once a burst of at least `afterReconciles` reconciles is over (the work
// queue empty, no observation left to report, and no reconcile or report for `idleMs`: the
// reporter's batches after a fast restart would otherwise grow the young generation right
// back), the agent runs one memory-reducing GC (V8's
// "last resort" flavour: compacts and releases free pages), then returns the free pages of the
// C heap (glibc's malloc_trim, @flotilla/malloc-trim): the burst's buffers outside V8's heap
// leave its arenas fragmented, and free() returns nothing below a live block (B7, 100,000
// resources: 12.6 MB). It pauses the process once, for about 50–300 ms with 100,000
// resources, at a moment it has nothing to do.
import { releaseMemory } from "@flotilla/malloc-trim";

export interface MemoryReleaseOptions {
  /** Reconciles since the last release that make a burst worth releasing; 0 turns releasing off. */
  afterReconciles: number;
  /** Quiet time (no reconcile, no report) that ends a burst, if nothing is waiting then. */
  idleMs: number;
  /** Work still waiting: queued keys, observations to report. */
  waiting: () => number;
  /** Does the release; default: a memory-reducing GC (releaseMemory()). */
  release?: () => void;
}

export class MemoryRelease {
  readonly #options: MemoryReleaseOptions;
  readonly #release: () => void;
  #reconciles = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: MemoryReleaseOptions) {
    this.#options = options;
    this.#release = options.release ?? releaseMemory;
  }

  /** After each reconcile. */
  reconciled(): void {
    this.#reconciles++;
    this.#busy();
  }

  /**
   * After the start (the first complete sync dispatched): starting is a burst of its own, however
   * few resources there are (modules loaded and compiled, the first lists and the snapshot read),
   * so the first quiet moment after it releases. An agent of a small region then holds what it
   * needs (B7, 0 resources: 76 MB rather than 94 MB), not its start's garbage.
   */
  started(): void {
    this.#reconciles = Math.max(this.#reconciles, this.#options.afterReconciles);
    this.#busy();
  }

  /** After each report sent: not a reconcile, but the burst is not over. */
  reported(): void {
    this.#busy();
  }

  /**
   * Starts the idle wait anew once the burst is big enough. When it ends with work still waiting
   * (a report can empty the backlog without sending anything), it waits again.
   */
  #busy(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#options.afterReconciles === 0 || this.#reconciles < this.#options.afterReconciles) return;
    const idle = () => {
      if (this.#options.waiting() > 0) {
        this.#timer = setTimeout(idle, this.#options.idleMs).unref();
        return;
      }
      this.#timer = undefined;
      this.#reconciles = 0;
      this.#release();
    };
    this.#timer = setTimeout(idle, this.#options.idleMs).unref();
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
