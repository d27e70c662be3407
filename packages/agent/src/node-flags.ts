// The Node.js flags the agent process runs with: `pnpm agent`, scripts/start.ts and benchmark
// B7 all start it with these (a test keeps package.json's `agent` script in step).
//
// --max-semi-space-size=16: V8 sizes its young generation by how much survives it, and the
// first full sync (the desired table filling up) grows it to V8's maximum, 64 MB per
// semi-space (128 MB in all); the pages stay resident after the heap shrinks. 16 MB
// semi-spaces cut the agent's RSS at the end of a 100,000-resource sync from about 335 to
// 210 MB. Smaller ones (8 MB) promote more short-lived garbage into the old generation while
// rendering, which then costs more than they save.
export const AGENT_NODE_FLAGS: readonly string[] = ["--max-semi-space-size=16"];
