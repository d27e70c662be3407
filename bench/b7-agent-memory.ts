// B7: the agent's memory with 100,000 desired resources. ctrl runs in its own process
// (bench/ctrl-child.ts) on a database seeded like B1 (100,000 deployments in one region,
// straight into the tables); the agent runs in another (bench/agent-child.ts, --expose-gc)
// with the render target into a temporary directory, so the desired table, the work queue,
// the reconciler and the status reporter all see every resource, without a cluster. Measured
// after the first full sync was dispatched and the queue drained, after forced GCs; reference:
// the same agent process on a region with no resources.
import { fork } from "node:child_process";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Store } from "@flotilla/store";
import { AGENT_NODE_FLAGS } from "@flotilla/agent/node-flags";
import type { AgentChildConfig, AgentChildReport } from "./agent-child.ts";
import { CtrlProcess } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate, seedRegion } from "./lib/db.ts";
import type { BenchContext, BenchResult, Row } from "./lib/report.ts";
import { fmtBytes, fmtInt, fmtRatio, log } from "./lib/util.ts";

const REGION = "fleet";
const EMPTY_REGION = "empty";
const CONCURRENCY = 8;
const TARGET_RSS = 150 * 1024 * 1024;

/** Runs one agent process to the drained state and returns its report. */
async function runAgent(config: AgentChildConfig, timeoutMs: number): Promise<AgentChildReport> {
  const child = fork(fileURLToPath(new URL("./agent-child.ts", import.meta.url)), [], {
    execArgv: ["--expose-gc", "--disable-warning=ExperimentalWarning", ...AGENT_NODE_FLAGS],
    env: { ...process.env, FLOTILLA_BENCH_AGENT: JSON.stringify(config) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    return await new Promise<AgentChildReport>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`agent child did not drain within ${timeoutMs} ms`)), timeoutMs);
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`agent child exited (${code}) before reporting`));
      });
      child.once("message", (message: { report: AgentChildReport }) => {
        clearTimeout(timer);
        resolve(message.report);
      });
    });
  } finally {
    if (child.exitCode === null) {
      child.send({ op: "shutdown" });
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
  }
}

async function countFiles(dir: string): Promise<number> {
  try {
    return (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).length;
  } catch {
    return 0;
  }
}

export async function runB7(ctx: BenchContext): Promise<BenchResult> {
  const count = ctx.quick ? 10_000 : 100_000;
  const db = await createBenchDatabase(ctx.serverUrl, "b7");
  let ctrl: CtrlProcess | undefined;
  const dirs: string[] = [];
  try {
    await migrate(db.url);
    const t0 = Date.now();
    const seeded = await seedRegion(db.url, REGION, count);
    log(`B7: seeded ${fmtInt(count)} resources in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const store = await Store.open(db.url);
    let token: string;
    let emptyToken: string;
    try {
      await store.regions.create(EMPTY_REGION);
      token = (await store.agentTokens.create(REGION)).token;
      emptyToken = (await store.agentTokens.create(EMPTY_REGION)).token;
    } finally {
      await store.close();
    }
    ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs });

    const run = async (region: string, agentToken: string, timeoutMs: number) => {
      const dir = await mkdtemp(join(tmpdir(), `flotilla-b7-${region}-`));
      dirs.push(dir);
      const report = await runAgent({ ctrlUrl: ctrl!.url, region, token: agentToken, renderDir: dir, concurrency: CONCURRENCY, settleMs: 2000 }, timeoutMs);
      const files = await countFiles(dir);
      await rm(dir, { recursive: true, force: true });
      log(
        `B7: ${region}: ${fmtInt(report.entries)} entries, ready ${(report.readyMs / 1000).toFixed(1)} s, drained ${(report.drainedMs / 1000).toFixed(1)} s, ` +
          `RSS ${fmtBytes(report.drained.rss)} (peak ${fmtBytes(report.maxRss)}), heap ${fmtBytes(report.drained.heapUsed)}, ${fmtInt(files)} files`,
      );
      return { report, files };
    };
    const empty = await run(EMPTY_REGION, emptyToken, 60_000);
    const full = await run(REGION, token, 30 * 60_000);
    if (full.report.entries !== count) throw new Error(`B7: the agent's table holds ${full.report.entries} entries, want ${count}`);

    const e = empty.report.drained;
    const f = full.report.drained;
    const perResource = (key: "rss" | "heapUsed") => (f[key] - e[key]) / count;
    const rows: Row[] = [
      {
        benchmark: `B7 agent RSS, ${fmtInt(count)} desired resources (render target), queue drained`,
        measured: fmtBytes(f.rss),
        reference: `0 resources: ${fmtBytes(e.rss)}`,
        ratio: fmtRatio(f.rss / e.rss),
        target: `≤ ${fmtBytes(TARGET_RSS)}`,
        met: f.rss <= TARGET_RSS,
      },
      {
        benchmark: `B7 agent heap used, ${fmtInt(count)} desired resources (render target), queue drained`,
        measured: fmtBytes(f.heapUsed),
        reference: `0 resources: ${fmtBytes(e.heapUsed)}`,
        ratio: fmtRatio(f.heapUsed / e.heapUsed),
        target: "(no target)",
        met: undefined,
      },
      {
        benchmark: `B7 agent peak RSS during the first full sync and drain, ${fmtInt(count)} resources`,
        measured: fmtBytes(full.report.maxRss),
        reference: `0 resources: ${fmtBytes(empty.report.maxRss)}`,
        ratio: fmtRatio(full.report.maxRss / empty.report.maxRss),
        target: "(diagnostic)",
        met: undefined,
      },
    ];
    const describe = (m: typeof f) => `RSS ${fmtBytes(m.rss)}, heap used ${fmtBytes(m.heapUsed)} of ${fmtBytes(m.heapTotal)}, external ${fmtBytes(m.external)} (array buffers ${fmtBytes(m.arrayBuffers)})`;
    const notes = [
      `B7: agent in its own process (--expose-gc), render target into a temporary directory, concurrency ${CONCURRENCY}, default timings; ${fmtInt(count)} deployments seeded straight into the tables as in B1 (mean body ${fmtInt(seeded.bodyBytes / count)} B). Measured 2 s after every desired entry was reconciled, after 4 forced GCs.`,
      `B7: ${fmtInt(count)} resources: first full sync dispatched ${(full.report.readyMs / 1000).toFixed(1)} s after the process started, queue drained at ${(full.report.drainedMs / 1000).toFixed(1)} s (${fmtInt(full.files)} files rendered; ${full.report.errors} entries in error; ${full.report.logLines} log lines${full.report.firstLog.length ? `, first: ${full.report.firstLog.join(" | ")}` : ""}). At ready (table full, queue full): ${describe(full.report.atReady)}. Drained: ${describe(f)}.`,
      `B7: 0 resources: ready at ${(empty.report.readyMs / 1000).toFixed(1)} s; drained: ${describe(e)}. Per resource (drained − empty) / ${fmtInt(count)}: RSS ${fmtBytes(perResource("rss"))}, heap ${fmtBytes(perResource("heapUsed"))}.`,
    ];
    return { rows, notes };
  } finally {
    await ctrl?.stop();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
    await db.drop();
  }
}
