// The agent's work queue, all layers stacked (client-go semantics): dedupe, single flight per
// key, collapse into exactly one more run, per-key backoff with jitter, Retry-After as a floor,
// forget, bursts settling. queue-layers.test.ts tests each layer alone.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { backoffDelay } from "../src/backoff.ts";
import { dispatch } from "../src/queue/dispatch.ts";
import { WorkQueue } from "../src/queue.ts";

/** A handler that records runs and lets the test decide when each one finishes. */
function gatedHandler() {
  const runs: string[] = [];
  const inFlight = new Map<string, number>();
  let maxSameKey = 0;
  let maxTotal = 0;
  const gates: (() => void)[] = [];
  const handler = async (key: string) => {
    runs.push(key);
    inFlight.set(key, (inFlight.get(key) ?? 0) + 1);
    maxSameKey = Math.max(maxSameKey, inFlight.get(key)!);
    maxTotal = Math.max(
      maxTotal,
      [...inFlight.values()].reduce((a, b) => a + b, 0),
    );
    await new Promise<void>((resolve) => gates.push(resolve));
    inFlight.set(key, inFlight.get(key)! - 1);
  };
  return {
    runs,
    handler,
    release: () => {
      for (const open of gates.splice(0)) open();
    },
    get open() {
      return gates.length;
    },
    get maxSameKey() {
      return maxSameKey;
    },
    get maxTotal() {
      return maxTotal;
    },
  };
}

async function until(check: () => boolean, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not reached");
    await sleep(2);
  }
}

