// MemoryRelease: one release after a burst of reconciles once the queue is quiet, none for a
// small burst, none while work is queued, none when turned off; releaseMemory() really runs a GC.
import assert from "node:assert/strict";
import { test } from "node:test";
import { MemoryRelease, releaseMemory } from "../src/memory-release.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test("a burst of reconciles is released once, after the queue stayed quiet for idleMs", async () => {
  let releases = 0;
  const release = new MemoryRelease({ afterReconciles: 3, idleMs: 30, release: () => releases++ });
  release.reconciled(5);
  release.reconciled(4);
  release.reconciled(0);
  release.reconciled(2); // more work came in: not quiet yet
  await sleep(60);
  assert.equal(releases, 0, "the last reconcile left work queued");
  release.reconciled(0);
  await sleep(10);
  assert.equal(releases, 0, "released before idleMs passed");
  await sleep(60);
  assert.equal(releases, 1);
  release.reconciled(0);
  await sleep(60);
  assert.equal(releases, 1, "one reconcile after a release is not a burst");
  release.stop();
});

test("reports sent after the burst's last reconcile postpone the release until none is waiting", async () => {
  let releases = 0;
  const release = new MemoryRelease({ afterReconciles: 2, idleMs: 30, release: () => releases++ });
  release.reconciled(3); // observations still to report
  release.reconciled(0);
  release.reported(2);
  await sleep(60);
  assert.equal(releases, 0, "observations are still waiting to be reported");
  release.reported(0);
  await sleep(10);
  release.reported(0);
  await sleep(10);
  assert.equal(releases, 0, "each report restarts the idle wait");
  await sleep(60);
  assert.equal(releases, 1);
  release.stop();
});

test("a burst smaller than afterReconciles, or with releasing off, is not released", async () => {
  let releases = 0;
  const small = new MemoryRelease({ afterReconciles: 10, idleMs: 5, release: () => releases++ });
  const off = new MemoryRelease({ afterReconciles: 0, idleMs: 5, release: () => releases++ });
  for (let i = 0; i < 9; i++) small.reconciled(0);
  for (let i = 0; i < 100; i++) off.reconciled(0);
  await sleep(40);
  assert.equal(releases, 0);
});

test("stop() cancels a scheduled release", async () => {
  let releases = 0;
  const release = new MemoryRelease({ afterReconciles: 1, idleMs: 20, release: () => releases++ });
  release.reconciled(0);
  release.stop();
  await sleep(50);
  assert.equal(releases, 0);
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
