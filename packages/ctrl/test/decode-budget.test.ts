// The decode budget's hold on large requests under memory pressure (--decode-memory-headroom-bytes),
// with a scripted pressure: a large request waits while memory is high and another is being
// decoded, and goes once memory is low again (looked at again while it waits, one GC asked for);
// a small one passes it; with nothing else being decoded it goes ahead; held past --decode-wait
// it is RESOURCE_EXHAUSTED naming memory, with a RetryInfo. And memoryPressure over a
// MemoryRelease: never before the first release, never with 0, high past the headroom.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { silentLogger } from "@flotilla/runtime";
import { DecodeBudget, LARGE_REQUEST_BYTES } from "../src/decode-budget.ts";
import { MemoryRelease, memoryPressure, type MemoryPressure } from "../src/memory-release.ts";

const MB = 1024 * 1024;

function scriptedPressure() {
  const state = { high: false, relieved: 0 };
  const pressure: MemoryPressure = { high: () => state.high, aboveBytes: () => 50 * MB, relieve: () => state.relieved++ };
  return { state, pressure };
}

/** A budget with one large request being decoded, and memory high from then on. */
async function oneBeingDecoded(waitMs = 5000, onRefused = () => {}) {
  const { state, pressure } = scriptedPressure();
  const budget = new DecodeBudget(16 * MB, waitMs, onRefused, pressure);
  const signal = new AbortController().signal;
  const first = await budget.reserve(LARGE_REQUEST_BYTES, signal);
  state.high = true;
  return { state, budget, signal, first };
}

/** Whether `promise` settled within `ms`. */
async function settled(promise: Promise<unknown>, ms = 30): Promise<boolean> {
  return Promise.race([
    promise.then(
      () => true,
      () => true,
    ),
    sleep(ms).then(() => false),
  ]);
}

test("a large request waits while memory is high and another is being decoded; it goes once memory is low, one GC asked for", async () => {
  const { state, budget, signal, first } = await oneBeingDecoded();
  const second = budget.reserve(LARGE_REQUEST_BYTES, signal);
  const third = budget.reserve(2 * LARGE_REQUEST_BYTES, signal);
  assert.equal(await settled(second), false, "held while memory is high");
  assert.equal(budget.used, LARGE_REQUEST_BYTES);
  assert.equal(state.relieved, 1, "the first hold asks for a GC; waiting does not ask again");
  state.high = false; // the GC's work: nothing else is released, the recheck finds it
  assert.equal(await settled(second, 200), true);
  assert.equal(await settled(third, 200), true);
  assert.equal(budget.used, 4 * LARGE_REQUEST_BYTES);
  first();
  (await second)();
  (await third)();
  assert.equal(budget.used, 0);
});

test("a small request passes one held for memory; a larger one does not", async () => {
  const { budget, signal, first } = await oneBeingDecoded();
  const held = budget.reserve(MB, signal);
  const small = budget.reserve(LARGE_REQUEST_BYTES - 1, signal);
  assert.equal(await settled(small), true, "a small request is not held behind it");
  const larger = budget.reserve(2 * MB, signal);
  assert.equal(await settled(held), false);
  assert.equal(await settled(larger), false);
  (await small)();
  first(); // nothing else being decoded: the first held one goes ahead despite the pressure
  const release = await held;
  assert.equal(await settled(larger), false, "held again: the first is being decoded and memory is still high");
  release();
  (await larger)();
  assert.equal(budget.used, 0);
});

test("with nothing else being decoded a large request goes ahead, however high memory is", async () => {
  const { state, pressure } = scriptedPressure();
  state.high = true;
  const budget = new DecodeBudget(16 * MB, 5000, () => {}, pressure);
  const release = await budget.reserve(8 * MB, new AbortController().signal);
  assert.equal(budget.used, 8 * MB);
  assert.equal(state.relieved, 0);
  release();
});

test("held past --decode-wait: RESOURCE_EXHAUSTED naming ctrl's memory, with a RetryInfo; counted as refused", async () => {
  let refused = 0;
  const { budget, signal, first } = await oneBeingDecoded(50, () => refused++);
  const error = await budget.reserve(MB, signal).then(
    () => assert.fail("granted"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof ConnectError);
  assert.equal(error.code, Code.ResourceExhausted);
  assert.match(
    error.rawMessage,
    /^ctrl's memory is 50 MiB above its rest, past its headroom for requests as large as this one \(1048576 bytes\); retry in 50 ms$/,
  );
  assert.deepEqual(
    error.details.map((d) => ("desc" in d ? d.desc.typeName : d.type)),
    ["google.rpc.RetryInfo"],
  );
  assert.equal(refused, 1);
  first();
  assert.equal(budget.used, 0);
});

test("without pressure (the headroom 0) nothing is held", async () => {
  const budget = new DecodeBudget(16 * MB, 5000);
  const signal = new AbortController().signal;
  const first = await budget.reserve(8 * MB, signal);
  const second = await budget.reserve(8 * MB, signal);
  first();
  second();
});

test("memoryPressure: never before the first release nor with 0; high once RSS is past the headroom above what releases left", () => {
  const state = { rss: 100 * MB };
  const release = new MemoryRelease({
    growthBytes: 16 * MB,
    minIntervalMs: 0,
    log: silentLogger,
    onRelease: () => {},
    release: () => (state.rss -= 10 * MB),
    rss: () => state.rss,
    checkMs: 0,
  });
  let relieved = 0;
  const pressure = memoryPressure(release, 40 * MB, () => relieved++);
  const off = memoryPressure(release, 0);
  state.rss = 500 * MB;
  assert.equal(pressure.high(), false, "before the first release there is no rest to measure from");
  state.rss = 100 * MB;
  release.check(); // leaves 90 MB
  state.rss = 130 * MB;
  assert.deepEqual([pressure.high(), pressure.aboveBytes()], [false, 40 * MB]);
  state.rss = 130 * MB + 1;
  assert.equal(pressure.high(), true);
  assert.equal(off.high(), false);
  pressure.relieve();
  assert.equal(relieved, 1);
});
