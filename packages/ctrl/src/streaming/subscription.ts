// One watch stream's bounded buffer between the shared poller and the stream's generator.
import type { Change } from "@flotilla/store";

export interface BatchLimits {
  count: number;
  bytes: number;
}

/** How many of the leading changes fit one message (always at least one). */
export function batchLength(changes: readonly Change[], limits: BatchLimits): number {
  let bytes = 0;
  let n = 0;
  for (const change of changes) {
    const size = change.bytes.length;
    if (n >= limits.count || (n > 0 && bytes + size > limits.bytes)) break;
    bytes += size;
    n++;
  }
  return n;
}

export class Subscription {
  readonly regionId: number;
  /** Poller position when this subscription joined: events after it arrive through push(). */
  readonly joinedAt: number;
  readonly #limit: number;
  /** Events up to this version are queued, delivered or before the stream's cursor. */
  #pushedUpTo: number;
  #buffer: Change[] = [];
  #failure: Error | undefined;
  #wake: (() => void) | undefined;
  #signal: AbortSignal | undefined;
  #timer: NodeJS.Timeout | undefined;
  #timeoutMs = 0;
  /** Called once when the buffer overflows; the stream then unsubscribes and ends. */
  onOverflow: (() => void) | undefined;
  /**
   * Sends changes at once, while the stream waits with nothing queued: true when it sent them
   * (they count as delivered), false to queue them as usual. Set by a stream that can write a
   * live change straight onto its transport, so a fan-out costs it no turn of its loop.
   */
  sendNow: ((changes: readonly Change[]) => boolean) | undefined;

  constructor(regionId: number, cursor: number, joinedAt: number, limit: number) {
    this.regionId = regionId;
    this.joinedAt = joinedAt;
    this.#pushedUpTo = Math.max(cursor, joinedAt);
    this.#limit = limit;
  }

  /** Queues the changes the stream has not seen. Overflow fails the subscription and frees the buffer. */
  push(changes: readonly Change[]): void {
    if (this.#failure || changes.length === 0) return;
    // (Most pushes are of changes all fresh: no copy then.)
    const fresh = changes[0]!.version > this.#pushedUpTo ? changes : changes.filter((c) => c.version > this.#pushedUpTo);
    if (fresh.length === 0) return;
    if (this.#wake !== undefined && this.#buffer.length === 0 && this.sendNow?.(fresh)) {
      this.#pushedUpTo = fresh[fresh.length - 1]!.version;
      return;
    }
    if (this.#buffer.length + fresh.length > this.#limit) {
      this.#buffer = [];
      this.fail(new Overflow());
      this.onOverflow?.();
      return;
    }
    this.#buffer.push(...fresh);
    this.#pushedUpTo = fresh[fresh.length - 1]!.version;
    this.#wakeUp();
  }

  /** Ends the subscription: the stream throws `error` at its next take(). */
  fail(error: Error): void {
    this.#failure ??= error;
    this.#wakeUp();
  }

  get failure(): Error | undefined {
    return this.#failure;
  }

  /** Every change up to here was pushed to this subscription (or precedes its cursor). */
  get pushedUpTo(): number {
    return this.#pushedUpTo;
  }

  get buffered(): number {
    return this.#buffer.length;
  }

  /** Queued changes, oldest first, within `limits` (at least one); throws the failure, if any. */
  take(limits: BatchLimits): Change[] {
    if (this.#failure) throw this.#failure;
    return this.#buffer.splice(0, batchLength(this.#buffer, limits));
  }

  /**
   * Resolves on the next push or failure, after `timeoutMs`, or when `signal` aborts. A
   * stream waits once per message it sends, so the timer and the abort listener are set
   * up once and reused (re-armed), not created per wait.
   */
  wait(timeoutMs: number, signal: AbortSignal): Promise<void> {
    if (this.#buffer.length > 0 || this.#failure || signal.aborted) return Promise.resolve();
    if (this.#signal !== signal) {
      this.#signal = signal;
      signal.addEventListener("abort", () => this.#wakeUp(), { once: true });
    }
    if (this.#timer === undefined || this.#timeoutMs !== timeoutMs) {
      clearTimeout(this.#timer);
      this.#timeoutMs = timeoutMs;
      this.#timer = setTimeout(() => this.#wakeUp(), timeoutMs);
    } else {
      this.#timer.refresh();
    }
    return new Promise<void>((resolve) => (this.#wake = resolve));
  }

  /** Releases the wait timer; the subscription is done. */
  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#wakeUp();
  }

  #wakeUp(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}

/** The stream's consumer fell further behind than its buffer allows. */
export class Overflow extends Error {
  constructor() {
    super("consumer too slow: watch buffer overflowed");
    this.name = "Overflow";
  }
}
