// B6: the agent coalesces a burst of updates. 1,000 deployments are applied by an agent
// (kubernetes target) against the Kubernetes emulator; then 10,000 updates to them arrive
// within a few seconds. Counted: the server-side applies of Deployments the emulator receives
// from the first update until convergence (target ≤ 1.05 × the 1,000 distinct final states),
// and the time from the last update's commit until every Deployment carries its final
// desired version and image. Then the cost of the region-wide hold that coalescing relies on
// (--burst-hold): a mass rollout (every deployment changed once) is measured, and both are
// measured again in a second agent with the hold off.
//
// ctrl runs in its own process (bench/ctrl-child.ts). The updates are written in that process
// by a bulk writer: the rows store.deployments.update writes (deployments, desired_resources,
// one deployment_changes row per update, regions.head_version), 100 updates per transaction,
// each commit waking ctrl's poller like a Store commit. One store.deployments.update per
// transaction manages only ~100/s here (an fsync per commit, serialized by the region's row
// lock), far from 10,000 in ~2 s. The agent runs in the benchmark process, the emulator in its
// own (bench/emulator-child.ts), so its CPU is not spent on the agent's event loop.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Store } from "@flotilla/store";
import { createConnection } from "mysql2/promise";
import { createLogger, startAgent, type Agent, type AgentConfig } from "@flotilla/agent";
import type { RequestLogEntry } from "@flotilla/k8s-emulator";
import { CtrlProcess, type BurstSpec } from "./lib/ctrl-process.ts";
import { EmulatorProcess } from "./lib/emulator-process.ts";
import { kubernetesTarget } from "./lib/kubernetes-target.ts";
import { createBenchDatabase, migrate } from "./lib/db.ts";
import type { BenchContext, BenchResult, Row } from "./lib/report.ts";
import { fmtInt, fmtMs, fmtRatio, log, now, sleep, waitFor } from "./lib/util.ts";

const REGION = "coalesce";
const NAMESPACES = 10;
const PER_TRANSACTION = 100;
const CONCURRENCY = 8;
const TARGET_RATIO = 1.05;

/** Sum of a prom-client metric's values whose labels match `labels`. */
async function metricSum(
  metric: { get(): Promise<{ values: { value: number; labels: Record<string, unknown> }[] }> },
  labels: Record<string, string> = {},
): Promise<number> {
  const { values } = await metric.get();
  return values.filter((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want)).reduce((sum, v) => sum + v.value, 0);
}

/** Sum and count (seconds) of the agent's apply reconcile durations. */
async function durationOf(agent: Agent): Promise<{ sum: number; count: number }> {
  const { values } = await agent.metrics.reconcileDuration.get();
  const pick = (name: string) => values.filter((v) => v.metricName === name && v.labels.op === "apply").reduce((sum, v) => sum + v.value, 0);
  return { sum: pick("flotilla_agent_reconcile_duration_seconds_sum"), count: pick("flotilla_agent_reconcile_duration_seconds_count") };
}

/** What one burst measured: from the first update until 2 s after convergence. */
interface BurstMeasurement {
  updates: number;
  transactions: number;
  /** First write's start → last commit; first write's start → first commit. */
  writeMs: number;
  firstCommitMs: number;
  /** Last commit → every Deployment at its final version and image. */
  convergeMs: number;
  /** Last commit → the agent's watch cursor at the burst's last version. */
  cursorMs: number | undefined;
  /** Deployment applies at the emulator, and the parts of that count. */
  applies: number;
  lateApplies: number;
  failedApplies: number;
  maxPerObject: number;
  lastApplyMs: number;
  /** First commit → the first Deployment apply (how long the agent held the burst's first keys). */
  firstApplyMs: number;
  per5s: number[];
  otherRequests: string;
  /** The agent's counters over the same window. */
  agentApplies: number;
  agentSkips: number;
  agentErrors: number;
  coalesced: number;
  meanReconcileMs: number;
  agentLog: string[];
}

