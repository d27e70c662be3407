// The inactivity watchdog of the ctrl connection and of the observer's watches: fires once when
// `timeoutMs` passed without a reset() (a stream or watch that went silent is treated as dead).

export class Watchdog {
  readonly #timer: NodeJS.Timeout;

  /** Armed at once; `onExpire` runs once `timeoutMs` passed since construction or the last reset(). */
  constructor(timeoutMs: number, onExpire: () => void) {
    this.#timer = setTimeout(onExpire, timeoutMs);
  }

  /** Something arrived: the silence starts again from now. */
  reset(): void {
    this.#timer.refresh();
  }

  /** Disarms the watchdog for good. */
  stop(): void {
    clearTimeout(this.#timer);
  }
}
