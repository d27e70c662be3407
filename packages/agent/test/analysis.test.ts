// The agent's side of rollout analysis (src/analysis.ts) against a scripted ctrl and a real HTTP
// server standing in for Prometheus: a task's query runs on its schedule and its one number is
// reported with the revision the pods run; no sample, several, a slow Prometheus (past
// --analysis-query-timeout) and a dead one are errors, reported as such; nothing is measured while
// the pods run another revision; a task ctrl no longer lists stops; pending measurements are
// bounded (--analysis-max-pending), the oldest dropped; while ctrl answers, a task whose
// measurement waits to be sent is not measured again.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import type { Client } from "@connectrpc/connect";
import { AnalysisTaskSchema, type ClusterService, type Measurement, type ReportMeasurementsRequest } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { createLogger } from "@flotilla/runtime";
import { AnalysisRunner, numberAt, prometheusResult } from "../src/analysis.ts";
import { AgentMetrics } from "../src/metrics.ts";

/** What the fake Prometheus answers per query text (a function of the query), or "hang". */
let answer: (query: string) => unknown = () => ({ status: "success", data: { resultType: "vector", result: [] } });
/** How long the fake Prometheus takes to answer. */
let answerDelayMs = 0;
let prometheus: Server;
let address: string;
const queries: string[] = [];

before(async () => {
  prometheus = createServer((req, res) => {
    const query = new URL(req.url!, "http://x").searchParams.get("query") ?? "";
    queries.push(query);
    const body = answer(query);
    if (body === "hang") return;
    setTimeout(() => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body)), answerDelayMs);
  });
  await new Promise<void>((resolve) => prometheus.listen(0, "127.0.0.1", resolve));
  address = `http://127.0.0.1:${(prometheus.address() as AddressInfo).port}`;
});
after(() => {
  prometheus.closeAllConnections();
  prometheus.close();
});

const vector = (...values: string[]) => ({ status: "success", data: { resultType: "vector", result: values.map((v) => ({ metric: {}, value: [0, v] })) } });

const task = (id: string, query: string, revision = 3n, intervalMs = 200) =>
  create(AnalysisTaskSchema, {
    id,
    deployment: "shop",
    revision,
    startTime: timestampFromMs(Date.now()),
    analysis: { name: id, provider: { case: "prometheus", value: { query } }, interval: { seconds: 0n, nanos: intervalMs * 1_000_000 } },
  });

/** A runner against a scripted ctrl that lists `tasks()` and keeps what it is sent. */
function runner(
  tasks: () => ReturnType<typeof task>[],
  options: {
    revision?: number;
    queryTimeoutMs?: number;
    maxPending?: number;
    prometheusAddress?: string;
    ctrlDown?: () => boolean;
    ctrlDelayMs?: number;
    acceptsNoData?: boolean;
  } = {},
) {
  const sent: Measurement[] = [];
  /** Each report's measurements and when it was answered. */
  const reports: { measurements: Measurement[]; answeredAt: number }[] = [];
  const client = {
    async reportMeasurements(req: ReportMeasurementsRequest) {
      if (options.ctrlDelayMs) await new Promise((x) => setTimeout(x, options.ctrlDelayMs));
      if (options.ctrlDown?.()) throw new Error("ctrl unavailable");
      reports.push({ measurements: req.measurements, answeredAt: Date.now() });
      sent.push(...req.measurements);
      return { tasks: tasks(), prometheusAddress: options.prometheusAddress ?? address, acceptsNoData: options.acceptsNoData ?? true };
    },
  } as unknown as Client<typeof ClusterService>;
  const metrics = new AgentMetrics();
  const r = new AnalysisRunner({
    client,
    region: "canary",
    appliedRevision: () => options.revision ?? 3,
    pollIntervalMs: 100,
    queryTimeoutMs: options.queryTimeoutMs ?? 2000,
    callTimeoutMs: 1000,
    maxPending: options.maxPending ?? 1000,
    metrics,
    log: createLogger({ level: "error" }),
  });
  const stop = new AbortController();
  const done = r.run(stop.signal);
  return { sent, reports, metrics, runner: r, stop: () => (stop.abort(), done) };
}

const waitFor = async (what: string, ok: () => boolean, ms = 5000) => {
  for (const deadline = Date.now() + ms; !ok(); await new Promise((r) => setTimeout(r, 20))) assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
};

