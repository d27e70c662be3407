// The bytes of stream messages waiting for their clients, process-wide (--send-budget-bytes).
// A stream holds its message (the rows read for it and their encoding) until its client has
// taken it, and a client that never reads holds it until the send timeout: without a bound,
// memory grows with the streams opened. A stream reserves its next message's bytes before it
// reads them (a snapshot's page) or, when it cannot know them before, once it has them (a
// watch's batch); the reservation is released when the client asks for the next message.
//
// When the budget is exhausted, a stream waits, and the streams whose clients have not taken
// their message for --send-budget-stall are reset (oldest first; gRPC: RESOURCE_EXHAUSTED)
// until it fits. That keeps a reading client fast: it takes a message in milliseconds, so what
// holds the budget is the clients that do not read, and its share is taken from theirs at once
// (at worst after the stall time, while the first stalled messages are younger); it is never
// refused. Refusing the newcomer instead would refuse good clients for as long as stalled ones
// hold the budget (up to the send timeout); smaller messages would still leave every stalled
// stream holding one.
//
// The default, as the decode budget's: of the manifests' 512 MiB, V8's old generation may take
// half; the other half holds the young generation, code, Node itself (about 50 MB), the decode
// budget, the snapshots' read-ahead (--snapshot-read-ahead-bytes) and this. A message costs
// about its bytes: a snapshot batch's large resources are its page's own bytes, not a copy.
export const DEFAULT_SEND_BUDGET_BYTES = 16 * 1024 * 1024;
export const DEFAULT_SEND_BUDGET_STALL_MS = 1000;

/** One stream's part of the budget: at most one message at a time. */
export interface SendShare {
  /** Resolves once `bytes` (the next message, at most the whole budget) are reserved; rejects with the stream's signal's reason. */
  reserve(bytes: number): Promise<void>;
  /** The message, of `bytes` (its reservation becomes that), is with the client's transport from now. */
  sent(bytes: number): void;
  /** The client took the message, or the stream ended. */
  release(): void;
}

interface Share {
  bytes: number;
  /** Resets the stream (its client does not read). */
  reset(): void;
}

interface Waiter {
  share: Share;
  bytes: number;
  grant(): void;
}

export class SendBudget {
  readonly capacity: number;
  readonly #stallMs: number;
  readonly #onReset: () => void;
  #used = 0;
  readonly #queue: Waiter[] = [];
  /** Shares whose message is with the transport, by when it was sent: oldest first (insertion order). */
  readonly #sent = new Map<Share, number>();
  #timer: NodeJS.Timeout | undefined;

  /** `onReset` counts the streams reset to make room. */
  constructor(capacity: number, stallMs: number, onReset: () => void = () => {}) {
    this.capacity = capacity;
    this.#stallMs = stallMs;
    this.#onReset = onReset;
  }

  get used(): number {
    return this.#used;
  }

  /** A share for one stream: `reset` ends it at the transport, `signal` ends its waits. */
  share(reset: () => void, signal: AbortSignal): SendShare {
    const share: Share = { bytes: 0, reset };
    return {
      reserve: async (bytes) => {
        signal.throwIfAborted();
        this.#release(share);
        this.#grant();
        const amount = Math.min(bytes, this.capacity);
        if (amount === 0) return;
        // In order: a large message is not passed over again and again by small ones.
        if (this.#queue.length === 0 && this.#used + amount <= this.capacity) {
          this.#take(share, amount);
          return;
        }
        await new Promise<void>((resolve, reject) => {
          const waiter: Waiter = {
            share,
            bytes: amount,
            grant: () => {
              signal.removeEventListener("abort", aborted);
              resolve();
            },
          };
          const aborted = () => {
            this.#queue.splice(this.#queue.indexOf(waiter), 1);
            this.#grant(); // the waiters behind it may fit now
            reject(signal.reason);
          };
          signal.addEventListener("abort", aborted, { once: true });
          this.#queue.push(waiter);
          this.#reclaim();
        });
      },
      sent: (bytes) => {
        // A message larger than reserved is already built: counted, not waited for.
        this.#take(share, bytes - share.bytes);
        this.#sent.delete(share);
        // Resetting a stream that holds nothing would make no room.
        if (bytes > 0) this.#sent.set(share, Date.now());
        this.#grant();
        this.#reclaim();
      },
      release: () => {
        this.#release(share);
        this.#grant();
      },
    };
  }

  #take(share: Share, bytes: number): void {
    share.bytes += bytes;
    this.#used += bytes;
  }

  #release(share: Share): void {
    this.#used -= share.bytes;
    share.bytes = 0;
    this.#sent.delete(share);
  }

  /** Grants the waiters at the head of the queue that fit. */
  #grant(): void {
    while (this.#queue.length > 0 && this.#used + this.#queue[0]!.bytes <= this.capacity) {
      const waiter = this.#queue.shift()!;
      this.#take(waiter.share, waiter.bytes);
      waiter.grant();
    }
  }

  /** While the head waiter does not fit, resets the streams stalled longest; or checks again when the oldest will have stalled long enough. */
  #reclaim(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#queue.length > 0 && this.#used + this.#queue[0]!.bytes > this.capacity) {
      const oldest = this.#sent.entries().next();
      if (oldest.done) return; // the holders are still building their messages: sent() comes back here
      const [share, sentAt] = oldest.value;
      const stalledMs = Date.now() - sentAt;
      if (stalledMs < this.#stallMs) {
        this.#timer = setTimeout(() => this.#reclaim(), this.#stallMs - stalledMs).unref();
        return;
      }
      this.#release(share);
      this.#onReset();
      share.reset();
      this.#grant();
    }
  }
}
