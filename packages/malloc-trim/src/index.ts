// glibc's malloc_trim(0) for the agent's memory release (packages/agent/src/memory-release.ts):
// after a burst, glibc's arenas keep tens of MB of freed C heap (socket reads, response
// bodies, the buffers of protobuf and crypto calls) that free() cannot return because live
// blocks sit above it; malloc_trim returns their free pages. Measured on B7 at 100,000
// resources: 12.6 MB of a drained agent's 96.1 MB anonymous memory (docs/benchmarks.md,
// finding 9). The addon is built by the package's install script (native/build.sh).
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

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
