// A one-slot rendezvous between a producer that must run inside a callback (a pinned
// database connection) and a consumer iterating at its own pace.
export class Channel<T> implements AsyncIterable<T> {
  #item: { value: T; taken: () => void; refused: (error: Error) => void } | undefined;
  #waiting: ((result: IteratorResult<T>) => void) | undefined;
  #failWaiting: ((error: unknown) => void) | undefined;
  #ended = false;
  #error: unknown;

  /** Resolves once the consumer took the value; rejects if the consumer went away. */
  send(value: T): Promise<void> {
    if (this.#ended) return Promise.reject(new Error("channel closed"));
    return new Promise<void>((taken, refused) => {
      this.#item = { value, taken, refused };
      this.#deliver();
    });
  }

  /** The producer finished (with an error, if given). */
  end(error?: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#error = error;
    this.#deliver();
  }

  /** The consumer went away: a pending or later send rejects. */
  close(): void {
    this.#ended = true;
    this.#item?.refused(new Error("channel closed"));
    this.#item = undefined;
  }

  #deliver(): void {
    if (!this.#waiting) return;
    const resolve = this.#waiting;
    const reject = this.#failWaiting!;
    if (this.#item) {
      const item = this.#item;
      this.#item = undefined;
      this.#waiting = this.#failWaiting = undefined;
      item.taken();
      resolve({ value: item.value, done: false });
    } else if (this.#ended) {
      this.#waiting = this.#failWaiting = undefined;
      if (this.#error !== undefined) reject(this.#error);
      else resolve({ value: undefined, done: true });
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () =>
        new Promise<IteratorResult<T>>((resolve, reject) => {
          this.#waiting = resolve;
          this.#failWaiting = reject;
          this.#deliver();
        }),
      return: async () => {
        this.close();
        return { value: undefined, done: true };
      },
    };
  }
}
