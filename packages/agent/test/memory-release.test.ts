// MemoryRelease: one release after a burst of reconciles once the agent is quiet, none for a
// small burst, none while work is waiting, none when turned off; the start counts as a burst.
import assert from "node:assert/strict";
import { test } from "node:test";
import { MemoryRelease } from "../src/memory-release.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test("a burst of reconciles is released once, after idleMs without work and with nothing waiting", async () => {
  let releases = 0;
  let waiting = 2;
  const release = new MemoryRelease({ afterReconciles: 3, idleMs: 30, waiting: () => waiting, release: () => releases++ });
  release.reconciled();
  release.reconciled();
  release.reconciled();
  await sleep(60);
  assert.equal(releases, 0, "work is still waiting");
  waiting = 0;
  release.reconciled();
  await sleep(10);
  assert.equal(releases, 0, "released before idleMs passed");
  await sleep(60);
  assert.equal(releases, 1);
  release.reconciled();
  await sleep(60);
  assert.equal(releases, 1, "one reconcile after a release is not a burst");
  release.stop();
});

test("the start is released at its first quiet moment, however few reconciles it took; not when releasing is off", async () => {
  let releases = 0;
  let waiting = 1;
  const release = new MemoryRelease({ afterReconciles: 1000, idleMs: 20, waiting: () => waiting, release: () => releases++ });
  release.started();
  await sleep(50);
  assert.equal(releases, 0, "work is still waiting");
  waiting = 0;
  await sleep(50);
  assert.equal(releases, 1);
  release.reconciled();
  await sleep(50);
  assert.equal(releases, 1, "after it, a burst needs afterReconciles again");
  const off = new MemoryRelease({ afterReconciles: 0, idleMs: 5, waiting: () => 0, release: () => releases++ });
  off.started();
  await sleep(30);
  assert.equal(releases, 1);
  release.stop();
});

test("reports after the burst's last reconcile postpone the release; a backlog emptied without a report still ends it", async () => {
  let releases = 0;
  let waiting = 3;
  const release = new MemoryRelease({ afterReconciles: 2, idleMs: 30, waiting: () => waiting, release: () => releases++ });
  release.reconciled();
  release.reconciled();
  release.reported();
  await sleep(10);
  release.reported();
  await sleep(10);
  release.reported();
  await sleep(10);
  assert.equal(releases, 0, "each report restarts the idle wait");
  await sleep(60);
  assert.equal(releases, 0, "observations are still waiting to be reported");
  waiting = 0; // the reporter found nothing new to send: no report, no call
  await sleep(60);
  assert.equal(releases, 1);
  release.stop();
});

test("a burst smaller than afterReconciles, or with releasing off, is not released", async () => {
  let releases = 0;
  const small = new MemoryRelease({ afterReconciles: 10, idleMs: 5, waiting: () => 0, release: () => releases++ });
  const off = new MemoryRelease({ afterReconciles: 0, idleMs: 5, waiting: () => 0, release: () => releases++ });
  for (let i = 0; i < 9; i++) small.reconciled();
  for (let i = 0; i < 100; i++) off.reconciled();
  await sleep(40);
  assert.equal(releases, 0);
});

test("stop() cancels a scheduled release", async () => {
  let releases = 0;
  const release = new MemoryRelease({ afterReconciles: 1, idleMs: 20, waiting: () => 0, release: () => releases++ });
  release.reconciled();
  release.stop();
  await sleep(50);
  assert.equal(releases, 0);
});