interface BurstSetup {
  agent: Agent;
  emulator: EmulatorProcess;
  ctrl: CtrlProcess;
  databaseUrl: string;
  targets: BurstSpec["targets"];
  /** Updates per deployment; the images are `${imagePrefix}1` .. `${imagePrefix}${rounds}`. */
  rounds: number;
  imagePrefix: string;
}

const deploymentsApplied = (entries: readonly RequestLogEntry[]) => entries.filter((e) => e.verb === "apply" && e.resource === "deployments");

/** Writes a burst of updates to every target and measures how the agent carries it to the emulator. */
async function measureBurst(setup: BurstSetup, agentLog: readonly string[]): Promise<BurstMeasurement> {
  const { agent: a, emulator: emu, ctrl, targets, rounds, imagePrefix } = setup;
  const objects = targets.length;
  const updates = objects * rounds;
  const durationBefore = await durationOf(a);
  const coalescedBefore = await metricSum(a.metrics.coalesced);
  const appliesBefore = await metricSum(a.metrics.reconciles, { op: "apply", result: "success" });
  const skipsBefore = await metricSum(a.metrics.reconciles, { op: "skip" });
  const errorsBefore = await metricSum(a.metrics.reconciles, { result: "error" });
  const logBefore = agentLog.length;
  await emu.clearRequests();

  const spec: BurstSpec = { targets, region: REGION, rounds, imagePrefix, writers: 1, mode: "bulk", perTransaction: PER_TRANSACTION };
  const burst = await ctrl.burst(spec);
  if (burst.writes !== updates) throw new Error(`B6: ${burst.writes} of ${updates} updates written`);
  const writeMs = burst.lastCommit - burst.started;
  log(`B6: ${fmtInt(updates)} updates written in ${fmtMs(writeMs)} (${fmtInt(updates / (writeMs / 1000))}/s, ${burst.transactions} transactions)`);

  // The final desired state: every object at its final version with image <prefix><rounds>.
  const conn = await createConnection({ uri: setup.databaseUrl });
  let finalVersion: Map<string, number>;
  try {
    const [rows] = await conn.query(
      "SELECT d.resource_id AS id, d.version AS version FROM desired_resources d JOIN regions r ON r.id = d.region_id WHERE r.name = ?",
      [REGION],
    );
    finalVersion = new Map((rows as { id: string; version: number }[]).map((r) => [r.id, Number(r.version)]));
  } finally {
    await conn.end();
  }
  const finalImage = `${imagePrefix}${rounds}`;
  if (finalVersion.size !== objects) throw new Error(`B6: ${finalVersion.size} desired resources, want ${objects}`);
  // Checked in the emulator's process, while this one watches the agent's cursor.
  const converged = emu.converge(
    targets.map((t) => ({ namespace: t.namespace, name: t.id, version: finalVersion.get(t.id), image: finalImage })),
    600_000,
  );
  // When the agent's watch cursor reached the head (every update is in its desired table).
  const head = Math.max(...finalVersion.values());
  let cursorAt: number | undefined;
  let done = false;
  void converged.finally(() => (done = true)).catch(() => undefined);
  while (!done && cursorAt === undefined) {
    if ((await metricSum(a.metrics.versionLastSeen)) >= head) cursorAt = now();
    else await sleep(10);
  }
  const convergedAt = await converged;
  const convergeMs = convergedAt - burst.lastCommit;
  const burstApplies = deploymentsApplied(await emu.requests());
  // Deployment applies per 5 s after the last commit (request log times, ms resolution).
  const per5s: number[] = [];
  for (const e of burstApplies) {
    const second = Math.floor((Date.parse(e.time) - burst.lastCommit) / 5000);
    if (second >= 0) per5s[second] = (per5s[second] ?? 0) + 1;
  }
  const lastApplyAt = Date.parse(burstApplies.at(-1)?.time ?? "");
  // Anything still arriving shortly after convergence belongs to the burst too.
  await sleep(2000);
  const requestLog = await emu.requests();
  const allBurstApplies = deploymentsApplied(requestLog);
  const lateApplies = allBurstApplies.length - burstApplies.length;
  const perObject = new Map<string, number>();
  for (const e of allBurstApplies) perObject.set(`${e.namespace}/${e.name}`, (perObject.get(`${e.namespace}/${e.name}`) ?? 0) + 1);
  const maxPerObject = Math.max(0, ...perObject.values());
  const failedApplies = allBurstApplies.filter((e) => e.status >= 400).length;
  const otherRequests = new Map<string, number>();
  for (const e of requestLog) {
    if (e.verb === "apply" && e.resource === "deployments") continue;
    const k = `${e.verb ?? e.method} ${e.resource ?? e.path}${e.subresource ? `/${e.subresource}` : ""}`;
    otherRequests.set(k, (otherRequests.get(k) ?? 0) + 1);
  }
  const coalesced = (await metricSum(a.metrics.coalesced)) - coalescedBefore;
  const agentApplies = (await metricSum(a.metrics.reconciles, { op: "apply", result: "success" })) - appliesBefore;
  const agentSkips = (await metricSum(a.metrics.reconciles, { op: "skip" })) - skipsBefore;
  const agentErrors = (await metricSum(a.metrics.reconciles, { result: "error" })) - errorsBefore;
  const durationAfter = await durationOf(a);
  const meanReconcileMs = ((durationAfter.sum - durationBefore.sum) / Math.max(1, durationAfter.count - durationBefore.count)) * 1000;

  const top = [...otherRequests.entries()]
    .sort((x, y) => y[1] - x[1])
    .slice(0, 6)
    .map(([k, n]) => `${k} ${fmtInt(n)}`)
    .join(", ");
  return {
    updates,
    transactions: burst.transactions,
    writeMs,
    firstCommitMs: burst.firstCommit - burst.started,
    convergeMs,
    cursorMs: cursorAt === undefined ? undefined : cursorAt - burst.lastCommit,
    applies: allBurstApplies.length,
    lateApplies,
    failedApplies,
    maxPerObject,
    lastApplyMs: lastApplyAt - burst.lastCommit,
    firstApplyMs: Date.parse(burstApplies[0]?.time ?? "") - burst.firstCommit,
    per5s: Array.from(per5s, (n) => n ?? 0),
    otherRequests: top,
    agentApplies,
    agentSkips,
    agentErrors,
    coalesced,
    meanReconcileMs,
    agentLog: agentLog.slice(logBefore),
  };
}

