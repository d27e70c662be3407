// The snapshot read-ahead buffer and its shared byte budget; the slots that bound
// snapshots holding a connection.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ReadAhead, ReadAheadBudget, Slots } from "../src/read-ahead.ts";

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** Pushes `count` items of `bytes`; resolves with how many were pushed once done or stuck. */
function produce(buffer: ReadAhead<number>, count: number, bytes: number) {
  let pushed = 0;
  const done = (async () => {
    for (let i = 0; i < count; i++) {
      await buffer.push(i, bytes);
      pushed++;
    }
    buffer.end();
  })();
  done.catch(() => {});
  return { done, pushed: () => pushed };
}

test("within the budget a producer finishes before its consumer reads anything", async () => {
  const budget = new ReadAheadBudget(1000);
  const buffer = new ReadAhead<number>(budget);
  const p = produce(buffer, 10, 100);
  await p.done;
  assert.equal(budget.used, 1000);
  const got: number[] = [];
  for await (const item of buffer) got.push(item);
  assert.deepEqual(got, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  assert.equal(budget.used, 0);
});

test("a spent budget holds producers back until their own consumer reads; a closed buffer gives its bytes back", async () => {
  const budget = new ReadAheadBudget(500);
  const stalled = new ReadAhead<number>(budget);
  const s = produce(stalled, 10, 100);
  await tick();
  assert.equal(s.pushed(), 5); // the sixth is queued, its push waits
  const reading = new ReadAhead<number>(budget);
  const r = produce(reading, 10, 100);
  await tick();
  assert.equal(r.pushed(), 0); // over the budget: waits for its consumer
  // Its consumer reads: it progresses, one item at a time, though the budget is spent.
  const got: number[] = [];
  for await (const item of reading) got.push(item);
  assert.deepEqual(got.length, 10);
  assert.equal(s.pushed(), 5);
  stalled.close();
  await assert.rejects(s.done, /closed/);
  assert.equal(budget.used, 0);
});

test("slots: at most n holders; a waiter that gives up takes no slot", async () => {
  const slots = new Slots(2);
  const a = await slots.acquire();
  const b = await slots.acquire();
  const gaveUp = new AbortController();
  const waiting = slots.acquire(gaveUp.signal);
  let thirdGot = false;
  const third = slots.acquire().then((release) => {
    thirdGot = true;
    return release;
  });
  gaveUp.abort(new Error("went away"));
  await assert.rejects(waiting, /went away/);
  await tick();
  assert.equal(thirdGot, false);
  a();
  const release = await third;
  assert.equal(thirdGot, true);
  release();
  b();
  assert.equal(await slots.run(async () => "ran"), "ran");
});
