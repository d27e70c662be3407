// Each layer of the work queue alone, against the invariants written at the top of its file.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { dispatch, KEYS_PER_TURN } from "../src/queue/dispatch.ts";
import { KeyQueue } from "../src/queue/key-queue.ts";
import { RateLimitingQueue } from "../src/queue/rate-limiting-queue.ts";
import { SettlingQueue } from "../src/queue/settling-queue.ts";

describe("KeyQueue", () => {
  test("dedupes, hands keys out in order, one worker per key, dirty → exactly one more run", async () => {
    const coalesced: string[] = [];
    const queue = new KeyQueue({ onCoalesced: (key) => coalesced.push(key) });
    queue.add("a");
    queue.add("b");
    queue.add("a");
    assert.deepEqual(coalesced, ["a"]);
    assert.equal(queue.length, 2);
    assert.equal(await queue.get(), "a");
    queue.add("a");
    queue.add("a");
    assert.equal(queue.length, 1, "a processing key is not queued again");
    assert.equal(await queue.get(), "b");
    queue.done("a");
    assert.equal(await queue.get(), "a", "queued once more on done()");
    queue.done("a");
    queue.done("b");
    assert.equal(queue.length, 0);
  });

  test("a waiting get() receives the next add; shutDown() wakes it with undefined and ignores adds", async () => {
    const queue = new KeyQueue();
    const next = queue.get();
    queue.add("x");
    assert.equal(await next, "x");
    const waiting = queue.get();
    queue.shutDown();
    assert.equal(await waiting, undefined);
    queue.add("y");
    assert.equal(queue.length, 0);
    assert.equal(await queue.get(), undefined);
  });
});

describe("SettlingQueue", () => {
  test("a first change goes at once; a burst is held, absorbs changes, and ends when handed out", async () => {
    const coalesced: string[] = [];
    const queue = new SettlingQueue(new KeyQueue(), { settleMs: 200, maxHoldMs: 1000, onCoalesced: (key) => coalesced.push(key) });
    queue.add("k");
    assert.equal(await queue.get(), "k", "a single change is not delayed");
    queue.done("k");
    await sleep(30);
    queue.add("k");
    const started = Date.now();
    const next = queue.get();
    await sleep(10);
    assert.equal(queue.held, 1, "the second change within settleMs is held");
    queue.add("k");
    assert.deepEqual(coalesced, ["k"], "a change of a held key is absorbed");
    assert.equal(await next, "k");
    assert.ok(Date.now() - started >= 15, "handed out once the burst settled");
    queue.done("k");
    queue.shutDown();
  });

  test("an add that is not a change does not count towards a burst; shutDown() cancels holds", async () => {
    const queue = new SettlingQueue(new KeyQueue(), { settleMs: 500 });
    queue.add("k");
    assert.equal(await queue.get(), "k");
    queue.done("k");
    queue.add("k", false);
    assert.equal(await queue.get(), "k", "not held: a delay ran out, nothing changed");
    queue.done("k");
    await sleep(30);
    queue.add("k");
    const next = queue.get();
    await sleep(5);
    assert.equal(queue.held, 1);
    queue.shutDown();
    assert.equal(queue.held, 0);
    assert.equal(await next, undefined);
  });
});

describe("SettlingQueue in a region-wide burst", () => {
  /** A settling queue over a key queue, and `keys` first changes (k0, k1, …) added now. */
  function burst(keys: number, options: { burstKeys?: number; burstHoldMs?: number } = {}) {
    const queue = new SettlingQueue(new KeyQueue(), { settleMs: 1000, maxHoldMs: 2000, burstKeys: 3, burstHoldMs: 150, ...options });
    for (let i = 0; i < keys; i++) queue.add(`k${i}`);
    return queue;
  }

  test("below burstKeys a first change goes at once; at burstKeys it waits burstHoldMs after its change", async () => {
    const quiet = burst(2);
    let started = Date.now();
    assert.equal(await quiet.get(), "k0");
    assert.ok(Date.now() - started < 100, "two changes are no burst");
    quiet.shutDown();

    const busy = burst(3);
    started = Date.now();
    assert.equal(await busy.get(), "k0");
    const waited = Date.now() - started;
    assert.ok(waited >= 140 && waited < 1000, `held about burstHoldMs, not settleMs: ${waited} ms`);
    started = Date.now();
    assert.equal(await busy.get(), "k1", "the next key's hold ran out meanwhile");
    assert.ok(Date.now() - started < 100);
    busy.shutDown();
  });

  test("a change during the hold settles the key into one run with its burst", async () => {
    const queue = burst(3);
    const next = queue.get();
    await sleep(50);
    queue.add("k0"); // the mass update's next round
    await sleep(50);
    queue.add("k0");
    assert.equal(await next, "k1", "k0 now settles as a burst; k1 is handed out after its own hold");
    queue.done("k1");
    assert.equal(await queue.get(), "k2");
    queue.done("k2");
    assert.equal(queue.held, 1, "k0 is held until its burst settles");
    assert.equal(await queue.get(), "k0", "handed out once");
    queue.done("k0");
    assert.equal(queue.length, 0);
    assert.equal(queue.held, 0);
    queue.shutDown();
  });

  test("burstHoldMs 0 turns the hold off; shutDown() wakes a worker waiting out a hold", async () => {
    const off = burst(5, { burstHoldMs: 0 });
    const started = Date.now();
    for (let i = 0; i < 5; i++) assert.equal(await off.get(), `k${i}`);
    assert.ok(Date.now() - started < 100);
    off.shutDown();

    const queue = burst(3, { burstHoldMs: 60_000 });
    const next = queue.get();
    await sleep(10);
    queue.shutDown();
    assert.equal(await next, undefined);
    assert.throws(() => new SettlingQueue(new KeyQueue(), { burstKeys: 0 }), /burstKeys must be a positive integer/);
  });

  test("changes older than settleMs leave the count: the region's burst ends with them", async () => {
    const queue = burst(3, { burstKeys: 3, burstHoldMs: 150 });
    // settleMs 1000: wait it out, then a fresh change is alone again.
    await sleep(1050);
    queue.add("fresh");
    const started = Date.now();
    assert.equal(await queue.get(), "k0", "its hold ran out long ago");
    assert.equal(await queue.get(), "k1");
    assert.equal(await queue.get(), "k2");
    assert.equal(await queue.get(), "fresh");
    assert.ok(Date.now() - started < 100, "one recent change is no burst");
    queue.shutDown();
  });
});