/** A burst's measurement in a sentence. */
function describe(m: BurstMeasurement): string {
  return [
    `from the first update until 2 s after convergence the emulator logged ${fmtInt(m.applies)} Deployment applies (${fmtInt(m.lateApplies)} of them after convergence; ${m.failedApplies} failed; at most ${m.maxPerObject} for one object; last one ${Number.isFinite(m.lastApplyMs) ? fmtMs(m.lastApplyMs) : "n/a"} after the last commit, at ms resolution).`,
    `Agent counters over the same window: ${fmtInt(m.agentApplies)} successful apply reconciles, ${fmtInt(m.agentSkips)} skipped (already applied), ${fmtInt(m.agentErrors)} failed, ${fmtInt(m.coalesced)} adds coalesced; mean apply reconcile (Deployment apply; its Service only if changed) ${fmtMs(m.meanReconcileMs)}. Other requests at the emulator: ${m.otherRequests || "none"}.`,
    `The agent's watch cursor reached the burst's last version ${m.cursorMs === undefined ? "(not seen)" : fmtMs(m.cursorMs)} after the last commit; Deployment applies per 5 s after the last commit: ${m.per5s.join(", ")}.`,
    ...(m.agentLog.length ? [`The agent logged ${m.agentLog.length} lines during the burst, first: ${m.agentLog.slice(0, 3).join(" | ")}`] : []),
  ].join(" ");
}

