// The Node.js flags and environment ctrl runs with: `pnpm ctrl`, scripts/start.ts, the ctrl image,
// the tests' ctrl processes (@flotilla/testkit/ctrl-process) and the benchmarks' all start it with
// these (tests keep package.json's `ctrl` script and deploy/Dockerfile in step).
//
// --max-old-space-size-percentage: V8's old generation may grow to this share of the memory the
// process may use, the container's limit where it has one (the manifest's 512 MiB: 256 MiB),
// else the machine's. Without it V8 sizes the old generation from the machine, so a burst of
// requests grows the heap past the pod's limit before V8 sees a reason to collect, and the
// kernel kills the pod; with it V8 collects sooner, and a heap that really needs more ends in
// V8's out-of-memory error, which names the cause. The other half of the limit covers the young
// generation, code, Node's mapped binary (about 50 MB), the request bytes of the decode budget
// and malloc (docs/benchmarks.md, ctrl's decoding cost).
//
// --max-semi-space-size: V8 sizes its young generation by how much survives it, up to a maximum
// it derives from the old generation's: on a machine with memory to spare (24 GB: 64 MiB per
// semi-space, 128 MiB in all) a burst of requests grows it to that maximum, and the pages are
// resident while the burst lasts. Under the authenticated protocol fuzz the young generation was
// +127 MiB of a +184 MiB peak; with semi-spaces of 4 MiB (12 MiB young generation in all: V8's
// own size for a heap of a few hundred MB) the peak was +108 MiB with the same sampling, +65 to
// +90 MiB in memory-release.test.ts in 8 bursts of 9 (+119 MiB in one). 4 MiB cost B2a's
// fan-out, though: a write to 1,000 watch streams allocates a few MB, so 4 MiB semi-spaces
// scavenged in the middle of each fan-out (ctrl CPU 16–18 µs per delivered event, 5 B2 runs on
// a shared machine); 8 MiB took that to 12–16 µs (4 runs) and B2a's p99 from a median of 118 to
// 34 ms (plaintext) and 128 to 57 ms (over TLS) in alternating runs, while the fuzz burst right
// after 50 stalled syncs peaked at +45 and +51 MiB (16 MiB: +84 and +90, too near the bound).
// The semi-space is the flag to change (a larger one for a ctrl with much memory and many
// agents: fewer objects promoted, more RSS).
//
// --heap-growing-percent=100: after a full GC V8 sets the next one at a multiple of what it left
// live, a multiple it bounds by the old generation's limit: up to 4 where the limit is large (a
// machine with memory to spare and no container limit), about 1.3 where it is small. Under B8's
// attack ctrl's heap grew from about 35 MB live to 110–131 MB between full GCs: a peak of +143 MB
// (median of five runs), +165 and +169 MB in two more; with the multiple fixed at 2, +74 to
// +88 MB in five runs (median +80), the good client's p99 during the attack no higher than in
// the runs without it, B1–B4 no slower (one run each). In the manifest's pod (an old generation
// of 256 MiB) V8 would keep to about 1.3 itself: there the flag trades heap (up to twice what is
// live, still within the cap above) for fewer full GCs. 1.5 (=50) put B8's good client's p99
// above 3x its p99 alone in two runs of five.
export const CTRL_OLD_SPACE_PERCENT = 50;
export const CTRL_SEMI_SPACE_MIB = 8;
export const CTRL_HEAP_GROWING_PERCENT = 100;
export const CTRL_NODE_FLAGS: readonly string[] = [
  `--max-semi-space-size=${CTRL_SEMI_SPACE_MIB}`,
  `--max-old-space-size-percentage=${CTRL_OLD_SPACE_PERCENT}`,
  `--heap-growing-percent=${CTRL_HEAP_GROWING_PERCENT}`,
];

// MALLOC_MMAP_THRESHOLD_=65536: glibc serves allocations of 64 KiB and more with mmap and returns
// them at free(), where by default it raises that threshold after each such free ("dynamic mmap
// threshold") until blocks up to 32 MB come from its heap arenas, which keep freed memory and can
// only shrink from the top. Under the authenticated fuzz ctrl's request bytes (bodies read,
// inflated and drained, in 64 KiB socket reads and up to the 4 MiB message limit) were, once
// freed, up to 66–88 MiB of arenas at the peak; with the fixed threshold 12–26 MiB (one run of
// bench/diag/burst-memory.ts: peak +91 against +108 MiB), and ctrl's RSS at rest in
// memory-release.test.ts 98 MiB against 106–111. Smaller blocks (HTTP/2 frames, headers, small
// messages) stay in the arenas: an mmap/munmap each would cost every request. Read by glibc at
// process start, so it has to be in the environment; other C libraries ignore it.
export const CTRL_ENVIRONMENT: Readonly<Record<string, string>> = { MALLOC_MMAP_THRESHOLD_: "65536" };
