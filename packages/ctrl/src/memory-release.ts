// Returning a burst's memory to the system. V8 frees a burst's garbage but keeps its pages
// resident after ordinary GCs, and glibc keeps freed C heap in its arenas, so ctrl's RSS stays
// at the high-water mark of its busiest moment: measured, 1,960 malformed requests from an
// authenticated client took ctrl from 137 to 221 MB, and each further round kept growing it;
// after one memory-reducing GC and malloc_trim (releaseMemory()) it is back within 12 MB of
// where it started. ctrl is rarely idle (agents report all the time), so what triggers a release
// is growth: every CHECK_MS, once RSS has grown `growthBytes` beyond what the last release left,
// it releases again (a pause of tens of ms with ctrl's small heap, at most once per check). The
// first check releases what starting left (modules compiled, migrations, the first queries).
import { releaseMemory } from "@flotilla/malloc-trim";
import type { Logger } from "@flotilla/runtime";

const CHECK_MS = 5000;
export const DEFAULT_MEMORY_RELEASE_GROWTH_BYTES = 32 * 1024 * 1024;

export class MemoryRelease {
  #floor = 0;
  readonly #timer: NodeJS.Timeout | undefined;

  /** `growthBytes`: RSS growth that triggers a release; 0 turns releasing off. `onRelease` counts them. */
  constructor(growthBytes: number, log: Logger, onRelease: () => void, release: () => void = releaseMemory) {
    if (growthBytes === 0) return;
    this.#timer = setInterval(() => {
      const rss = process.memoryUsage.rss();
      if (rss - this.#floor < growthBytes) return;
      release();
      const after = process.memoryUsage.rss();
      onRelease();
      if (this.#floor > 0) log.info(`memory released: RSS ${mib(rss)} → ${mib(after)} MiB`);
      this.#floor = after;
    }, CHECK_MS).unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
