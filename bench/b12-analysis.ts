// B12A: staged rollouts judged by analysis, on two ctrl replicas. B12's simulated agents (watch,
// RUNNING reports) each run the agent's own AnalysisRunner, its schedule and report loop as the
// agent runs them, against a Prometheus stand-in served by this process (/api/v1/query answers
// one sample, an error rate of 1%, and counts every query by its text). One analysis per wave
// (the strategy's), 2 measurements 10 s apart, bake 0: a wave is done when its regions' second
// measurements are stored, so the hand-off after them is the gate's and the driver's own delay.
// Regions alternate between the replicas (agents and writes), so the rollout driver (one
// replica, by lease) judges waves whose measurements the other replica stored.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { AgentMetrics, AnalysisRunner, silentLogger } from "@flotilla/agent";
import { RolloutState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { Store } from "@flotilla/store";
import { clients, REGIONS, SimulatedAgent, TARGET_HANDOFF_P99_MS, THREE_WAVES, WAVE_OF, settleRollouts, writeAll } from "./b12-rollouts.ts";
import { CtrlProcess } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate } from "./lib/db.ts";
import type { BenchContext, BenchResult } from "./lib/report.ts";
import { fmtInt, fmtMs, log, median, now, percentile } from "./lib/util.ts";

const MEASUREMENTS = 2;
const INTERVAL_S = 10;
/** One query text per (region, deployment, revision): the schedule asks for each MEASUREMENTS times. */
const QUERY =
  'sum(rate(http_requests_total{region="{{region}}",deployment="{{deployment}}",revision="{{revision}}",code="500"}[30s])) / sum(rate(http_requests_total{region="{{region}}",deployment="{{deployment}}",revision="{{revision}}"}[30s]))';
const STRATEGY = {
  ...THREE_WAVES,
  analysis: [
    {
      name: "error-rate",
      provider: { case: "prometheus", value: { query: QUERY } },
      interval: { seconds: BigInt(INTERVAL_S), nanos: 0 },
      count: MEASUREMENTS,
      successCondition: "result < 0.05",
    },
  ],
};
/** The agent's defaults (AGENT_DEFAULTS): its call to ctrl at least every 5 s, a query's and a call's deadline. */
const POLL_INTERVAL_MS = 5000;
const QUERY_TIMEOUT_MS = 10_000;
const MAX_PENDING = 1000;

/** An instant-query endpoint answering every query with one sample, counting them by text. */
async function prometheusStandIn(): Promise<{ address: string; queries: Map<string, number>; close: () => Promise<void> }> {
  const queries = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://stand-in");
    const query = url.searchParams.get("query");
    if (url.pathname !== "/api/v1/query" || query === null) {
      res.writeHead(404).end();
      return;
    }
    queries.set(query, (queries.get(query) ?? 0) + 1);
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ status: "success", data: { resultType: "vector", result: [{ metric: {}, value: [Date.now() / 1000, "0.01"] }] } }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    address: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    queries,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A region's analysis as its agent runs it; remembers when ctrl took each deployment's measurements. */
class RegionAnalysis {
  /** `${deployment}@${revision}` → when ctrl answered the report carrying its last measurement (stored). */
  readonly answered = new Map<string, number>();
  /** `${deployment}@${revision}` → when that report was sent. */
  readonly sent = new Map<string, number>();
  measurements = 0;
  /** Reports that failed (the runner sends them again, and takes newer measurements meanwhile). */
  failures: string[] = [];
  readonly #abort = new AbortController();
  readonly #done: Promise<void>;

  constructor(region: string, baseUrl: string, agent: SimulatedAgent) {
    const { cluster } = clients(baseUrl);
    const taskOf = new Map<string, string>();
    // The runner's client, with its reports timed: the response is the measurements' commit.
    const timed: typeof cluster = {
      ...cluster,
      reportMeasurements: async (req, options) => {
        const sentAt = now();
        const response = await cluster.reportMeasurements(req, options).catch((error: unknown) => {
          this.failures.push(`${((now() - sentAt) / 1000).toFixed(1)} s: ${error instanceof Error ? error.message : String(error)}`);
          throw error;
        });
        const answeredAt = now();
        const measurements = req.measurements ?? [];
        for (const m of measurements) {
          const deployment = taskOf.get(m.task ?? "");
          if (deployment === undefined) continue;
          const key = `${deployment}@${m.revision}`;
          if (m.index === MEASUREMENTS - 1 || !this.answered.has(key)) {
            this.answered.set(key, answeredAt);
            this.sent.set(key, sentAt);
          }
        }
        this.measurements += measurements.length;
        for (const task of response.tasks) taskOf.set(task.id, task.deployment);
        return response;
      },
    };
    const runner = new AnalysisRunner({
      client: timed,
      region,
      appliedRevision: (id) => agent.revisions.get(id),
      pollIntervalMs: POLL_INTERVAL_MS,
      queryTimeoutMs: QUERY_TIMEOUT_MS,
      callTimeoutMs: 10_000,
      maxPending: MAX_PENDING,
      metrics: new AgentMetrics(),
      log: silentLogger,
    });
    this.#done = runner.run(this.#abort.signal).catch(() => undefined);
  }