describe("analysis runner", () => {
  test("measures on schedule, one per due index, with the pods' revision; a task no longer listed stops", async () => {
    answer = () => vector("0.25");
    let listed = [task("errors", "sum(rate(x[1m]))")];
    const r = runner(() => listed);
    try {
      await waitFor("three measurements", () => r.sent.length >= 3);
      assert.deepEqual(
        r.sent.slice(0, 3).map((m) => [m.task, m.index, m.revision, m.result.case, m.result.value]),
        [0, 1, 2].map((i) => ["errors", i, 3n, "value", 0.25]),
      );
      assert.equal(queries.at(-1), "sum(rate(x[1m]))");
      listed = [];
      await new Promise((resolve) => setTimeout(resolve, 300));
      const count = r.sent.length;
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.ok(r.sent.length <= count + 1, "nothing more once the task is gone (one in flight at most)");
    } finally {
      await r.stop();
    }
  });

  test("no sample, several, a slow and a dead Prometheus, and a region without one are errors, reported", async () => {
    answer = (q) => (q === "empty" ? vector() : q === "many" ? vector("1", "2") : q === "slow" ? "hang" : vector("1"));
    const r = runner(() => [task("empty", "empty", 3n, 60_000), task("many", "many", 3n, 60_000), task("slow", "slow", 3n, 60_000)], { queryTimeoutMs: 300 });
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const dead = runner(() => [task("dead", "up", 3n, 60_000)], { prometheusAddress: `http://127.0.0.1:${closedPort}` });
    const none = runner(() => [task("none", "up", 3n, 60_000)], { prometheusAddress: "" });
    // A ctrl of an earlier version, which takes no no_data: an error, as it knew them.
    const older = runner(() => [task("empty", "empty", 3n, 60_000)], { acceptsNoData: false });
    try {
      await waitFor("three errors", () => r.sent.length >= 3 && dead.sent.length >= 1 && none.sent.length >= 1 && older.sent.length >= 1);
      const error = (sent: Measurement[], id: string) => sent.find((m) => m.task === id)?.result;
      assert.equal(error(r.sent, "empty")?.case, "noData", "no sample: no data, not an error");
      assert.deepEqual(error(older.sent, "empty"), { case: "error", value: "Prometheus: no data (an empty vector)" });
      assert.deepEqual(error(r.sent, "many"), { case: "error", value: "Prometheus: 2 samples; aggregate them to one (e.g. sum(...))" });
      assert.deepEqual(error(r.sent, "slow"), { case: "error", value: "no answer within 300 ms" });
      assert.match(String(error(dead.sent, "dead")?.value), /^request failed: .*ECONNREFUSED/);
      assert.match(String(error(none.sent, "none")?.value), /region canary has no Prometheus/);
      assert.match(await r.metrics.registry.metrics(), /^flotilla_agent_analysis_measurements_total\{result="error"\} 2$/m);
      assert.match(await r.metrics.registry.metrics(), /^flotilla_agent_analysis_measurements_total\{result="noData"\} 1$/m);
    } finally {
      await Promise.all([r.stop(), dead.stop(), none.stop(), older.stop()]);
    }
  });

  test("nothing is measured while the pods run another revision than the task's", async () => {
    answer = () => vector("0");
    const before = queries.length;
    const r = runner(() => [task("old", "old")], { revision: 2 });
    try {
      await new Promise((resolve) => setTimeout(resolve, 600));
      assert.equal(r.sent.length, 0);
      assert.equal(queries.length, before, "not even queried");
    } finally {
      await r.stop();
    }
  });

  test("while ctrl answers slowly, a task whose measurement waits to be sent is not measured again (no query beyond the schedule)", async () => {
    answer = () => vector("0");
    // Queries that end while a (slow) call to ctrl is under way: the measurement waits for the
    // next call, and meanwhile later indexes fall due (interval 100 ms, queries of 350 ms, calls
    // of 400 ms). A measurement is taken only once the one before it was answered.
    answerDelayMs = 350;
    const a = task("a", "a", 3n, 100);
    const r = runner(() => [a], { ctrlDelayMs: 400 });
    try {
      await waitFor("four measurements", () => r.sent.length >= 4, 15_000);
      const answered = (m: Measurement) => r.reports.find((report) => report.measurements.includes(m))!.answeredAt;
      for (let i = 1; i < 4; i++) {
        const taken = timestampMs(r.sent[i]!.takenAt!);
        assert.ok(
          taken >= answered(r.sent[i - 1]!),
          `measurement ${r.sent[i]!.index} taken ${answered(r.sent[i - 1]!) - taken} ms before the one before it was answered`,
        );
      }
    } finally {
      answerDelayMs = 0;
      await r.stop();
    }
  });

  test("measurements wait while ctrl is away, at most --analysis-max-pending, the oldest dropped; then they are sent", async () => {
    answer = () => vector("0");
    let down = false;
    const r = runner(() => [task("a", "a", 3n, 100)], { maxPending: 2, ctrlDown: () => down });
    try {
      await waitFor("the task learned, a first measurement sent", () => r.sent.length > 0);
      down = true;
      const sentBefore = r.sent.length;
      for (
        const deadline = Date.now() + 5000;
        !/result="dropped"\} [1-9]/.test(await r.metrics.registry.metrics());
        await new Promise((x) => setTimeout(x, 50))
      ) {
        assert.ok(Date.now() < deadline, "measurements dropped");
      }
      assert.equal(r.runner.pending, 2, "two wait, no more");
      down = false;
      const lastBefore = r.sent.at(-1)!.index;
      await waitFor("sent", () => r.sent.length > sentBefore);
      const first = r.sent.slice(sentBefore, sentBefore + 2).map((m) => m.index);
      assert.ok(first[0]! > lastBefore + 1, `the oldest were dropped: ${lastBefore} then ${first}`);
    } finally {
      await r.stop();
    }
  });
});

describe("results", () => {
  test("a scalar or one sample; NaN stays NaN", () => {
    assert.equal(prometheusResult({ status: "success", data: { resultType: "scalar", result: [0, "0.5"] } }), 0.5);
    assert.ok(Number.isNaN(prometheusResult(vector("NaN"))));
    assert.throws(() => prometheusResult({ status: "error", error: "parse error at char 3" }), /Prometheus: parse error at char 3/);
  });

  test("a JSON path to a number (or a numeric string)", () => {
    assert.equal(numberAt({ data: { items: [{ "error-rate": "0.5" }] } }, "$.data.items[0]['error-rate']"), 0.5);
    assert.equal(numberAt({ v: 2 }, "$.v"), 2);
    assert.throws(() => numberAt({ v: "x" }, "$.v"), /\$\.v: not a number \("x"\)/);
    assert.throws(() => numberAt({}, "$.a.b"), /not a number/);
  });
});
