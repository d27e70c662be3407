// The Node.js flags and environment the agent process runs with: `pnpm agent`, scripts/start.ts,
// the agent image and benchmark B7 all start it with these (tests keep package.json's `agent`
// script and deploy/Dockerfile in step).
//
// --max-semi-space-size=16: V8 sizes its young generation by how much survives it, and the
// first full sync (the desired table filling up) grows it to V8's maximum, 64 MB per
// semi-space (128 MB in all); the pages stay resident after the heap shrinks. 16 MB
// semi-spaces cut the agent's RSS at the end of a 100,000-resource sync from about 335 to
// 210 MB. Smaller ones (8 MB) promote more short-lived garbage into the old generation while
// rendering, which then costs more than they save.
//
// --max-old-space-size-percentage: V8's old generation may grow to this share of the memory
// the process may use, the container's limit where it has one (as GOMEMLIMIT is set from a
// pod's limit), else the machine's. V8 sets its next full GC at a multiple of what the last one
// left live, so a restart's garbage (a relist of every object, the first full sync, the full
// set of reports) piles up to 200 MB above 48 MB of live heap at 100,000 resources: B7's peak
// was 311 MB without the cap, against 118 MB drained. Capped at 40% of the manifest's 320 MiB
// (128 MB), V8 collects sooner; B7 reports the peak, the collections' time and the drain with
// and without it (docs/benchmarks.md, the agent's memory).
export const AGENT_OLD_SPACE_PERCENT = 40;
export const AGENT_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=16", `--max-old-space-size-percentage=${AGENT_OLD_SPACE_PERCENT}`];

/**
 * The --max-old-space-size that AGENT_NODE_FLAGS amount to in a container limited to
 * `limitBytes`, computed as Node computes it from the limit (whole MiB, then the percentage), for
 * a benchmark that runs the agent outside such a container.
 */
export function oldSpaceFlagForLimit(limitBytes: number): string {
  return `--max-old-space-size=${Math.floor((Math.floor(limitBytes / 2 ** 20) * AGENT_OLD_SPACE_PERCENT) / 100)}`;
}

// MALLOC_MMAP_THRESHOLD_=16384: glibc serves allocations of 16 KiB and more with mmap and
// returns them at free(), where by default it raises that threshold after each such free
// ("dynamic mmap threshold") until blocks up to 32 MB come from its heap arenas, which keep
// freed memory and can only shrink from the top. The agent's transient buffers are socket
// reads (64 KB each, many per list page of 500 objects), response bodies and the sync's
// batches: after a restart's relist and full sync, the arenas kept tens of MB that no GC can
// return (B7 at 100,000 resources, one run each: a main arena of 21 MB with 131072, 15 MB with
// 16384; drained RSS 155 → 146 MB; docs/benchmarks.md, finding 9). A fixed threshold (setting it turns the dynamic
// one off) sends them back as they are freed; the cost, an mmap/munmap per such buffer (a few
// thousand a second at most), did not show in B7's drain times. Read by glibc at process
// start, so it has to be in the environment; other C libraries ignore it.
export const AGENT_ENVIRONMENT: Readonly<Record<string, string>> = { MALLOC_MMAP_THRESHOLD_: "16384" };
