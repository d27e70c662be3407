// A buffer between a producer that must run inside a callback (a pinned database
// connection or an open read transaction) and a consumer iterating at its own pace. The
// producer runs ahead of its consumer within a byte budget shared by every buffer, so a
// snapshot that fits is read whole and its connection returned at once, however slowly its
// client reads, and the memory held for slow clients stays bounded however many there are.
// Once the budget is spent a producer waits until its own consumer has taken what it
// produced (that wait is bounded by the stream's send timeout), so streams whose clients
// read still progress.

/** Bytes every ReadAhead sharing it may hold together. */
export class ReadAheadBudget {
  readonly max: number;
  #used = 0;
  readonly #waiting = new Set<() => void>();

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
    for (const wake of this.#waiting) wake();
    this.#waiting.clear();
  }

  /** Resolves at the next give(). */
  changed(): Promise<void> {
    return new Promise((resolve) => this.#waiting.add(resolve));
  }
}

export class ReadAhead<T> implements AsyncIterable<T> {
  readonly #budget: ReadAheadBudget;
  readonly #items: { value: T; bytes: number }[] = [];
  #waiting: { resolve: (result: IteratorResult<T>) => void; reject: (error: unknown) => void } | undefined;
  #ended = false;
  #closed = false;
  #error: unknown;

  constructor(budget: ReadAheadBudget) {
    this.#budget = budget;
  }

  /** Queues `value`; resolves once more may be produced; rejects if the consumer went away. */
  async push(value: T, bytes: number): Promise<void> {
    if (this.#closed || this.#ended) throw new Error("read-ahead closed");
    this.#items.push({ value, bytes });
    this.#budget.take(bytes);
    this.#deliver();
    while (this.#budget.used > this.#budget.max && this.#items.length > 0) {
      await this.#budget.changed();
      if (this.#closed) throw new Error("read-ahead closed");
    }
  }

  /** The producer finished (with an error, if given). */
  end(error?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#error = error;
    this.#deliver();
  }

  /** The consumer went away: what is queued is dropped, a waiting or later push rejects. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const bytes = this.#items.reduce((n, item) => n + item.bytes, 0);
    this.#items.length = 0;
    this.#budget.give(bytes);
  }

  #deliver(): void {
    const waiting = this.#waiting;
    if (!waiting) return;
    const item = this.#items.shift();
    if (item) {
      this.#waiting = undefined;
      this.#budget.give(item.bytes);
      waiting.resolve({ value: item.value, done: false });
    } else if (this.#ended) {
      this.#waiting = undefined;
      if (this.#error !== undefined) waiting.reject(this.#error);
      else waiting.resolve({ value: undefined, done: true });
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () =>
        new Promise<IteratorResult<T>>((resolve, reject) => {
          this.#waiting = { resolve, reject };
          this.#deliver();
        }),
      return: async () => {
        this.close();
        return { value: undefined, done: true };
      },
    };
  }
}

/** At most `size` holders at once; the others wait in order (or until their signal aborts). */
export class Slots {
  #free: number;
  readonly #queue: (() => void)[] = [];

  constructor(size: number) {
    this.#free = size;
  }

  /** Runs `task` holding a slot. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
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