export async function runB6(ctx: BenchContext): Promise<BenchResult> {
  const objects = ctx.quick ? 100 : 1000;
  const rounds = 10; // updates per object: 10,000 in all (1,000 with --quick)
  const updates = objects * rounds;
  const db = await createBenchDatabase(ctx.serverUrl, "b6");
  let ctrl: CtrlProcess | undefined;
  let emulator: EmulatorProcess | undefined;
  let agent: Agent | undefined;
  let setupStore: Store | undefined;
  let tmp: string | undefined;
  const agentLog: string[] = [];
  try {
    await migrate(db.url);
    setupStore = await Store.open(db.url);
    await setupStore.regions.create(REGION);
    const { token } = await setupStore.agentTokens.create(REGION);
    await setupStore.close();
    setupStore = undefined;

    ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs }, { cpuProfileDir: ctx.cpuProfileDir });
    const targets = Array.from({ length: objects }, (_, i) => ({
      id: `co-${String(i).padStart(5, "0")}`,
      namespace: `team-${i % NAMESPACES}`,
      replicas: 1 + (i % 3),
    }));
    for (const t of targets) await ctrl.write("create", { ...t, image: "app:0", region: REGION });

    // Every request is logged (the default keeps 10,000); rollouts as the emulator ships them.
    emulator = await EmulatorProcess.start({ requestLogLimit: 10_000_000 });
    tmp = await mkdtemp(join(tmpdir(), "flotilla-b6-"));
    await emulator.writeKubeconfig(join(tmp, "kubeconfig"));
    const emu = emulator;
    const started = now();
    const agentOptions: AgentConfig = {
      ctrlUrl: ctrl.url,
      region: REGION,
      token,
      target: await kubernetesTarget(join(tmp, "kubeconfig"), REGION),
      concurrency: CONCURRENCY,
      log: createLogger({ write: (line) => agentLog.push(`${((now() - started) / 1000).toFixed(1)} s ${line}`) }),
    };
    agent = await startAgent(agentOptions);
    await agent.ready;
    const a = agent;
    await emu.converge(
      targets.map((t) => ({ namespace: t.namespace, name: t.id })),
      300_000,
    );
    await waitFor(`${objects} deployments applied`, () => a.table.counts().pending === 0, 300_000, 50);
    const initialApplies = deploymentsApplied(await emu.requests()).length;
    log(`B6: ${objects} deployments applied by the agent (${initialApplies} Deployment applies) in ${((now() - started) / 1000).toFixed(1)} s`);
    // Let rollouts finish and the observer settle, so the burst window holds only burst work.
    await sleep(2000);
    const settledApplies = deploymentsApplied(await emu.requests()).length;

    const measured = await measureBurst({ agent: a, emulator: emu, ctrl, databaseUrl: db.url, targets, rounds, imagePrefix: "app:" }, agentLog);
    const { applies, convergeMs, writeMs } = measured;
    const ratio = applies / objects;
    log(`B6: ${applies} Deployment applies for ${objects} final states (${fmtRatio(ratio)}); converged ${fmtMs(convergeMs)} after the last commit`);
    // A mass rollout: every deployment changed once, what the region-wide hold delays.
    const rollout = await measureBurst({ agent: a, emulator: emu, ctrl, databaseUrl: db.url, targets, rounds: 1, imagePrefix: "rollout:" }, agentLog);
    log(`B6: a rollout of ${objects} single changes converged ${fmtMs(rollout.convergeMs)} after its last commit`);

    // The same two with the region-wide hold off (--burst-hold 0), in a fresh agent.
    await a.stop();
    agent = undefined;
    const unheld = await startAgent({ ...agentOptions, burstHoldMs: 0 });
    agent = unheld;
    await unheld.ready;
    await waitFor(`${objects} deployments in sync`, () => unheld.table.counts().pending === 0, 300_000, 50);
    await sleep(2000);
    const burstUnheld = await measureBurst({ agent: unheld, emulator: emu, ctrl, databaseUrl: db.url, targets, rounds, imagePrefix: "unheld:" }, agentLog);
    const rolloutUnheld = await measureBurst(
      { agent: unheld, emulator: emu, ctrl, databaseUrl: db.url, targets, rounds: 1, imagePrefix: "unheld-rollout:" },
      agentLog,
    );
    log(`B6 --burst-hold 0: ${burstUnheld.applies} applies; rollout converged ${fmtMs(rolloutUnheld.convergeMs)} after its last commit`);

    const rows: Row[] = [
      {
        benchmark: `B6 coalescing: Deployment applies at the emulator for ${fmtInt(updates)} updates to ${fmtInt(objects)} deployments`,
        measured: `${fmtInt(applies)} applies`,
        reference: `${fmtInt(objects)} distinct final states`,
        ratio: fmtRatio(ratio),
        target: `≤ ${TARGET_RATIO}× (${fmtInt(objects * TARGET_RATIO)})`,
        met: ratio <= TARGET_RATIO,
      },
      {
        benchmark: `B6 coalescing: last update's commit → every Deployment at its final version`,
        measured: fmtMs(convergeMs),
        reference: `${fmtInt(updates)} updates written in ${fmtMs(writeMs)}`,
        ratio: fmtRatio(convergeMs / writeMs),
        target: "(no target)",
        met: undefined,
      },
      {
        benchmark: `B6 coalescing with --burst-hold 0 (the region-wide hold off): Deployment applies for the same burst`,
        measured: `${fmtInt(burstUnheld.applies)} applies`,
        reference: `${fmtInt(objects)} distinct final states`,
        ratio: fmtRatio(burstUnheld.applies / objects),
        target: "(no target)",
        met: undefined,
      },
      {
        benchmark: `B6 mass rollout: ${fmtInt(objects)} deployments changed once, last commit → every Deployment at its new version, default hold`,
        measured: fmtMs(rollout.convergeMs),
        reference: `${fmtMs(rolloutUnheld.convergeMs)} with --burst-hold 0`,
        ratio: fmtRatio(rollout.convergeMs / rolloutUnheld.convergeMs),
        target: "(no target)",
        met: undefined,
      },
      {
        benchmark: `B6 mass rollout: first commit → first Deployment apply, default hold`,
        measured: fmtMs(rollout.firstApplyMs),
        reference: `${fmtMs(rolloutUnheld.firstApplyMs)} with --burst-hold 0`,
        ratio: fmtRatio(rollout.firstApplyMs / rolloutUnheld.firstApplyMs),
        target: "(no target)",
        met: undefined,
      },
    ];
    const notes = [
      `B6: ${fmtInt(updates)} updates (${rounds} per deployment, each a new image) written in the ctrl process by a bulk writer in ${measured.transactions} transactions of ${PER_TRANSACTION} (the rows store.deployments.update writes; each commit wakes ctrl's poller): ${fmtMs(writeMs)} from the first write's start to the last commit (${fmtInt(updates / (writeMs / 1000))} updates/s; first commit after ${fmtMs(measured.firstCommitMs)}). Agent: kubernetes target, concurrency ${CONCURRENCY}, default timings; emulator (its own process) rollout delay ${emu.rolloutDelayMs} ms. Before the burst, the initial ${fmtInt(objects)} creates took ${fmtInt(initialApplies)} Deployment applies (${fmtInt(settledApplies - initialApplies)} more while settling for 2 s).`,
      `B6: ${describe(measured)}`,
      `B6 with --burst-hold 0 (a second agent, same emulator and ctrl; burst written in ${fmtMs(burstUnheld.writeMs)}): ${describe(burstUnheld)}`,
      `B6 mass rollout (${fmtInt(objects)} updates in ${rollout.transactions} transactions, written in ${fmtMs(rollout.writeMs)}; with --burst-hold 0 in ${fmtMs(rolloutUnheld.writeMs)}): ${fmtInt(rollout.applies)} Deployment applies (${fmtInt(rolloutUnheld.applies)} with --burst-hold 0), mean apply reconcile ${fmtMs(rollout.meanReconcileMs)} (${fmtMs(rolloutUnheld.meanReconcileMs)}).`,
    ];
    return { rows, notes };
  } finally {
    await agent?.stop().catch((e: unknown) => log(`B6: agent stop: ${String(e)}`));
    await emulator?.stop().catch(() => undefined);
    await ctrl?.stop();
    await setupStore?.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
    await db.drop();
  }
}
