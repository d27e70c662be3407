// mallocTrim() returns the free pages in the middle of glibc's heap, which free() keeps: a heap
// filled with small blocks, all freed but the last, keeps its pages resident until trimmed.
// Runs in a child process so the measurement is the child's heap alone. releaseMemory() really
// runs a GC.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";
import { mallocTrim, releaseMemory } from "@flotilla/malloc-trim";

const glibc =
  process.platform === "linux" && typeof (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime === "string";

test("the addon is built and offered on Linux with glibc", { skip: glibc ? false : "not Linux with glibc" }, () => {
  assert.equal(typeof mallocTrim, "function", "native/malloc-trim.node was not built (see native/build.sh's output at install)");
});

test("mallocTrim() returns freed C heap that free() kept", { skip: glibc ? false : "not Linux with glibc" }, () => {
  // Buffers of 8 KiB come from malloc (below the mmap threshold); 4,096 of them are 32 MiB.
  // The last one, allocated after the others, stays alive and pins the heap's top.
  const child = `
    import { mallocTrim, releaseMemory } from "@flotilla/malloc-trim";
    import { readFileSync } from "node:fs";
    const anon = () => Number(/^RssAnon:\\s+(\\d+) kB/m.exec(readFileSync("/proc/self/status", "utf8"))[1]) * 1024;
    let blocks = Array.from({ length: 4096 }, () => Buffer.allocUnsafeSlow(8192).fill(1));
    const pin = Buffer.allocUnsafeSlow(8192).fill(1);
    blocks = undefined;
    for (let i = 0; i < 4; i++) gc();
    await new Promise((r) => setTimeout(r, 50));
    const before = anon();
    const released = mallocTrim();
    console.log(JSON.stringify({ released, freed: before - anon(), pinned: pin.length }));
  `;
  const output = execFileSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", child], {
    cwd: import.meta.dirname,
    env: { ...process.env, MALLOC_MMAP_THRESHOLD_: "16384", MALLOC_ARENA_MAX: "1" },
    encoding: "utf8",
  });
  const { released, freed } = JSON.parse(output) as { released: boolean; freed: number };
  assert.equal(released, true);
  assert.ok(freed > 16 * 1024 * 1024, `malloc_trim returned ${freed} bytes; expected most of the 32 MiB freed`);
});

test("releaseMemory() frees dropped objects without --expose-gc and leaves gc() unexposed", () => {
  let garbage: object[] | undefined = Array.from({ length: 500_000 }, (_, i) => ({ i }));
  const withGarbage = process.memoryUsage().heapUsed;
  garbage = undefined;
  releaseMemory();
  assert.ok(withGarbage - process.memoryUsage().heapUsed > 10 * 1024 * 1024, "the dropped objects are freed");
  assert.equal(typeof (globalThis as { gc?: unknown }).gc, "undefined");
  releaseMemory(); // a second call reuses the function
  assert.equal(garbage, undefined);
});
