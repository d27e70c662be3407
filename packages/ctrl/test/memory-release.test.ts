// A burst of malformed requests from an authenticated client (every RPC, every protocol, both
// transports) costs ctrl no memory for good: once RSS has grown by --memory-release-growth-bytes
// (and --memory-release-interval has passed since the last release), ctrl returns what the burst
// freed to the system. With the growth at 0 it never releases.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
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
import { fuzzRequests, sendFuzz } from "@flotilla/testkit/fuzz";
import { waitFor } from "@flotilla/testkit/stack";

const TOKEN = "memory-release-admin-token-0123456789abcdef";
const SERVICES = [ClusterService, DeploymentService, RegionService, NetworkPolicyService, SentinelService, OperatorService, HistoryService, StatusService];
/** The bound this test states: RSS after the burst, released, at most this much above before it. */
const BOUND_BYTES = 30 * 1024 * 1024;
const skip = process.platform === "linux" ? false : "reads /proc";

const rssOf = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;
async function releases(ctrl: CtrlProcess): Promise<number> {
  const text = await (await fetch(`${ctrl.url}/metrics`)).text();
  return Number(/^flotilla_ctrl_memory_releases_total (\d+)/m.exec(text)?.[1] ?? Number.NaN);
}

const [sqlite] = await testDatabases();

describe("memory after a malformed burst (ctrl process)", { skip }, () => {
  let ctrl: CtrlProcess;
  let quiet: CtrlProcess;
  let cleanups: (() => Promise<void>)[] = [];
  before(async () => {
    const [a, b] = [await sqlite!.db.create(), await sqlite!.db.create()];
    cleanups = [a.drop, b.drop];
    [ctrl, quiet] = await Promise.all([
      spawnCtrl(a.url, TOKEN, ["--memory-release-interval", "5s"]),
      spawnCtrl(b.url, TOKEN, ["--memory-release-growth-bytes", "0"]),
    ]);
  });
  after(async () => {
    await Promise.all([ctrl?.kill("SIGKILL"), quiet?.kill("SIGKILL")]);
    for (const cleanup of cleanups) await cleanup();
  });

  test("a burst of malformed requests on every RPC and protocol: RSS back within the bound once released", async () => {
    // The first check releases what starting left.
    await waitFor(async () => (await releases(ctrl)) >= 1, "the release after start", 15_000);
    const before = rssOf(ctrl.child.pid!);
    const requests = [...fuzzRequests(SERVICES)];
    assert.ok(requests.length > 1500);
    const outcomes = await sendFuzz(ctrl.url, TOKEN, requests, 16, 2000);
    assert.equal(outcomes.get(0) ?? 0, 0, "every request was answered");
    const grown = rssOf(ctrl.child.pid!) - before;
    const released = await releases(ctrl);
    await waitFor(async () => (await releases(ctrl)) > released || rssOf(ctrl.child.pid!) - before <= BOUND_BYTES, "a release after the burst", 15_000);
    await sleep(6000); // a release in progress, or the one the burst's tail still triggers
    const afterBurst = rssOf(ctrl.child.pid!) - before;
    const mib = (n: number) => (n / 2 ** 20).toFixed(1);
    assert.ok(
      afterBurst <= BOUND_BYTES,
      `RSS ${mib(afterBurst)} MiB above before the burst once released (${mib(grown)} MiB at its end); bound ${mib(BOUND_BYTES)} MiB`,
    );
  });

  test("--memory-release-growth-bytes 0: no release", async () => {
    await sleep(6000); // past the first check
    assert.equal(await releases(quiet), 0);
    assert.ok((await releases(ctrl)) >= 1);
  });
});
