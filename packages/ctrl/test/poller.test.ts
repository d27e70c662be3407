// The change poller's two kinds of poll, on an outbox it reads through a counting fake: a wake
// reads only the woken regions and asks for no heads; a commit's own rows go out with no read
// when they follow on from what was sent, in order with no gap or repeat when they do not;
// wakes never put off the full poll that finds other replicas' writes; a woken read that finds
// nothing loses nothing, one that finds a gap ends the region's streams; a fan-out yields to
// the event loop every FAN_OUT_CHUNK streams.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { silentLogger } from "@flotilla/runtime";
import { create, toBinary } from "@bufbuild/protobuf";
import { ChangeEventSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { changeOf, type Change, type CommittedChange } from "@flotilla/store";
import { CtrlMetrics } from "../src/metrics.ts";
import { ChangePoller, FAN_OUT_CHUNK, type ChangeSource } from "../src/streaming/poller.ts";

/** Outbox rows by region, and the poller's queries of them. */
class FakeOutbox implements ChangeSource {
  readonly log = new Map<number, Change[]>();
  readonly calls: string[] = [];

  /** Writes the region's change `version`; returns its row as a commit hands it over. */
  append(regionId: number, version: number): CommittedChange {
    const body = toBinary(ChangeEventSchema, create(ChangeEventSchema, { version: BigInt(version) }));
    const changes = this.log.get(regionId) ?? [];
    changes.push(changeOf(body));
    this.log.set(regionId, changes);
    return { regionId, version, body };
  }

  async heads(regionIds: number[]): Promise<Map<number, number>> {
    this.calls.push(`heads ${regionIds.join(",")}`);
    return new Map(regionIds.map((id) => [id, this.log.get(id)?.at(-1)?.version ?? 0]));
  }

  /** Called at each read, before it answers. */
  onRead: (() => void) | undefined;

  async read(regionId: number, after: number, limit: number): Promise<Change[]> {
    this.calls.push(`read ${regionId} after ${after}`);
    this.onRead?.();
    return (this.log.get(regionId) ?? []).filter((c) => c.version > after).slice(0, limit);
  }
}

async function until(what: string, ok: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(2);
  }
}

/**
 * A started poller on `outbox`, with a subscription to each of `regions` (region i + 1 named
 * regions[i]) made before it started, so that its first (full) poll covers them; resolves once
 * that poll has asked for their heads, with the outbox's calls cleared.
 */
async function startPoller(outbox: FakeOutbox, intervalMs: number, regions: string[]) {
  const lost = (region: string, why: string) => new Error(`${region}: ${why}`);
  const poller = new ChangePoller(outbox, { intervalMs, readLimit: 100 }, new CtrlMetrics(), lost, silentLogger);
  const subs = regions.map((name, i) => poller.subscribe(i + 1, name, 0, 0, 10_000));
  poller.start();
  await until("the first full poll", () => outbox.calls.includes(`heads ${regions.map((_, i) => i + 1).join(",")}`));
  outbox.calls.length = 0;
  return { poller, subs };
}

test("a wake reads only the woken regions, and asks for no heads", async () => {
  const outbox = new FakeOutbox();
  const {
    poller,
    subs: [one, two],
  } = await startPoller(outbox, 60_000, ["one", "two"]);
  try {
    outbox.append(1, 1);
    outbox.append(2, 1); // another replica's write: no wake
    poller.wake([1]);
    await until("region one's change", () => one.pushedUpTo === 1);
    await sleep(20);
    assert.deepEqual(outbox.calls, ["read 1 after 0"]);
    assert.equal(two.pushedUpTo, 0, "region two waits for the next full poll");
    // A woken region with nothing new: one read, nothing lost.
    poller.wake([1]);
    await until("the second read", () => outbox.calls.length === 2);
    await sleep(20);
    assert.deepEqual(outbox.calls, ["read 1 after 0", "read 1 after 1"]);
    assert.equal(one.failure, undefined);
  } finally {
    await poller.stop();
  }
});

test("a commit's own rows go out with no read when they follow on; otherwise the region is read", async () => {
  const outbox = new FakeOutbox();
  const {
    poller,
    subs: [one],
  } = await startPoller(outbox, 60_000, ["one"]);
  try {
    poller.wake([1], [outbox.append(1, 1)]);
    await until("version 1", () => one.pushedUpTo === 1);
    assert.deepEqual(outbox.calls, [], "no query");
    // Another replica wrote version 2: this process's version 3 does not follow on.
    outbox.append(1, 2);
    poller.wake([1], [outbox.append(1, 3)]);
    await until("version 3", () => one.pushedUpTo === 3);
    // Version 5's commit hands its rows over before version 4's.
    const four = outbox.append(1, 4);
    poller.wake([1], [outbox.append(1, 5)]);
    await until("version 5", () => one.pushedUpTo === 5);
    poller.wake([1], [four]);
    // A region nobody here watches is neither kept nor read.
    poller.wake([7], [outbox.append(7, 1)]);
    await sleep(20);
    assert.deepEqual(outbox.calls, ["read 1 after 1", "read 1 after 3"]);
    const sent = one.take({ count: 100, bytes: 1 << 20 }).map((c) => c.version);
    assert.deepEqual(sent, [1, 2, 3, 4, 5], "every version once, in order");
  } finally {
    await poller.stop();
  }
});

test("wakes never put off the full poll that finds other replicas' writes", async () => {
  const outbox = new FakeOutbox();
  const {
    poller,
    subs: [one, two],
  } = await startPoller(outbox, 50, ["one", "two"]);
  try {
    outbox.append(2, 1); // written by another replica
    // This process commits to region one every 5 ms, for far longer than the interval.
    let wakes = 0;
    for (; wakes < 200 && two.pushedUpTo < 1; wakes++) {
      outbox.append(1, wakes + 1);
      poller.wake([1]);
      await sleep(5);
    }
    assert.equal(two.pushedUpTo, 1, `region two's change arrived while region one was woken (${wakes} wakes)`);
    assert.ok(wakes < 200);
    await until("region one's changes", () => one.pushedUpTo === wakes);
  } finally {
    await poller.stop();
  }
});

test("a woken read that skips versions ends the region's streams (pruned)", async () => {
  const outbox = new FakeOutbox();
  const {
    poller,
    subs: [one],
  } = await startPoller(outbox, 60_000, ["one"]);
  try {
    outbox.append(1, 5); // versions 1–4 pruned before this poller read them
    poller.wake([1]);
    await until("the subscription to fail", () => one.failure !== undefined);
    assert.match(String(one.failure), /one: pruned/);
  } finally {
    await poller.stop();
  }
});

test(`a fan-out yields to the event loop after every ${FAN_OUT_CHUNK} streams, and not before`, async () => {
  const outbox = new FakeOutbox();
  const { poller, subs: first } = await startPoller(outbox, 60_000, ["one"]);
  try {
    const subs = [...first, ...Array.from({ length: 2 * FAN_OUT_CHUNK + 10 }, () => poller.subscribe(1, "one", 0, 0, 100))];
    outbox.append(1, 1);
    // Runs at the fan-out's first yield: the streams served by then are the first turn's.
    let servedInFirstTurn = -1;
    outbox.onRead = () => setImmediate(() => (servedInFirstTurn = subs.filter((s) => s.pushedUpTo === 1).length));
    poller.wake([1]);
    await until("every stream served", () => subs.every((s) => s.pushedUpTo === 1));
    assert.equal(servedInFirstTurn, FAN_OUT_CHUNK);
  } finally {
    await poller.stop();
  }
});
