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
export const CTRL_OLD_SPACE_PERCENT = 50;
export const CTRL_NODE_FLAGS: readonly string[] = [`--max-old-space-size-percentage=${CTRL_OLD_SPACE_PERCENT}`];
