// Returning a burst's memory to the system. V8 frees a burst's garbage but keeps its pages
// resident after ordinary GCs, and glibc keeps freed C heap in its arenas, so ctrl's RSS stays
// at the high-water mark of its busiest moment: measured, 1,960 malformed requests from an
// authenticated client took ctrl from 137 to 221 MB, and each further round kept growing it;
// after one memory-reducing GC and malloc_trim (releaseMemory()) it is back within 12 MB of
// where it started. ctrl is rarely idle (agents report all the time), so what triggers a release
// is growth: every CHECK_MS, once RSS is `growthBytes` above the baseline (what releases left)
// and `minIntervalMs` have passed since the last release, it releases again (a pause of tens of
// ms with ctrl's small heap; during a sustained burst at most once per interval, so that the
// pauses do not add to the burst's latency). A release in the middle of a burst leaves the
// baseline where it was, so the burst's end is released too; a release that returned little
// raises the baseline to what is left (that memory is held, not garbage), so a process that
// needs more memory is not collected again and again. The first check releases what starting
// left (modules compiled, migrations, the first queries).
import { collectSoon, releaseMemory } from "@flotilla/malloc-trim";
import type { Logger } from "@flotilla/runtime";

const CHECK_MS = 5000;
// Below the bound ctrl keeps after a burst (30 MB more than at rest, 45 s on): a burst that ends
// with RSS 17 to 30 MB above the baseline is released too (at 32 MiB, one that ended +30.7 MiB
// above rest was kept).
export const DEFAULT_MEMORY_RELEASE_GROWTH_BYTES = 16 * 1024 * 1024;
export const DEFAULT_MEMORY_RELEASE_INTERVAL_MS = 30_000;

export interface MemoryReleaseOptions {
  /** RSS above the baseline that triggers a release; 0 turns releasing off. */
  growthBytes: number;
  /** The least time between two releases. */
  minIntervalMs: number;
  log: Logger;
  /** After each release (counts them). */
  onRelease: () => void;
  /** Does the release; default: releaseMemory(). */
  release?: () => void;
  /** The process's RSS; default: process.memoryUsage.rss(). */
  rss?: () => number;
  /** Checks every this often; 0: only when check() is called. Default 5 s. */
  checkMs?: number;
}

export class MemoryRelease {
  readonly #options: MemoryReleaseOptions;
  /** What releases left; undefined before the first. */
  #baseline: number | undefined;
  #lastRelease = Number.NEGATIVE_INFINITY;
  readonly #timer: NodeJS.Timeout | undefined;

  constructor(options: MemoryReleaseOptions) {
    this.#options = options;
    const checkMs = options.checkMs ?? CHECK_MS;
    if (options.growthBytes > 0 && checkMs > 0) this.#timer = setInterval(() => this.check(), checkMs).unref();
  }

  /** Releases if RSS is `growthBytes` above the baseline (always the first time) and the interval has passed. */
  check(): void {
    const { growthBytes, minIntervalMs, log, onRelease, release = releaseMemory, rss: rssOf = () => process.memoryUsage.rss() } = this.#options;
    if (growthBytes === 0) return;
    const rss = rssOf();
    const baseline = this.#baseline;
    if ((baseline !== undefined && rss - baseline < growthBytes) || performance.now() - this.#lastRelease < minIntervalMs) return;
    release();
    this.#lastRelease = performance.now();
    const after = rssOf();
    onRelease();
    if (baseline !== undefined) log.info(`memory released: RSS ${mib(rss)} → ${mib(after)} MiB`);
    this.#baseline = baseline === undefined || rss - after < growthBytes / 2 ? after : Math.min(baseline, after);
  }

  /** How far RSS is above what releases left; undefined before the first release, or with releasing off. */
  aboveBaseline(): number | undefined {
    const { rss: rssOf = () => process.memoryUsage.rss() } = this.#options;
    return this.#baseline === undefined ? undefined : rssOf() - this.#baseline;
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/** Whether ctrl's memory is high enough that large requests should wait (decode-budget.ts). */
export interface MemoryPressure {
  /** True while RSS is more than the headroom above what memory releases left. */
  high(): boolean;
  /** How far above, for the refusal's message. */
  aboveBytes(): number;
  /** Asks V8 for a full GC: what requests left is mostly garbage waiting for one. */
  relieve(): void;
}

/** High while RSS is more than `headroomBytes` above `release`'s baseline; never with 0, nor before the first release. */
export function memoryPressure(release: MemoryRelease, headroomBytes: number, relieve: () => void = collectSoon): MemoryPressure {
  const above = () => release.aboveBaseline() ?? 0;
  return {
    high: () => headroomBytes > 0 && above() > headroomBytes,
    aboveBytes: above,
    relieve,
  };
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
