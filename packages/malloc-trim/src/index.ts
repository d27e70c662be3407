// glibc's malloc_trim(0), and the memory release of a process after a burst of work (the
// agent's packages/agent/src/memory-release.ts, ctrl's packages/ctrl/src/memory-release.ts):
// after a burst, glibc's arenas keep tens of MB of freed C heap (socket reads, response
// bodies, the buffers of protobuf and crypto calls) that free() cannot return because live
// blocks sit above it; malloc_trim returns their free pages. Measured on B7 at 100,000
// resources: 12.6 MB of a drained agent's 96.1 MB anonymous memory (docs/benchmarks.md,
// finding 9). The addon is built by the package's install script (native/build.sh).
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

// Found through the package's name, not this module's location: a bundle of the agent inlines
// this module and loads the addon from the package in its node_modules.
const ADDON = fileURLToPath(new URL("native/malloc-trim.node", import.meta.resolve("@flotilla/malloc-trim/package.json")));

/**
 * Returns the free pages of every malloc arena to the system; true if any were returned.
 * Undefined where it cannot: the addon is not built (no compiler or headers at install), or the
 * C library is not glibc (the addon's function returns undefined there, so it is not offered).
 */
export const mallocTrim: (() => boolean) | undefined = load();

function load(): (() => boolean) | undefined {
  if (process.platform !== "linux" || !existsSync(ADDON)) return undefined;
  const addon = createRequire(import.meta.url)(ADDON) as { mallocTrim(): boolean | undefined };
  if (addon.mallocTrim() === undefined) return undefined;
  return () => addon.mallocTrim() === true;
}

let gc: ((options: object) => void) | undefined;

/** V8's `gc()`, fetched once. */
function v8Gc(): (options: object) => void {
  if (!gc) {
    setFlagsFromString("--expose-gc");
    try {
      gc = runInNewContext("gc") as (options: object) => void;
    } finally {
      setFlagsFromString("--no-expose-gc");
    }
  }
  return gc;
}

/** Asks V8 for a full GC in a task of its own, soon (the caller does not wait for it). */
export function collectSoon(): void {
  v8Gc()({ type: "major", execution: "async" });
}

/**
 * One memory-reducing full GC (V8's "last resort" flavour: compacts and releases free pages,
 * which ordinary GCs keep resident), then malloc_trim where the C library is glibc. V8 offers
 * that GC only through `gc()`, which `--expose-gc` installs in new contexts: the flag is set for
 * the one context that fetches the function, then cleared.
 */
export function releaseMemory(): void {
  v8Gc()({ type: "major", execution: "sync", flavor: "last-resort" });
  // After the GC: freeing V8's external buffers (array buffers) frees C heap too.
  mallocTrim?.();
}
