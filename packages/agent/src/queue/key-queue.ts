// The work queue's first layer, after client-go's workqueue.Interface: keys, not states.
//
// Invariants:
// * Dedupe: a key waiting to be handed out is queued once, however often it is added.
// * One worker per key: get() marks the key processing; a processing key is never handed out
//   again until done(key), so no key is ever processed by two workers at once.
// * Collapse: add(key) while the key is processing marks it dirty, and done(key) queues it
//   exactly once more; that run reads the newest desired state (the queue holds keys only).
// * Order: keys are handed out in the order they were queued.
// * shutDown() wakes every waiting get() with undefined; afterwards add() is ignored and get()
//   returns undefined at once.

/** The operations every layer of the queue offers (client-go's Interface). */
export interface Queue {
  /**
   * Marks `key` as needing a run. `change` is false when nothing about the key changed (a delay
   * ran out); a layer that watches the rhythm of changes does not count such an add.
   */
  add(key: string, change?: boolean): void;
  /** The next key to process (now marked processing), or undefined once shut down. */
  get(): Promise<string | undefined>;
  /** Ends the processing of `key`; queues it again if it was added meanwhile. */
  done(key: string): void;
  /** Stops handing out keys (see each layer for what else it cancels). */
  shutDown(): void;
  readonly shuttingDown: boolean;
  /** Keys ready to be handed out (not counting processing or delayed ones). */
  readonly length: number;
}

/** A layer over another queue: passes what it does not change through to it. */
export abstract class QueueLayer implements Queue {
  protected readonly inner: Queue;

  constructor(inner: Queue) {
    this.inner = inner;
  }

  abstract add(key: string, change?: boolean): void;

  get(): Promise<string | undefined> {
    return this.inner.get();
  }

  done(key: string): void {
    this.inner.done(key);
  }

  shutDown(): void {
    this.inner.shutDown();
  }

  get shuttingDown(): boolean {
    return this.inner.shuttingDown;
  }

  get length(): number {
    return this.inner.length;
  }
}

/** What the queue reports for metrics, at the points client-go's workqueue reports them. */
export interface QueueMetrics {
  /** A key became pending (not an add absorbed by a pending run). */
  add(key: string): void;
  /** A key was handed to a worker. */
  get(key: string): void;
  /** A worker finished a key. */
  done(key: string): void;
}

export interface KeyQueueOptions {
  /** Called when add() was absorbed by an already pending run of the key. */
  onCoalesced?: (key: string) => void;
  metrics?: QueueMetrics;
}

export class KeyQueue implements Queue {
  readonly #onCoalesced: (key: string) => void;
  readonly #metrics: QueueMetrics | undefined;
  /** Keys ready to hand out, in order; #head is the next one (cheaper than Array.shift). */
  #ready: string[] = [];
  #head = 0;
  /** Keys that need a run: in #ready, or processing and to be queued again on done(). */
  readonly #dirty = new Set<string>();
  readonly #processing = new Set<string>();
  #getters: ((key: string | undefined) => void)[] = [];
  #shuttingDown = false;

  constructor(options: KeyQueueOptions = {}) {
    this.#onCoalesced = options.onCoalesced ?? (() => {});
    this.#metrics = options.metrics;
  }

  add(key: string): void {
    if (this.#shuttingDown) return;
    if (this.#dirty.has(key)) return this.#onCoalesced(key);
    this.#metrics?.add(key);
    this.#dirty.add(key);
    if (this.#processing.has(key)) return;
    this.#push(key);
  }

  get(): Promise<string | undefined> {
    if (this.#shuttingDown) return Promise.resolve(undefined);
    if (this.#head < this.#ready.length) return Promise.resolve(this.#take(this.#shift()));
    return new Promise((resolve) => this.#getters.push(resolve));
  }

  done(key: string): void {
    this.#metrics?.done(key);
    this.#processing.delete(key);
    if (this.#dirty.has(key)) this.#push(key);
  }

  shutDown(): void {
    this.#shuttingDown = true;
    for (const resolve of this.#getters) resolve(undefined);
    this.#getters = [];
  }

  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  get length(): number {
    return this.#ready.length - this.#head;
  }

  #push(key: string): void {
    const getter = this.#getters.shift();
    if (getter) getter(this.#take(key));
    else this.#ready.push(key);
  }

  #shift(): string {
    const key = this.#ready[this.#head++]!;
    // Drop the consumed front once it is most of the array.
    if (this.#head > 1024 && this.#head * 2 > this.#ready.length) {
      this.#ready = this.#ready.slice(this.#head);
      this.#head = 0;
    }
    return key;
  }

  #take(key: string): string {
    this.#metrics?.get(key);
    this.#dirty.delete(key);
    this.#processing.add(key);
    return key;
  }
}
