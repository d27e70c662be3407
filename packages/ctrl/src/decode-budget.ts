// The bytes of requests being read and decoded at once, process-wide (--decode-budget-bytes).
// Decoding is where a request costs memory it does not declare (a message object per element,
// a JS string per string): with every request limited to its RPC's size and shape, a budget on
// the bytes in decoding at once bounds the memory all of them take together. A request reserves
// what it declares (or its RPC's limit when it declares nothing) before its body is read,
// so until then only HTTP/2 flow control's window of it is buffered; the others wait in order,
// and one that waited --decode-wait is refused with RESOURCE_EXHAUSTED and a RetryInfo.
//
// The budget bounds what requests hold while they are decoded, not what they leave: their
// garbage (socket chunks, connect's copy, decoded messages) waits for V8's next GC, and glibc
// keeps freed blocks in its arenas. Under the authenticated fuzz that was most of ctrl's peak
// (+64 to +96 MiB above rest with the budget alone, the same with a budget of 8 MiB). So a large
// request (LARGE_REQUEST_BYTES or more) also waits while ctrl's RSS is more than
// --decode-memory-headroom-bytes above what its memory releases left and another request is being
// decoded (memory-release.ts's MemoryPressure); the first one held asks V8 for a GC, and RSS is
// looked at again every MEMORY_RECHECK_MS while any waits. Small requests (agents' reports,
// operators' reads) pass the held ones: they cost little, and must not queue behind an attacker's
// bodies. With nothing else being decoded a large request goes ahead, so one always makes progress.
import { create } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { RetryInfoSchema } from "@flotilla/proto/google/rpc/error_details_pb.js";
import type { MemoryPressure } from "./memory-release.ts";

export const DEFAULT_DECODE_BUDGET_BYTES = 16 * 1024 * 1024;
export const DEFAULT_DECODE_WAIT_MS = 1000;
export const DEFAULT_DECODE_MEMORY_HEADROOM_BYTES = 40 * 1024 * 1024;
/** Reservations this large or larger wait under memory pressure. */
export const LARGE_REQUEST_BYTES = 64 * 1024;
const MEMORY_RECHECK_MS = 10;

interface Waiter {
  bytes: number;
  /** Set while it waits for memory rather than for the budget. */
  heldForMemory: boolean;
  grant(): void;
}

export class DecodeBudget {
  readonly capacity: number;
  readonly #waitMs: number;
  readonly #onRefused: () => void;
  #used = 0;
  readonly #queue: Waiter[] = [];
  readonly #memory: MemoryPressure | undefined;
  #memoryRecheck: NodeJS.Timeout | undefined;

  /** `onRefused` counts requests refused after waiting `waitMs`; `memory` holds large ones while it is high. */
  constructor(capacity: number, waitMs: number, onRefused: () => void = () => {}, memory?: MemoryPressure) {
    this.capacity = capacity;
    this.#waitMs = waitMs;
    this.#onRefused = onRefused;
    this.#memory = memory;
  }

  get used(): number {
    return this.#used;
  }

  /**
   * Resolves with the release function once `bytes` (at most the whole budget) are reserved
   * (and, for a large request, memory allows); rejects with RESOURCE_EXHAUSTED after the wait,
   * or with `signal`'s reason.
   */
  async reserve(bytes: number, signal: AbortSignal): Promise<() => void> {
    const amount = Math.min(bytes, this.capacity);
    // In order: a large request is not passed over again and again by small ones.
    if (this.#queue.length === 0 && this.#used + amount <= this.capacity && !this.#heldForMemory(amount)) {
      this.#used += amount;
    } else {
      await new Promise<void>((resolve, reject) => {
        const waiter: Waiter = {
          bytes: amount,
          heldForMemory: false,
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
          leave(this.#refusal(waiter));
        }, this.#waitMs);
        signal.throwIfAborted();
        signal.addEventListener("abort", aborted, { once: true });
        this.#queue.push(waiter);
        this.#grant(); // a small request passes those held for memory
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

  /**
   * Grants the waiters that fit, in order; a large one held for memory lets smaller ones behind
   * it pass (not larger ones: memory holds them too).
   */
  #grant(): void {
    let held = false;
    for (let i = 0; i < this.#queue.length; ) {
      const waiter = this.#queue[i]!;
      if (this.#used + waiter.bytes > this.capacity) break; // the budget is not passed over
      waiter.heldForMemory = this.#heldForMemory(waiter.bytes);
      if (waiter.heldForMemory) {
        held = true;
        i++;
        continue;
      }
      this.#queue.splice(i, 1);
      this.#used += waiter.bytes;
      waiter.grant();
    }
    if (held && this.#memoryRecheck === undefined) {
      this.#memory!.relieve();
      this.#memoryRecheck = setInterval(() => this.#grant(), MEMORY_RECHECK_MS).unref();
    } else if (!held && this.#memoryRecheck !== undefined) {
      clearInterval(this.#memoryRecheck);
      this.#memoryRecheck = undefined;
    }
  }

  /** A large request waits while memory is high, unless nothing else is being decoded. */
  #heldForMemory(bytes: number): boolean {
    return bytes >= LARGE_REQUEST_BYTES && this.#used > 0 && this.#memory !== undefined && this.#memory.high();
  }

  #refusal(waiter: Waiter): ConnectError {
    const why = waiter.heldForMemory
      ? `ctrl's memory is ${Math.round(this.#memory!.aboveBytes() / 2 ** 20)} MiB above its rest, past its headroom for requests as large as this one (${waiter.bytes} bytes)`
      : `ctrl is decoding ${this.#used} bytes of other requests (its budget is ${this.capacity})`;
    return new ConnectError(`${why}; retry in ${this.#waitMs} ms`, Code.ResourceExhausted, undefined, [
      { desc: RetryInfoSchema, value: create(RetryInfoSchema, { retryDelay: durationFromMs(this.#waitMs) }) },
    ]);
  }
}