  async close(): Promise<void> {
    this.#abort.abort();
    await this.#done;
  }
}

export async function runB12A(ctx: BenchContext): Promise<BenchResult> {
  const count = ctx.quick ? 100 : 1000;
  const db = await createBenchDatabase(ctx.serverUrl, "b12c");
  const prometheus = await prometheusStandIn();
  const ctrls: CtrlProcess[] = [];
  const agents: SimulatedAgent[] = [];
  const analyses: RegionAnalysis[] = [];
  let store: Store | undefined;
  try {
    await migrate(db.url);
    store = await Store.open(db.url);
    for (let i = 0; i < 2; i++)
      ctrls.push(await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs }, { cpuProfileDir: ctx.cpuProfileDir }));
    const replica = (i: number) => ctrls[i % ctrls.length]!.url;
    const regionNames = Array.from({ length: REGIONS }, (_, i) => `r${i}`);
    const { regions } = clients(replica(0));
    for (const [i, name] of regionNames.entries())
      await regions.createRegion({ region: { name, labels: { wave: WAVE_OF(i) }, metrics: { prometheus: { address: prometheus.address } } } });
    for (const [i, name] of regionNames.entries()) {
      const agent = new SimulatedAgent(name, replica(i), 0n);
      agents.push(agent);
      analyses.push(new RegionAnalysis(name, replica(i), agent));
    }
    const ids = Array.from({ length: count }, (_, i) => `judged-${String(i).padStart(5, "0")}`);
    const s = store;
    const settle = (image: string) => settleRollouts(s, agents, ids, image, 900_000);
    // Half of the writes through each replica.
    const write = (op: "create" | "update", image: string) =>
      Promise.all(
        ctrls.map((c, r) =>
          writeAll(
            c.url,
            op,
            ids.filter((_, i) => i % ctrls.length === r),
            regionNames,
            image,
            STRATEGY,
          ),
        ),
      );
    await write("create", "app:v1");
    await settle("app:v1");
    log(`B12A: ${fmtInt(count)} deployments created and rolled out with analysis over ${REGIONS} regions`);
    const t0 = now();
    await write("update", "app:v2");
    await settle("app:v2");
    const seconds = (now() - t0) / 1000;

    const rollouts = await s.database.db.selectFrom("rollouts").select(["id", "state"]).execute();
    const unsucceeded = rollouts.filter((r) => r.state !== RolloutState.SUCCEEDED).length;
    if (unsucceeded > 0) throw new Error(`B12A: ${unsucceeded} rollouts did not succeed`);
    // Judged once: no rollout holds two transitions into the same wave and state.
    const transitions = await s.database.db.selectFrom("rollout_transitions").select(["rollout_id", "wave", "to_state", "action"]).execute();
    const seen = new Set<string>();
    let twice = 0;
    for (const t of transitions) {
      const key = `${t.rollout_id}/${t.wave}/${t.to_state}/${t.action}`;
      if (seen.has(key)) twice++;
      seen.add(key);
    }
    const perRollout = transitions.length / rollouts.length;

    // Where a hand-off's time goes: the transition into the next wave (its time is taken as the driver's write starts).
    const updates = await s.database.db.selectFrom("rollouts").select(["id", "deployment_id"]).where("from_revision", ">", 0).execute();
    const rolloutOf = new Map(updates.map((r) => [r.deployment_id, r.id]));
    const started = new Map<string, number>();
    for (const t of await s.database.db.selectFrom("rollout_transitions").select(["rollout_id", "wave", "time"]).execute()) {
      const key = `${t.rollout_id}/${t.wave}`;
      started.set(key, Math.min(started.get(key) ?? Number.POSITIVE_INFINITY, Number(t.time)));
    }
    const toTransition: number[] = [];
    const toReceipt: number[] = [];
    /** Hand-offs by wave end (canary → early, early → rest). */
    const byEnd: number[][] = [[], []];
    const byWave = ["canary", "early", "rest"].map((wave) => regionNames.flatMap((_, i) => (WAVE_OF(i) === wave ? [i] : [])));
    const fromAnswer: number[] = [];
    const fromSend: number[] = [];
    for (const id of ids) {
      const revision = agents[0]!.revisions.get(id);
      const key = `${id}@${revision}`;
      for (let w = 0; w + 1 < byWave.length; w++) {
        // The report that stored the wave's last measurement, and the next wave's first receipt of the revision.
        const last = byWave[w]!.reduce((a, b) => (analyses[b]!.answered.get(key)! > analyses[a]!.answered.get(key)! ? b : a));
        const next = Math.min(...byWave[w + 1]!.map((i) => agents[i]!.received.get(`${id}@app:v2`)!));
        const answered = analyses[last]!.answered.get(key)!;
        fromAnswer.push(next - answered);
        fromSend.push(next - analyses[last]!.sent.get(key)!);
        byEnd[w]!.push(next - answered);
        const transition = started.get(`${rolloutOf.get(id)}/${w + 1}`);
        if (transition !== undefined) {
          toTransition.push(transition - answered);
          toReceipt.push(next - transition);
        }
      }
    }
    if (fromAnswer.some((x) => !Number.isFinite(x))) throw new Error("B12A: a hand-off without its last measurement's report or its next wave's receipt");

    // Queries: the schedule asks for MEASUREMENTS of each (region, deployment, revision), two rollouts of each deployment.
    const scheduled = 2 * count * REGIONS * MEASUREMENTS;
    const received = [...prometheus.queries.values()].reduce((a, b) => a + b, 0);
    const duplicated = [...prometheus.queries.values()].filter((n) => n > MEASUREMENTS).length;
    const short = [...prometheus.queries.values()].filter((n) => n < MEASUREMENTS).length + Math.max(0, 2 * count * REGIONS - prometheus.queries.size);
    const measurements = analyses.reduce((n, a) => n + a.measurements, 0);
    const failures = analyses.flatMap((a) => a.failures);
    // The texts asked more often than scheduled, by region and revision (where to look for why).
    const extra = new Map<string, number>();
    for (const [text, n] of prometheus.queries) {
      if (n <= MEASUREMENTS) continue;
      const where = `${/region="([^"]+)"/.exec(text)?.[1]}@${/revision="([^"]+)"/.exec(text)?.[1]} ${n}×`;
      extra.set(where, (extra.get(where) ?? 0) + 1);
    }
    const p99 = percentile(fromAnswer, 99);
    log(`B12A: hand-off after the last measurement p50 ${fmtMs(median(fromAnswer))}, p99 ${fmtMs(p99)}; queries ${received} of ${scheduled} scheduled`);
    const setup = `${fmtInt(count)} deployments, ${REGIONS} regions, 3 waves, bake 0, 1 analysis × ${MEASUREMENTS} measurements ${INTERVAL_S} s apart, 2 ctrl replicas`;
    return {
      rows: [
        {
          benchmark: `B12A wave hand-off p99 with analysis: last passing measurement stored (its report answered) → next wave's first region receives the revision (${setup})`,
          measured: fmtMs(p99),
          reference: `min ${fmtMs(Math.min(...fromAnswer))}, p50 ${fmtMs(median(fromAnswer))}, max ${fmtMs(Math.max(...fromAnswer))} (${fmtInt(fromAnswer.length)} hand-offs); from the report's send: p50 ${fmtMs(median(fromSend))}, p99 ${fmtMs(percentile(fromSend, 99))}`,
          ratio: "—",
          target: `≤ ${TARGET_HANDOFF_P99_MS} ms`,
          met: p99 <= TARGET_HANDOFF_P99_MS,
        },
        {
          benchmark: `B12A analysis queries the Prometheus stand-in received vs. the schedule (${setup}, 2 rollouts)`,
          measured: fmtInt(received),
          reference: `scheduled ${fmtInt(scheduled)}; query texts asked more than ${MEASUREMENTS}×: ${duplicated}, fewer: ${short}; waves judged twice: ${twice}`,
          ratio: (received / scheduled).toFixed(2),
          target: "= scheduled, none duplicated, no wave judged twice",
          met: received === scheduled && duplicated === 0 && short === 0 && twice === 0,
        },
      ],
      notes: [
        `B12A: ${fmtInt(count)} deployments updated through 2 replicas (half each) in ${seconds.toFixed(1)} s, every rollout SUCCEEDED with ${perRollout.toFixed(2)} transitions each; ` +
          `the agents' AnalysisRunner (poll ${POLL_INTERVAL_MS / 1000} s, ≤ 500 measurements a report) sent ${fmtInt(measurements)} measurements over both rollouts; regions alternate between the replicas. ` +
          `Reports that failed: ${failures.length}${failures.length ? ` (first: ${failures[0]})` : ""}. ` +
          `Query texts asked more than scheduled (region@revision n×: texts): ${[...extra].map(([k, n]) => `${k}: ${n}`).join(", ") || "none"}. ` +
          `Hand-off parts: answer → next wave's transition written p50 ${fmtMs(median(toTransition))}, p99 ${fmtMs(percentile(toTransition, 99))}; transition → receipt p50 ${fmtMs(median(toReceipt))}, p99 ${fmtMs(percentile(toReceipt, 99))}; ` +
          `p99 by wave end: canary → early ${fmtMs(percentile(byEnd[0]!, 99))}, early → rest ${fmtMs(percentile(byEnd[1]!, 99))}. ` +
          `Hand-off: from ctrl's answer to the report carrying the wave's last measurement (the measurement committed) to the receipt of the revision on the next wave's first watch stream.`,
      ],
    };
  } finally {
    for (const a of analyses) await a.close();
    for (const a of agents) await a.close();
    for (const c of ctrls) await c.stop();
    await prometheus.close();
    await store?.close();
    await db.drop();
  }
}
