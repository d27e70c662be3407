// The send budget on its own, on a mocked clock: streams up to the budget and one past it,
// what is released when, and which streams are reset to make room.
import { afterEach, beforeEach, describe, mock, test } from "node:test";
import assert from "node:assert/strict";
import { SendBudget, type SendShare } from "../src/send-budget.ts";

const STALL_MS = 1000;

interface Stream {
  share: SendShare;
  abort: AbortController;
  resets: number;
}

function openStream(budget: SendBudget): Stream {
  const abort = new AbortController();
  const stream: Stream = {
    abort,
    resets: 0,
    share: budget.share(() => {
      stream.resets++;
      abort.abort(new Error("reset"));
    }, abort.signal),
  };
  return stream;
}

/** Whether `promise` has settled once what is pending has run. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

/** Streams that each reserved and sent `bytes`. */
async function sending(budget: SendBudget, n: number, bytes: number): Promise<Stream[]> {
  const streams = Array.from({ length: n }, () => openStream(budget));
  for (const s of streams) {
    await s.share.reserve(bytes);
    s.share.sent(bytes);
  }
  return streams;
}

describe("send budget", () => {
  beforeEach(() => mock.timers.enable({ apis: ["setTimeout", "Date"] }));
  afterEach(() => mock.timers.reset());

  test("streams up to the budget reserve at once; one past it waits until a client takes its message, and no reading client is reset", async () => {
    let resets = 0;
    const budget = new SendBudget(300, STALL_MS, () => resets++);
    const [a] = await sending(budget, 3, 100);
    assert.equal(budget.used, 300);
    const past = openStream(budget);
    const waiting = past.share.reserve(100);
    mock.timers.tick(STALL_MS - 1);
    assert.equal(await settled(waiting), false, "a stream past the budget went on");
    a!.share.release(); // its client took the message
    assert.equal(await settled(waiting), true);
    assert.equal(budget.used, 300);
    assert.equal(resets, 0);
  });

  test("past the budget, the stream whose client has not taken its message longest is reset after the stall time, and its bytes go to the waiter", async () => {
    let resets = 0;
    const budget = new SendBudget(300, STALL_MS, () => resets++);
    const [oldest] = await sending(budget, 1, 100);
    mock.timers.tick(500);
    const newer = await sending(budget, 2, 100);
    const past = openStream(budget);
    const waiting = past.share.reserve(100);
    mock.timers.tick(STALL_MS - 501);
    assert.equal(await settled(waiting), false);
    assert.equal(resets, 0);
    mock.timers.tick(1);
    assert.equal(await settled(waiting), true);
    assert.deepEqual([oldest!.resets, ...newer.map((s) => s.resets), resets], [1, 0, 0, 1]);
    assert.equal(budget.used, 300);
    oldest!.share.release(); // its handler ends after the reset: released once only
    assert.equal(budget.used, 300);
  });

  test("a stream still reading its message from the database is never reset: the waiter waits for it", async () => {
    const budget = new SendBudget(300, STALL_MS);
    const building = openStream(budget);
    await building.share.reserve(200);
    const [sent] = await sending(budget, 1, 100);
    const past = openStream(budget);
    const first = past.share.reserve(100);
    mock.timers.tick(STALL_MS);
    assert.equal(await settled(first), true);
    assert.deepEqual([building.resets, sent!.resets], [0, 1]);
    const next = openStream(budget);
    const second = next.share.reserve(100);
    mock.timers.tick(10 * STALL_MS);
    assert.equal(await settled(second), false, "nothing was sent to reset, yet a stream went on");
    building.share.sent(50); // smaller than reserved: the rest is free again
    assert.equal(await settled(second), true);
    assert.equal(budget.used, 250);
  });

  test("a message reserves at most the whole budget; one larger than its reservation is counted, not waited for; ending streams release everything", async () => {
    const budget = new SendBudget(300, STALL_MS);
    const large = openStream(budget);
    await large.share.reserve(1000);
    assert.equal(budget.used, 300);
    large.share.sent(400);
    assert.equal(budget.used, 400);
    const small = openStream(budget);
    const waiting = small.share.reserve(1);
    assert.equal(await settled(waiting), false);
    large.share.release();
    await waiting;
    small.share.release();
    assert.equal(budget.used, 0);
  });

  test("a stream that goes away while it waits leaves the queue, and the ones behind it go on", async () => {
    const budget = new SendBudget(300, STALL_MS);
    await sending(budget, 1, 200);
    const gone = openStream(budget);
    const goneWaits = gone.share.reserve(200);
    const behind = openStream(budget);
    const behindWaits = behind.share.reserve(100); // fits, but waits its turn
    assert.equal(await settled(behindWaits), false);
    gone.abort.abort(new Error("client went away"));
    await assert.rejects(goneWaits, /client went away/);
    assert.equal(await settled(behindWaits), true);
    assert.equal(budget.used, 300);
    await assert.rejects(gone.share.reserve(1), /client went away/);
  });
});