describe("RateLimitingQueue", () => {
  test("backoff per key with jitter, forget, Retry-After floor not pulled forward, a plain backoff pulled forward", async () => {
    const coalesced: string[] = [];
    const queue = new RateLimitingQueue(new KeyQueue(), { backoff: { minMs: 20, maxMs: 80 }, random: () => 1, onCoalesced: (key) => coalesced.push(key) });
    assert.deepEqual(
      [0, 1, 2, 3].map(() => queue.addRateLimited("k")),
      [20, 40, 80, 80],
    );
    queue.forget("k");
    assert.equal(queue.failures("k"), 0);
    assert.equal(queue.addRateLimited("k"), 20, "forget() resets the backoff");
    assert.equal(queue.addRateLimited("throttled", 100), 100, "Retry-After is a floor");
    queue.add("throttled");
    assert.deepEqual(coalesced, ["throttled"], "add() does not pull a Retry-After forward");
    assert.equal(queue.length, 0);
    queue.addRateLimited("other");
    queue.add("other");
    assert.equal(queue.length, 1, "add() pulls a plain backoff forward");
    assert.equal(await queue.get(), "other");
    const started = Date.now();
    assert.equal(await queue.get(), "k", "a plain backoff ran out first");
    assert.equal(await queue.get(), "throttled");
    assert.ok(Date.now() - started >= 50, "throttled waited out its Retry-After");
    queue.shutDown();
  });

  test("the earliest of two delays wins; shutDown() cancels delays", async () => {
    const queue = new RateLimitingQueue(new KeyQueue());
    queue.addAfter("k", 5000);
    queue.addAfter("k", 10);
    assert.equal(queue.delayed, 1);
    assert.equal(await queue.get(), "k");
    queue.addAfter("later", 5000);
    queue.shutDown();
    assert.equal(queue.delayed, 0);
  });
});

describe("dispatch", () => {
  test("p-limit bounds the handlers; keys stay queued (deduped) until a slot is free; done() after every run", async () => {
    const queue = new RateLimitingQueue(new KeyQueue());
    let running = 0;
    let most = 0;
    const runs: string[] = [];
    let release!: () => void;
    let gate = new Promise<void>((resolve) => (release = resolve));
    const dispatching = dispatch(
      queue,
      async (key) => {
        runs.push(key);
        most = Math.max(most, ++running);
        await gate;
        running--;
        if (key === "bad") throw new Error("boom");
      },
      { concurrency: 2, onHandlerError: (key) => runs.push(`error ${key}`) },
    );
    for (const key of ["a", "b", "c", "c", "c", "bad"]) queue.add(key);
    await sleep(20);
    assert.deepEqual(runs, ["a", "b"]);
    assert.equal(queue.length, 2, "c (once) and bad wait in the queue, not in p-limit");
    release();
    gate = new Promise<void>((resolve) => (release = resolve));
    await sleep(20);
    release();
    await sleep(20);
    queue.shutDown();
    await dispatching;
    assert.equal(most, 2);
    assert.deepEqual(runs.slice(0, 4).sort(), ["a", "b", "bad", "c"]);
    assert.ok(runs.includes("error bad"), "a throwing handler is reported");
    assert.equal(queue.failures("bad"), 1, "and its key retried with backoff");
  });

  test("handlers that never wait for I/O still let the event loop turn every KEYS_PER_TURN keys", async () => {
    const queue = new RateLimitingQueue(new KeyQueue());
    const keys = KEYS_PER_TURN * 10;
    for (let i = 0; i < keys; i++) queue.add(`k${i}`);
    let handled = 0;
    const handledAtTurns: number[] = [];
    const recordTurns = () =>
      setImmediate(() => {
        handledAtTurns.push(handled);
        if (handled < keys) recordTurns();
      });
    recordTurns();
    const dispatching = dispatch(
      queue,
      async () => {
        handled++;
      },
      { concurrency: 8 },
    );
    while (handled < keys) await new Promise((resolve) => setImmediate(resolve));
    queue.shutDown();
    await dispatching;
    const gaps = handledAtTurns.slice(1).map((n, i) => n - handledAtTurns[i]!);
    assert.ok(handledAtTurns.length >= 9, `the loop turned ${handledAtTurns.length} times during ${keys} keys`);
    assert.ok(Math.max(...gaps) <= KEYS_PER_TURN + 8, `at most a turn's keys (and the slots' own) between turns: ${gaps.join(",")}`);
  });
});
