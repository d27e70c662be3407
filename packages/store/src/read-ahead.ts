// A bounded buffer between a producer that must run inside a callback (a pinned database
// connection or an open read transaction) and a consumer iterating at its own pace. The
// producer runs ahead of the consumer up to `maxBytes`, so a snapshot that fits is read
// whole and its connection returned at once, however slowly the client reads; only a
// larger one makes the producer wait (bounded by the stream's send timeout).
export class ReadAhead<T> implements AsyncIterable<T> {
  readonly #maxBytes: number;
  readonly #items: { value: T; bytes: number }[] = [];
  #bytes = 0;
  #room: (() => void) | undefined;
  #waiting: { resolve: (result: IteratorResult<T>) => void; reject: (error: unknown) => void } | undefined;
  #ended = false;
  #closed = false;
  #error: unknown;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Queues `value`; resolves once there is room for more; rejects if the consumer went away. */
  async push(value: T, bytes: number): Promise<void> {
    if (this.#closed || this.#ended) throw new Error("read-ahead closed");
    this.#items.push({ value, bytes });
    this.#bytes += bytes;
    this.#deliver();
    while (this.#bytes > this.#maxBytes && this.#items.length > 0) {
      await new Promise<void>((resolve) => (this.#room = resolve));
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
    this.#closed = true;
    this.#items.length = 0;
    this.#bytes = 0;
    this.#wake();
  }

  #wake(): void {
    const room = this.#room;
    this.#room = undefined;
    room?.();
  }

  #deliver(): void {
    const waiting = this.#waiting;
    if (!waiting) return;
    const item = this.#items.shift();
    if (item) {
      this.#waiting = undefined;
      this.#bytes -= item.bytes;
      if (this.#bytes <= this.#maxBytes) this.#wake();
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
