// The bytes of requests being read and decoded at once, process-wide (--decode-budget-bytes).
// Decoding is where a request costs memory it does not declare (a message object per element,
// a JS string per string): with every request limited to its RPC's size and shape, a budget on
// the bytes in decoding at once bounds the memory all of them take together. A request reserves
// what it declares (or its RPC's limit when it declares nothing) before its body is read,
// so until then only HTTP/2 flow control's window of it is buffered; the others wait in order,
// and one that waited --decode-wait is refused with RESOURCE_EXHAUSTED and a RetryInfo.
import { create } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { RetryInfoSchema } from "@flotilla/proto/google/rpc/error_details_pb.js";

export const DEFAULT_DECODE_BUDGET_BYTES = 16 * 1024 * 1024;
export const DEFAULT_DECODE_WAIT_MS = 1000;

interface Waiter {
  bytes: number;
  grant(): void;
}

export class DecodeBudget {
  readonly capacity: number;
  readonly #waitMs: number;
  readonly #onRefused: () => void;
  #used = 0;
  readonly #queue: Waiter[] = [];

  /** `onRefused` counts requests refused after waiting `waitMs`. */
  constructor(capacity: number, waitMs: number, onRefused: () => void = () => {}) {
    this.capacity = capacity;
    this.#waitMs = waitMs;
    this.#onRefused = onRefused;
  }

  get used(): number {
    return this.#used;
  }

  /**
   * Resolves with the release function once `bytes` (at most the whole budget) are reserved;
   * rejects with RESOURCE_EXHAUSTED after the wait, or with `signal`'s reason.
   */
  async reserve(bytes: number, signal: AbortSignal): Promise<() => void> {
    const amount = Math.min(bytes, this.capacity);
    // In order: a large request is not passed over again and again by small ones.
    if (this.#queue.length === 0 && this.#used + amount <= this.capacity) {
      this.#used += amount;
    } else {
      await new Promise<void>((resolve, reject) => {
        const waiter: Waiter = {
          bytes: amount,
          grant: () => {
            done();
            resolve();
          },
        };
        const done = () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", aborted);
        };
        const leave = (reason: unknown) => {
          done();
          this.#queue.splice(this.#queue.indexOf(waiter), 1);
          this.#grant(); // the waiters behind it may fit now
          reject(reason);
        };
        const aborted = () => leave(signal.reason);
        const timer = setTimeout(() => {
          this.#onRefused();
          leave(this.#refusal());
        }, this.#waitMs);
        signal.throwIfAborted();
        signal.addEventListener("abort", aborted, { once: true });
        this.#queue.push(waiter);
      });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#used -= amount;
      this.#grant();
    };
  }

  /** Grants the waiters at the head of the queue that fit. */
  #grant(): void {
    while (this.#queue.length > 0 && this.#used + this.#queue[0]!.bytes <= this.capacity) {
      const waiter = this.#queue.shift()!;
      this.#used += waiter.bytes;
      waiter.grant();
    }
  }

  #refusal(): ConnectError {
    return new ConnectError(
      `ctrl is decoding ${this.#used} bytes of other requests (its budget is ${this.capacity}); retry in ${this.#waitMs} ms`,
      Code.ResourceExhausted,
      undefined,
      [{ desc: RetryInfoSchema, value: create(RetryInfoSchema, { retryDelay: durationFromMs(this.#waitMs) }) }],
    );
  }
}
