// Retry delays shared by the work queue (per key) and the ctrl connection (reconnects), and the
// abortable waits between them.

export interface BackoffOptions {
  /** Delay after the first failure. */
  minMs: number;
  /** Cap of the exponential growth. */
  maxMs: number;
}

/**
 * Delay before retry number `failures` (0 = first retry): min·2^failures capped at max, with
 * "equal jitter" (half fixed, half random) so that many keys or agents failing together spread
 * out, yet never retry sooner than half the nominal delay.
 */
export function backoffDelay(failures: number, { minMs, maxMs }: BackoffOptions, random: () => number = Math.random): number {
  const nominal = Math.min(maxMs, minMs * 2 ** Math.min(failures, 52));
  return nominal / 2 + (random() * nominal) / 2;
}

/** `ms` moved randomly by up to ±fraction, so periodic work of many agents does not align. */
export function jittered(ms: number, fraction: number, random: () => number = Math.random): number {
  return ms * (1 + (random() * 2 - 1) * fraction);
}

/** Resolves after `ms` (at once if not positive), or at once when `signal` aborts (never rejects). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** Waits for `promise`: true once it resolved, false if `signal` aborted first (never rejects on abort). */
export async function resolvedBeforeAbort(promise: Promise<unknown>, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return false;
  const aborted = Promise.withResolvers<false>();
  const onAbort = () => aborted.resolve(false);
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    return await Promise.race([promise.then(() => true), aborted.promise]);
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}
