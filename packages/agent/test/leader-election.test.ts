// The leader elector against the emulator's coordination.k8s.io/v1 Leases, through the real
// @kubernetes/client-node: acquire, renew, release, conflicts on resourceVersion, and stepping
// down once renews fail for the renew deadline.
import { after, afterEach, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { ApiException, CoordinationV1Api, V1MicroTime } from "@kubernetes/client-node";
import { startCluster, type Cluster } from "@flotilla/testkit/emulator";
import { waitFor } from "@flotilla/testkit/stack";
import { silentLogger } from "../src/index.ts";
import { LeaderElector, validateTimings, type LeaderElectorOptions } from "../src/leader-election.ts";

const NAMESPACE = "default";

describe("leader election", () => {
  let cluster: Cluster;
  let leases: CoordinationV1Api;
  const running: { stop: AbortController; done: Promise<void> }[] = [];
  before(async () => {
    cluster = await startCluster();
    leases = cluster.kc.makeApiClient(CoordinationV1Api);
  });
  afterEach(async () => {
    for (const r of running.splice(0)) {
      r.stop.abort();
      await r.done;
    }
    cluster.emu.faults.clear();
  });
  after(() => cluster?.emu.stop());

  /** A candidate with short timings, its events recorded. */
  function candidate(name: string, identity: string, options: Partial<LeaderElectorOptions> = {}) {
    const events: string[] = [];
    const elector = new LeaderElector({
      kubeClient: cluster.kube,
      namespace: NAMESPACE,
      name,
      identity,
      leaseDurationMs: 2000,
      renewDeadlineMs: 1000,
      retryPeriodMs: 200,
      onStartedLeading: (epoch) => events.push(`started ${epoch}`),
      onStoppedLeading: (reason) => events.push(`stopped: ${reason}`),
      log: silentLogger,
      ...options,
    });
    const stop = new AbortController();
    const run = { stop, done: elector.run(stop.signal) };
    running.push(run);
    return {
      elector,
      events,
      stop: () => {
        stop.abort();
        return run.done;
      },
    };
  }

  const lease = (name: string) => leases.readNamespacedLease({ name, namespace: NAMESPACE });

  test("the first candidate creates the Lease and leads in epoch 0; it renews", async () => {
    const a = candidate("acquire", "a");
    await waitFor(() => a.elector.isLeading(), "a leads");
    assert.deepEqual(a.events, ["started 0"]);
    const first = (await lease("acquire")).spec!;
    assert.equal(first.holderIdentity, "a");
    assert.equal(first.leaseDurationSeconds, 2);
    assert.equal(first.leaseTransitions, 0);
    assert.ok(first.acquireTime && first.renewTime);
    // client-node 2.0.1 leaves MicroTime fields as the strings the server sent.
    const ms = (time: unknown) => new Date(time as string).getTime();
    assert.match(String(first.renewTime), /\.\d{6}Z$/, "MicroTime: microseconds");
    await waitFor(async () => ms((await lease("acquire")).spec!.renewTime) > ms(first.renewTime), "renewTime moves");
    const renewed = (await lease("acquire")).spec!;
    assert.equal(ms(renewed.acquireTime), ms(first.acquireTime), "a renew keeps acquireTime");
    assert.equal(renewed.leaseTransitions, 0);
    assert.equal(a.elector.epoch, 0);
  });

  test("a standby waits while the Lease is held and takes it at once after a release (epoch + 1)", async () => {
    const a = candidate("release", "a");
    await waitFor(() => a.elector.isLeading(), "a leads");
    const b = candidate("release", "b");
    await new Promise((resolve) => setTimeout(resolve, 600));
    assert.equal(b.elector.isLeading(), false, "b does not take a held Lease");
    await a.stop();
    assert.deepEqual(a.events, ["started 0", "stopped: stopping"]);
    const released = (await lease("release")).spec!;
    // b retries every retry period and takes a released Lease at once: it may hold it already.
    if (released.holderIdentity !== "b") {
      assert.equal(released.holderIdentity, "", "released as client-go releases");
      assert.equal(released.leaseDurationSeconds, 1);
    }
    const since = performance.now();
    await waitFor(() => b.elector.isLeading(), "b leads");
    assert.ok(performance.now() - since < 1500, "well before the lease duration");
    assert.deepEqual(b.events, ["started 1"]);
    assert.equal((await lease("release")).spec!.holderIdentity, "b");
  });

  test("a holder that stops renewing (kill -9) loses the Lease after the lease duration", async () => {
    // Written as another process would have left it: held, renewed just now.
    const now = new V1MicroTime(Date.now());
    await leases.createNamespacedLease({
      namespace: NAMESPACE,
      body: { metadata: { name: "expire" }, spec: { holderIdentity: "dead", leaseDurationSeconds: 1, acquireTime: now, renewTime: now, leaseTransitions: 4 } },
    });
    const b = candidate("expire", "b");
    await waitFor(() => b.elector.isLeading(), "b leads once the lease expired");
    assert.deepEqual(b.events, ["started 5"]);
  });

  test("updates carry the resourceVersion: a stale one is a 409 Conflict, and of racing candidates exactly one leads", async () => {
    const created = await leases.createNamespacedLease({
      namespace: NAMESPACE,
      body: { metadata: { name: "race" }, spec: { holderIdentity: "", leaseTransitions: 7 } },
    });
    await leases.replaceNamespacedLease({ name: "race", namespace: NAMESPACE, body: { ...created, spec: { ...created.spec, holderIdentity: "x" } } });
    await assert.rejects(
      leases.replaceNamespacedLease({ name: "race", namespace: NAMESPACE, body: { ...created, spec: { ...created.spec, holderIdentity: "y" } } }),
      (error: unknown) => error instanceof ApiException && error.code === 409,
    );
    await assert.rejects(
      leases.replaceNamespacedLease({ name: "race", namespace: NAMESPACE, body: { ...created, metadata: { name: "race" } } }),
      (error: unknown) => error instanceof ApiException && error.code === 422,
      "a Lease update without a resourceVersion is refused (no unconditional update)",
    );
    await leases.replaceNamespacedLease({
      name: "race",
      namespace: NAMESPACE,
      body: { ...(await lease("race")), spec: { holderIdentity: "", leaseTransitions: 7 } },
    });
    const candidates = ["p", "q", "r"].map((id) => candidate("race", id));
    await waitFor(() => candidates.some((c) => c.elector.isLeading()), "someone leads");
    await new Promise((resolve) => setTimeout(resolve, 600));
    assert.equal(candidates.filter((c) => c.elector.isLeading()).length, 1);
    const spec = (await lease("race")).spec!;
    assert.equal(spec.leaseTransitions, 8, "one transition, from the released Lease to its one new holder");
    assert.deepEqual(candidates.find((c) => c.elector.isLeading())!.events, ["started 8"]);
  });

  test("a leader whose renews fail steps down within the renew deadline, before the lease could expire", async () => {
    const a = candidate("deadline", "a");
    await waitFor(() => a.elector.isLeading(), "a leads");
    cluster.emu.faults.setErrorRate("update", 1, 500);
    const since = performance.now();
    await waitFor(() => a.events.length === 2, "a steps down");
    const took = performance.now() - since;
    assert.match(a.events[1]!, /renew deadline passed/);
    assert.ok(took <= 1000 + 300, `stepped down ${Math.round(took)} ms after the last renew: within the renew deadline`);
    assert.equal(a.elector.isLeading(), false);
    assert.equal(a.elector.epoch, undefined);
    cluster.emu.faults.clear();
    await waitFor(() => a.elector.isLeading(), "a leads again once it can renew");
    assert.deepEqual(a.events.at(-1), "started 0", "the same holder again: no transition");
  });

  test("a hanging API server: the leader steps down at the deadline, and stopping does not wait for it", async () => {
    const a = candidate("hanging", "a");
    await waitFor(() => a.elector.isLeading(), "a leads");
    cluster.emu.faults.latencyMs("*", 10_000);
    await waitFor(() => a.events.length === 2, "a steps down");
    assert.match(a.events[1]!, /renew deadline passed/);
    const since = performance.now();
    await a.stop();
    assert.ok(performance.now() - since < 2 * 1000 + 500, "each call is given up after the renew deadline");
  });

  test("isLeading() checks the clock itself: a paused process does not lead on after the deadline", async () => {
    let skew = 0;
    const a = candidate("paused", "a", { monotonic: () => performance.now() + skew });
    await waitFor(() => a.elector.isLeading(), "a leads");
    skew = 5000; // as if the event loop had been stopped for 5 s
    assert.equal(a.elector.isLeading(), false);
    assert.match(a.events.at(-1)!, /renew deadline passed/);
  });

  test("stepDown() ends leading at once; the candidate campaigns again", async () => {
    const a = candidate("step-down", "a");
    await waitFor(() => a.elector.isLeading(), "a leads");
    a.elector.stepDown("fenced by ctrl");
    assert.equal(a.elector.isLeading(), false);
    assert.deepEqual(a.events, ["started 0", "stopped: fenced by ctrl"]);
  });

  test("timings are validated as client-go does", () => {
    assert.throws(
      () => validateTimings({ leaseDurationMs: 10_000, renewDeadlineMs: 10_000, retryPeriodMs: 2000 }),
      /lease duration must be greater than the renew deadline/,
    );
    assert.throws(() => validateTimings({ leaseDurationMs: 15_000, renewDeadlineMs: 2000, retryPeriodMs: 2000 }), /1.2× the retry period/);
    assert.throws(() => validateTimings({ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 0 }), /greater than zero/);
    assert.throws(() => validateTimings({ leaseDurationMs: 15_500, renewDeadlineMs: 10_000, retryPeriodMs: 2000 }), /whole seconds/);
    validateTimings({ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2000 });
  });
});
