// What snapshots may hold for their clients before the clients ask for it (a byte budget
// shared by all of them), and the slots that bound how many of their queries run at once.

/** Bytes its holders may hold together: they check `used < max` before taking more. */
export class ReadAheadBudget {
  readonly max: number;
  #used = 0;

  constructor(max: number) {
    this.max = max;
  }

  get used(): number {
    return this.#used;
  }

  take(bytes: number): void {
    this.#used += bytes;
  }

  give(bytes: number): void {
    this.#used -= bytes;
  }
}

/** At most `size` holders at once; the others wait in order (or until their signal aborts). */
export class Slots {
  #free: number;
  readonly #queue: (() => void)[] = [];

  constructor(size: number) {
    this.#free = size;
  }

  /** Runs `task` holding a slot (unless `signal` aborts while it waits for one). */
  async run<T>(task: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const release = await this.acquire(signal);
    try {
      return await task();
    } finally {
      release();
    }
  }

  /** Resolves with the release function once a slot is held. */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    if (this.#free > 0) {
      this.#free--;
    } else {
      await new Promise<void>((resolve, reject) => {
        const granted = () => {
          signal?.removeEventListener("abort", aborted);
          resolve();
        };
        const aborted = () => {
          this.#queue.splice(this.#queue.indexOf(granted), 1);
          reject(signal!.reason);
        };
        signal?.throwIfAborted();
        signal?.addEventListener("abort", aborted, { once: true });
        this.#queue.push(granted);
      });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#queue.shift();
      if (next) next();
      else this.#free++;
    };
  }
}
