// MemoryRelease's rules, with a scripted RSS: the first check releases; later ones only once
// RSS is --memory-release-growth-bytes above the baseline and --memory-release-interval has
// passed; a release mid-burst keeps the baseline low, so the burst's end is released too; a
// release that returns little raises the baseline (that memory is held); 0 turns it off.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { silentLogger } from "@flotilla/runtime";
import { MemoryRelease } from "../src/memory-release.ts";

const MB = 1024 * 1024;

/** A MemoryRelease checked by hand over a scripted RSS; `freed` is what the next release takes off. */
function scripted(growthBytes: number, minIntervalMs: number) {
  const state = { rss: 100 * MB, freed: 0, releases: 0 };
  const memory = new MemoryRelease({
    growthBytes,
    minIntervalMs,
    log: silentLogger,
    onRelease: () => state.releases++,
    release: () => (state.rss -= state.freed),
    rss: () => state.rss,
    checkMs: 0,
  });
  return { state, memory };
}

test("the first check releases; then only growth beyond the baseline does", () => {
  const { state, memory } = scripted(32 * MB, 0);
  state.freed = 20 * MB;
  memory.check();
  assert.equal(state.releases, 1); // baseline 80 MB
  state.rss = 100 * MB;
  memory.check();
  assert.equal(state.releases, 1, "20 MB above the baseline: no release");
  state.rss = 120 * MB;
  state.freed = 40 * MB;
  memory.check();
  assert.equal(state.releases, 2);
  assert.equal(state.rss, 80 * MB);
});

test("at most one release per interval; a release mid-burst keeps the baseline, so the burst's end is released", async () => {
  const { state, memory } = scripted(32 * MB, 200);
  state.freed = 0;
  memory.check(); // baseline 100 MB
  state.rss = 400 * MB;
  state.freed = 100 * MB;
  memory.check();
  memory.check();
  assert.equal(state.releases, 1, "within the interval of the first release");
  await sleep(220);
  memory.check(); // mid-burst: 400 → 300 MB, baseline stays 100 MB
  assert.equal(state.releases, 2);
  memory.check();
  assert.equal(state.releases, 2, "within the interval");
  await sleep(220);
  state.freed = 190 * MB;
  memory.check(); // the burst is over: 300 → 110 MB
  assert.equal(state.releases, 3);
  assert.equal(state.rss, 110 * MB);
});

test("a release that returns little raises the baseline: held memory is not collected again and again", async () => {
  const { state, memory } = scripted(32 * MB, 0);
  memory.check(); // baseline 100 MB
  state.rss = 200 * MB;
  state.freed = 5 * MB;
  memory.check(); // 200 → 195 MB: held; baseline 195 MB
  assert.equal(state.releases, 2);
  memory.check();
  memory.check();
  assert.equal(state.releases, 2);
});

test("--memory-release-growth-bytes 0: never releases", () => {
  const { state, memory } = scripted(0, 0);
  memory.check();
  state.rss = 10_000 * MB;
  memory.check();
  assert.equal(state.releases, 0);
});
