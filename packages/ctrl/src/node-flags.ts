// The Node.js flags ctrl runs with: `pnpm ctrl`, scripts/start.ts, the ctrl image and the
// tests' ctrl processes (@flotilla/testkit/ctrl-process) all start it with these (tests keep
// package.json's `ctrl` script and deploy/Dockerfile in step).
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
// +90 MiB in memory-release.test.ts in 8 bursts of 9 (+119 MiB in one). The semi-space is the flag to change (a larger one for a
// ctrl with much memory and many agents: fewer objects promoted, more RSS).
export const CTRL_OLD_SPACE_PERCENT = 50;
export const CTRL_SEMI_SPACE_MIB = 4;
export const CTRL_NODE_FLAGS: readonly string[] = [`--max-semi-space-size=${CTRL_SEMI_SPACE_MIB}`, `--max-old-space-size-percentage=${CTRL_OLD_SPACE_PERCENT}`];
