// What a burst of malformed and oversized requests from an authenticated client (the protocol
// fuzz: every RPC, every protocol, both transports, 16 at a time, each input that costs a
// decoder most) costs ctrl: during the burst its peak RSS stays within 100 MB (10^8 bytes, as the
// bounds are stated) of its RSS at rest (each RPC's message limit, the decode budget and the
// shape limits bound what decoding takes, the budget's memory headroom what requests leave
// behind, and CTRL_NODE_FLAGS' semi-space cap what V8's young generation grows to), and 45 s after it
// within 30 MB (ctrl returns what the burst freed once RSS has grown by
// --memory-release-growth-bytes); a second and a third burst change neither: neither figure of
// theirs is above the first burst's by more than the noise measured. The peak holds whatever ran
// before: right after 50 stalled syncs of a 9 MB region were released, on a database whose lists
// are megabytes, the burst peaks within 100 MB of the RSS it started from. With the growth at 0
// ctrl never releases.
import { after, before, describe, test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { HistoryService } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { OperatorService } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import { StatusService } from "@flotilla/proto/ctrl/v1/status_pb.js";
import { spawnCtrl, type CtrlProcess } from "@flotilla/testkit/ctrl-process";
import { testDatabases } from "@flotilla/testkit/databases";
import { clientsOf, createBulkyDeployments } from "@flotilla/testkit/ctrl";
import { fuzzRequests, sendFuzz } from "@flotilla/testkit/fuzz";
import { stalledSyncs } from "@flotilla/testkit/interop";
import { waitFor } from "@flotilla/testkit/stack";

const TOKEN = "memory-release-admin-token-0123456789abcdef";
const SERVICES = [ClusterService, DeploymentService, RegionService, NetworkPolicyService, SentinelService, OperatorService, HistoryService, StatusService];
const MIB = 2 ** 20;
const MB = 10 ** 6;
/** The bounds this test states, above ctrl's RSS at rest before the first burst. */
const PEAK_BOUND = 100 * MB;
const AFTER_BOUND = 30 * MB;
/**
 * How far a later burst's RSS 45 s later may be above the first's and still count as the same:
 * it moved by under 2 MiB from burst to burst; 20 MiB leaves room for the machine's other work
 * without letting a burst keep what the one before it took.
 */
const NOISE = 20 * MIB;
/**
 * The same for the peak, which moves from burst to burst by itself: with the request buffers
 * freed and a GC asked for per 16 MiB of them, the highest of three bursts on one ctrl was the
 * first, second or third alike, up to +28.0 MiB above the first (14 runs of 3 bursts). A burst
 * that kept what the one before it took would also show in RSS 45 s later.
 */
const PEAK_NOISE = 35 * MIB;
const skip = process.platform === "linux" ? false : "reads /proc";

const status = (pid: number, field: "VmRSS" | "VmHWM") =>
  Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;
async function releases(ctrl: CtrlProcess): Promise<number> {
  const text = await (await fetch(`${ctrl.url}/metrics`)).text();
  return Number(/^flotilla_ctrl_memory_releases_total (\d+)/m.exec(text)?.[1] ?? Number.NaN);
}

/** How long a fuzz request may wait for its answer: the suite runs four files at once on two cores. */
const ANSWER_WITHIN_MS = 30_000;
const [sqlite, mysql] = await testDatabases();
const mib = (n: number) => (n / MIB).toFixed(1);

/** Sends the fuzz (`round` seeds it) to `ctrl`; returns ctrl's peak RSS (VmHWM) during it and the HTTP statuses. */
async function fuzzBurst(t: TestContext, ctrl: CtrlProcess, round: number): Promise<{ hwm: number; outcomes: Map<number, number> }> {
  const pid = ctrl.child.pid!;
  writeFileSync(`/proc/${pid}/clear_refs`, "5"); // resets VmHWM to the current RSS
  const reasons = new Map<string, number>();
  const outcomes = await sendFuzz(ctrl.url, TOKEN, fuzzRequests(SERVICES, round), 16, ANSWER_WITHIN_MS, (request, why) => {
    const reason = `${why}: ${request.path}`;
    reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
  });
  const hwm = status(pid, "VmHWM");
  // The requests that once ended with no status (0 to 22 of about 3,300 per burst under load)
  // were all HTTP/1.1 ones sent on a kept-alive socket idle for 5.5 to 6.5 s, reset
  // (ECONNRESET) within a second: ctrl closes idle sockets after its keepAliveTimeout (5 s,
  // plus Node's 1 s buffer), as its Keep-Alive header announces, and the client reused one
  // just then; sendFuzz's agent now drops them first. Since, loaded CI runs had 10 or 11 of
  // 3,486 without an answer in one burst: HTTP/2 unary calls, each reported with why it got
  // none. Measured on a quiet machine, small calls on the burst's one HTTP/2 connection wait
  // 3 to 5 s behind its megabyte bodies: the client's connection window stays at 0 while ctrl
  // reads the refused bodies to their end (about 7 MB/s, 64 KiB per window update), and they
  // are answered together once those are through; on a loaded machine that passes 30 s. Up to
  // 1% fails nothing: this test is about memory.
  const sent = [...outcomes.values()].reduce((a, b) => a + b, 0);
  const unanswered = outcomes.get(0) ?? 0;
  const why = [...reasons].map(([reason, n]) => `${n}× ${reason}`).join("; ");
  if (unanswered > 0) t.diagnostic(`${unanswered} of ${sent} requests got no answer: ${why}`);
  assert.ok(unanswered <= sent / 100, `${unanswered} of ${sent} requests got no answer within ${ANSWER_WITHIN_MS} ms: ${why}`);
  return { hwm, outcomes };
}

describe("memory during and after an authenticated fuzz burst (ctrl process, MySQL)", { skip: skip || mysql!.skip }, () => {
  let ctrl: CtrlProcess;
  let drop: () => Promise<void> = async () => {};
  let rest = 0;
  before(async () => {
    const database = await mysql!.db.create();
    drop = database.drop;
    ctrl = await spawnCtrl(database.url, TOKEN);
    // The first check releases what starting left.
    await waitFor(async () => (await releases(ctrl)) >= 1, "the release after start", 15_000);
    rest = status(ctrl.child.pid!, "VmRSS");
  });
  after(async () => {
    await ctrl?.kill("SIGKILL");
    await drop();
  });

  const first = { peak: 0, later: 0 };
  for (const round of [1, 2, 3]) {
    // A burst covers every RPC's costliest inputs (about 3,600 requests now, 190 s alone with
    // its 45 s wait): beside the suite's other files it can pass the runner's 300 s default.
    test(`burst ${round}: peak within ${PEAK_BOUND / MB} MB of rest, 45 s later within ${AFTER_BOUND / MB} MB, no burst above the first`, {
      timeout: 600_000,
    }, async (t) => {
      const pid = ctrl.child.pid!;
      const logBefore = ctrl.log().length;
      const { hwm, outcomes } = await fuzzBurst(t, ctrl, round);
      const peak = hwm - rest;
      await sleep(45_000);
      const later = status(pid, "VmRSS") - rest;
      const measured = `rest ${mib(rest)} MiB; peak +${mib(peak)} MiB, 45 s later +${mib(later)} MiB; HTTP statuses ${JSON.stringify(Object.fromEntries(outcomes))}`;
      t.diagnostic(measured);
      // When RSS 45 s later is off, whether a release ran after the burst, and what it left, says why.
      t.diagnostic(
        ctrl
          .log()
          .slice(logBefore)
          .split("\n")
          .filter((line) => line.includes("memory released"))
          .join("\n"),
      );
      if (round === 1) Object.assign(first, { peak, later });
      assert.ok(later <= AFTER_BOUND, `45 s later: ${measured}`);
      // 100 MB is 95.4 MiB. Large requests wait while RSS is past --decode-memory-headroom-bytes
      // (40 MiB) above rest (decode-budget.ts): +48.6 to +52.2 MiB in this test's 3 bursts alone,
      // against +78.7 to +84.0 MiB without that hold.
      assert.ok(peak <= PEAK_BOUND, `peak: ${measured}`);
      if (round > 1) {
        const against = `${measured}; the first burst: peak +${mib(first.peak)} MiB, 45 s later +${mib(first.later)} MiB`;
        assert.ok(peak <= first.peak + PEAK_NOISE, `the peak grew from burst to burst: ${against}`);
        assert.ok(later <= first.later + NOISE, `RSS 45 s later grew from burst to burst: ${against}`);
      }
    });
  }
});

describe("an authenticated fuzz burst right after 50 stalled syncs of 9 MB were released (ctrl process, MySQL)", { skip: skip || mysql!.skip }, () => {
  let ctrl: CtrlProcess;
  let drop: () => Promise<void> = async () => {};
  before(async () => {
    const database = await mysql!.db.create();
    drop = database.drop;
    ctrl = await spawnCtrl(database.url, TOKEN);
    const clients = clientsOf(ctrl.url, TOKEN);
    await clients.client(RegionService).createRegion({ region: { name: "big" } });
    // 150 resources of about 60 KB, as stalled-streams.test.ts: every list the fuzz sends
    // (ListDeployments, their history) reads from them too. Before pages were bounded in bytes
    // (--list-page-bytes) this burst peaked at +150 and +163 MiB above its start.
    await createBulkyDeployments(clients, "big", 150, 60_000);
    await waitFor(async () => (await releases(ctrl)) >= 1, "the release after start", 15_000);
  });
  after(async () => {
    await ctrl?.kill("SIGKILL");
    await drop();
  });

  // The seeding and the stalled syncs add a minute to the burst's minutes on two cores.
  test(`peak within ${PEAK_BOUND / MB} MB of the RSS the burst started from`, { timeout: 900_000 }, async (t) => {
    const stalled = await stalledSyncs(ctrl.url, "big", TOKEN, 50);
    stalled.close();
    await sleep(1000); // ctrl sees the connections go
    const start = status(ctrl.child.pid!, "VmRSS");
    const { hwm, outcomes } = await fuzzBurst(t, ctrl, 1);
    const measured = `started at ${mib(start)} MiB; peak +${mib(hwm - start)} MiB; HTTP statuses ${JSON.stringify(Object.fromEntries(outcomes))}`;
    t.diagnostic(measured);
    assert.ok(hwm - start <= PEAK_BOUND, `peak: ${measured}`);
  });
});

describe("--memory-release-growth-bytes 0 (ctrl process)", { skip }, () => {
  let quiet: CtrlProcess;
  let drop: () => Promise<void> = async () => {};
  before(async () => {
    const database = await sqlite!.db.create();
    drop = database.drop;
    quiet = await spawnCtrl(database.url, TOKEN, ["--memory-release-growth-bytes", "0"]);
  });
  after(async () => {
    await quiet?.kill("SIGKILL");
    await drop();
  });

  test("no release", async () => {
    await sleep(6000); // past the first check
    assert.equal(await releases(quiet), 0);
  });
});
