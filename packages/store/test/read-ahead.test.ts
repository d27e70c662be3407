// The slots that bound how many snapshot queries run at once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Slots } from "../src/read-ahead.ts";

const tick = () => new Promise((resolve) => setImmediate(resolve));

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
