// Rollout analysis when the region's Prometheus fails, end to end: ctrl, a real agent of region
// east, the emulator. A Prometheus that is down, one that never answers (past
// --analysis-query-timeout), and a query without data give errors; past consecutiveErrorLimit
// the wave fails: rolled back (onFailure ROLLBACK) or frozen FAILED (PAUSE), never passed however
// short its bake. One that answers again before the limit resets the count, and the wave passes
// on its measurements.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { RolloutFailurePolicy, RolloutState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { REGION, startStack, waitFor, type Stack } from "@flotilla/testkit/stack";

const secs = (s: number) => ({ seconds: BigInt(s), nanos: 0 });

/** A stand-in Prometheus whose behaviour the test switches: down (connection refused), hanging, or answering `value`. */
class FakePrometheus {
  mode: "hang" | "answer" | "empty" = "answer";
  value = "0";
  queries = 0;
  #server: Server | undefined;
  #port = 0;

  get address(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  async up(): Promise<void> {
    this.#server = createServer((_req, res) => {
      this.queries++;
      if (this.mode === "hang") return;
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(
          JSON.stringify({ status: "success", data: { resultType: "vector", result: this.mode === "empty" ? [] : [{ metric: {}, value: [0, this.value] }] } }),
        );
    });
    await new Promise<void>((resolve) => this.#server!.listen(this.#port, "127.0.0.1", resolve));
    this.#port = (this.#server.address() as AddressInfo).port;
  }

  async down(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise((resolve) => this.#server?.close(resolve));
  }
}

const [{ db, skip }] = await testDatabases();

describe("analysis faults: the region's Prometheus down, slow or without data", { skip }, () => {
  let stack: Stack;
  const prometheus = new FakePrometheus();
  before(async () => {
    stack = await startStack(db);
    await prometheus.up();
    await stack.t.client(RegionService).updateRegion({ region: { name: REGION, metrics: { prometheus: { address: prometheus.address } } } });
    await stack.agent({ analysisPollIntervalMs: 100, analysisQueryTimeoutMs: 300 });
  });
  after(async () => {
    await stack.close();
    await prometheus.down();
  });

  const deploy = (id: string, image: string, onFailure = RolloutFailurePolicy.ROLLBACK) =>
    stack.t.client(DeploymentService).createDeployment({
      deployment: {
        id,
        namespace: "demo",
        image,
        regions: [{ region: REGION, replicas: 1 }],
        strategy: {
          waves: [{ name: "only", regions: [REGION], bake: secs(1) }],
          onFailure,
          analysis: [
            {
              name: "errors",
              provider: { case: "prometheus", value: { query: `errors{deployment="{{deployment}}"}` } },
              interval: secs(1),
              count: 3,
              consecutiveErrorLimit: 1,
              successCondition: "result < 0.05",
            },
          ],
        },
      },
    });
  const ended = (id: string) =>
    waitFor(
      async () => {
        const r = (await stack.t.client(RolloutService).getRollout({ id })).rollout!;
        return [RolloutState.SUCCEEDED, RolloutState.ROLLED_BACK, RolloutState.FAILED].includes(r.state) && r;
      },
      `the rollout of ${id} ends`,
      30_000,
    );

  test("down: every measurement an error; past consecutiveErrorLimit the wave is rolled back, never passed", async () => {
    await prometheus.down();
    try {
      await deploy("down", "nginx:1.27");
      const r = await ended("down");
      assert.equal(r.state, RolloutState.ROLLED_BACK, r.reason);
      assert.match(
        r.reason,
        /^wave only: analysis errors in east errored: 2 consecutive errors \(consecutiveErrorLimit 1\); last error: request failed: .*ECONNREFUSED/,
      );
    } finally {
      await prometheus.up();
    }
  });

  test("down, onFailure PAUSE: the errors past the limit freeze the rollout FAILED, never passed", async () => {
    await prometheus.down();
    try {
      await deploy("down-paused", "nginx:1.27", RolloutFailurePolicy.PAUSE);
      const r = await ended("down-paused");
      assert.equal(r.state, RolloutState.FAILED, r.reason);
      assert.match(r.reason, /^wave only: analysis errors in east errored: 2 consecutive errors \(consecutiveErrorLimit 1\)/);
      assert.equal(r.waves[0]!.regions[0]!.rolledBack, false, "frozen: the region keeps the new revision");
    } finally {
      await prometheus.up();
    }
  });

  test("slow: a query past --analysis-query-timeout is an error, and the same outcome follows", async () => {
    prometheus.mode = "hang";
    try {
      await deploy("slow", "nginx:1.27");
      const r = await ended("slow");
      assert.equal(r.state, RolloutState.ROLLED_BACK, r.reason);
      assert.match(r.reason, /2 consecutive errors \(consecutiveErrorLimit 1\); last error: no answer within 300 ms$/);
    } finally {
      prometheus.mode = "answer";
    }
  });

  test("no data (a query that selects nothing) is inconclusive: the rollout pauses with the reason, never passes, never counts an error", async () => {
    prometheus.mode = "empty";
    try {
      await deploy("nodata", "nginx:1.27");
      const r = await waitFor(
        async () => {
          const rollout = (await stack.t.client(RolloutService).getRollout({ id: "nodata" })).rollout!;
          return rollout.state !== RolloutState.PROGRESSING && rollout;
        },
        "the rollout of nodata judged",
        30_000,
      );
      assert.equal(r.state, RolloutState.PAUSED, r.reason);
      assert.match(r.reason, /inconclusive: 1 inconclusive measurement \(inconclusiveLimit 0\); last result: no data \(the query selected nothing\)$/);
    } finally {
      prometheus.mode = "answer";
    }
  });

  test("back before the limit: one error, then values; the wave passes on three good measurements", async () => {
    prometheus.mode = "hang";
    const before = prometheus.queries;
    await deploy("flaky", "nginx:1.27");
    await waitFor(() => prometheus.queries > before, "a first (hanging) query", 20_000);
    prometheus.mode = "answer";
    const r = await ended("flaky");
    assert.equal(r.state, RolloutState.SUCCEEDED, r.reason);
    const measured = await stack.t.store.analysis.ofBakes([
      { rolloutId: r.id, wave: 0, bakeStart: Number(r.waves[0]!.runningSince!.seconds) * 1000 + Math.floor(r.waves[0]!.runningSince!.nanos / 1e6) },
    ]);
    assert.equal(measured.filter((m) => m.value === 0).length, 3);
    assert.ok(
      measured.some((m) => m.error === "no answer within 300 ms"),
      "the error before them is kept",
    );
  });
});