describe("WorkQueue (all layers)", () => {
  test("dedupes a key added many times before it runs", async () => {
    let coalesced = 0;
    // Without settling: these adds within a ms or two form a burst that would be held briefly.
    const queue = new WorkQueue({ settleMs: 0, onCoalesced: () => coalesced++ });
    for (let i = 0; i < 5; i++) queue.add("a");
    queue.add("b");
    assert.equal(queue.length, 2);
    assert.equal(coalesced, 4);
    assert.equal(await queue.get(), "a");
    assert.equal(await queue.get(), "b");
    queue.shutDown();
    assert.equal(await queue.get(), undefined);
  });

  test("a processing key is not handed out again; adds meanwhile collapse into exactly one more run", async () => {
    const queue = new WorkQueue({ settleMs: 0 });
    queue.add("a");
    assert.equal(await queue.get(), "a");
    for (let i = 0; i < 10; i++) queue.add("a");
    assert.equal(queue.length, 0, "not queued while processing");
    queue.done("a");
    assert.equal(queue.length, 1, "queued once on done");
    assert.equal(await queue.get(), "a");
    queue.done("a");
    assert.equal(queue.length, 0, "and no further run");
    queue.shutDown();
  });

  test("dispatch(): bounded concurrency, never two runs of one key at once, one run per burst of adds", async () => {
    const gate = gatedHandler();
    const queue = new WorkQueue();
    const running = dispatch(queue, gate.handler, { concurrency: 3 });
    for (const key of ["a", "b", "c", "d", "e"]) queue.add(key);
    await until(() => gate.open === 3);
    // While a, b, c run: every key changes many times.
    for (let i = 0; i < 100; i++) for (const key of ["a", "b", "c", "d", "e"]) queue.add(key);
    while (gate.runs.length < 8 || gate.open > 0) {
      gate.release();
      await sleep(5);
    }
    await sleep(20);
    queue.shutDown();
    await running;
    assert.equal(gate.maxSameKey, 1, "never two runs of one key at once");
    assert.equal(gate.maxTotal, 3, "at most `concurrency` runs at once");
    const counts = Object.fromEntries(["a", "b", "c", "d", "e"].map((k) => [k, gate.runs.filter((r) => r === k).length]));
    // a, b, c were in flight during the burst: exactly one more run each; d and e ran once.
    assert.deepEqual(counts, { a: 2, b: 2, c: 2, d: 1, e: 1 });
  });

  test("per-key exponential backoff with jitter, capped", () => {
    const backoff = { minMs: 100, maxMs: 1000 };
    assert.equal(
      backoffDelay(0, backoff, () => 0),
      50,
    );
    assert.equal(
      backoffDelay(0, backoff, () => 1),
      100,
    );
    assert.equal(
      backoffDelay(3, backoff, () => 1),
      800,
    );
    assert.equal(
      backoffDelay(10, backoff, () => 1),
      1000,
      "capped at max",
    );
    assert.equal(
      backoffDelay(10, backoff, () => 0),
      500,
      "jitter keeps at least half",
    );
    const queue = new WorkQueue({ backoff, random: () => 1 });
    assert.deepEqual(
      [1, 2, 3, 4, 5].map(() => queue.addRateLimited("k")),
      [100, 200, 400, 800, 1000],
    );
    assert.equal(queue.addRateLimited("other"), 100, "backoff is per key");
    assert.equal(queue.failures("k"), 5);
    queue.shutDown();
  });

  test("forget resets the backoff of a key", () => {
    const queue = new WorkQueue({ backoff: { minMs: 10, maxMs: 10_000 }, random: () => 1 });
    queue.addRateLimited("k");
    queue.addRateLimited("k");
    assert.equal(queue.addRateLimited("k"), 40);
    queue.forget("k");
    assert.equal(queue.failures("k"), 0);
    assert.equal(queue.addRateLimited("k"), 10);
    queue.shutDown();
  });

  test("a rate-limited key runs after its delay; add() pulls a plain backoff forward", async () => {
    const queue = new WorkQueue({ backoff: { minMs: 60, maxMs: 60 }, random: () => 1 });
    queue.addRateLimited("slow");
    assert.equal(queue.length, 0);
    assert.equal(queue.delayed, 1);
    const started = Date.now();
    assert.equal(await queue.get(), "slow");
    assert.ok(Date.now() - started >= 55, "waited out the backoff");
    queue.done("slow");
    queue.addRateLimited("soon");
    queue.add("soon");
    assert.equal(queue.length, 1, "a new change does not wait for the backoff");
    assert.equal(queue.delayed, 0);
    queue.shutDown();
  });

  test("Retry-After is a floor on the delay, and add() does not pull it forward", async () => {
    let coalesced = 0;
    const queue = new WorkQueue({ backoff: { minMs: 1, maxMs: 1 }, onCoalesced: () => coalesced++ });
    const started = Date.now();
    assert.equal(queue.addRateLimited("k", 150), 150);
    queue.add("k");
    assert.equal(queue.length, 0, "still waiting out Retry-After");
    assert.equal(coalesced, 1);
    assert.equal(await queue.get(), "k");
    assert.ok(Date.now() - started >= 140, `honoured Retry-After (${Date.now() - started} ms)`);
    queue.shutDown();
  });

  test("of two delays for one key the earliest wins; a handler that throws is retried with backoff", async () => {
    const queue = new WorkQueue({ backoff: { minMs: 10, maxMs: 10 } });
    queue.addAfter("k", 5000);
    queue.addAfter("k", 20);
    assert.equal(await queue.get(), "k");
    queue.done("k");
    let attempts = 0;
    const errors: unknown[] = [];
    const retrying = new WorkQueue({ backoff: { minMs: 10, maxMs: 10 } });
    const running = dispatch(
      retrying,
      async () => {
        if (++attempts < 3) throw new Error("boom");
      },
      { onHandlerError: (_key, error) => errors.push(error) },
    );
    retrying.add("x");
    await until(() => attempts === 3);
    retrying.shutDown();
    await running;
    assert.equal(errors.length, 2);
    queue.shutDown();
  });

  test("a key added once after a quiet spell is handed out at once; one in a burst of adds settles first", async () => {
    const queue = new WorkQueue({ settleMs: 500 });
    queue.add("a");
    assert.equal(await queue.get(), "a", "a single change is not delayed");
    queue.done("a");
    const started = Date.now();
    for (let i = 0; i < 3; i++) {
      queue.add("b");
      await sleep(40);
    }
    // Adds every ~40 ms: b is handed out once it has had none for about twice that.
    assert.equal(await queue.get(), "b");
    const waited = Date.now() - started;
    assert.ok(waited >= 150, `held until the burst settled (${waited} ms)`);
    queue.done("b");
    queue.shutDown();
  });

  test("a key whose adds never stop is held no longer than maxHoldMs; settleMs 0 turns settling off", async () => {
    const queue = new WorkQueue({ settleMs: 100, maxHoldMs: 200 });
    const started = Date.now();
    const adding = setInterval(() => queue.add("a"), 20);
    try {
      assert.equal(await queue.get(), "a", "the first add is handed out at once");
      queue.done("a");
      assert.equal(await queue.get(), "a");
      const waited = Date.now() - started;
      assert.ok(waited >= 150 && waited < 400, `released by the hold limit (${waited} ms)`);
    } finally {
      clearInterval(adding);
      queue.shutDown();
    }
    const eager = new WorkQueue({ settleMs: 0 });
    eager.add("a");
    assert.equal(await eager.get(), "a");
    eager.done("a");
    eager.add("a");
    assert.equal(eager.length, 1, "queued at once");
    eager.shutDown();
  });
});
