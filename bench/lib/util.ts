// Small helpers shared by the benchmarks: clocks, statistics, formatting.

/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes of one machine. */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * What to add to another clock's reading (`read`: one round trip to it) to get this process's
 * clock, NTP-style: of `samples` round trips the one with the smallest, its reading taken as made
 * at the midpoint. `rtt` bounds the error (± half of it).
 */
export async function clockOffset(read: () => Promise<number>, samples: number): Promise<{ offset: number; rtt: number }> {
  let best = { offset: 0, rtt: Number.POSITIVE_INFINITY };
  for (let i = 0; i < samples; i++) {
    const sent = now();
    const t = await read();
    const received = now();
    if (received - sent < best.rtt) best = { offset: (sent + received) / 2 - t, rtt: received - sent };
  }
  return best;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Nearest-rank percentile of `values` (0 < p ≤ 100). */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * A distribution-free 95% confidence interval of the median of `values` (independent samples):
 * the order statistics around it that the binomial's normal approximation puts 1.96 standard
 * deviations out (for fewer than 6 values, their whole range).
 */
export function medianInterval(values: readonly number[]): [number, number] {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  const half = (1.96 * Math.sqrt(n)) / 2;
  return [sorted[Math.max(0, Math.floor(n / 2 - half))]!, sorted[Math.min(n - 1, Math.ceil(n / 2 + half) - 1)]!];
}

export function mean(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((a, b) => a + b, 0) / values.length;
}

/** Polls `check` every `everyMs` until it returns true; throws `what` after `timeoutMs`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

export function fmtInt(n: number): string {
  return Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "n/a";
}

export function fmtMs(n: number): string {
  if (!Number.isFinite(n)) return "n/a";
  return `${n < 10 ? n.toFixed(2) : n.toFixed(1)} ms`;
}

export function fmtBytes(n: number): string {
  if (!Number.isFinite(n)) return "n/a";
  const abs = Math.abs(n);
  if (abs >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MB`;
  if (abs >= 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${Math.round(n)} B`;
}

export function fmtRatio(n: number): string {
  return Number.isFinite(n) ? `${n.toFixed(2)}×` : "n/a";
}

/** Progress lines go to stderr so stdout carries only the results. */
export function log(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}
