// B8: hostile load. A well-behaved client's unary and SyncDesiredState p99 and ctrl's RSS
// (after forced GC) before, during and after: malformed and unauthenticated requests, forged
// tokens, rapid stream resets and SyncDesiredState streams of a 9 MB region that never read,
// all at once from another process (bench/b8-attacker.ts). Loopback only; every attack is a
// bounded count.
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import type { AttackPlan, AttackReport } from "./b8-attacker.ts";
import { adminAuth } from "./lib/clients.ts";
import { ADMIN_TOKEN, CtrlProcess } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate, seedRegion } from "./lib/db.ts";
import type { BenchContext, BenchResult } from "./lib/report.ts";
import { fmtBytes, fmtInt, fmtMs, fmtRatio, log, percentile, sleep } from "./lib/util.ts";

const REGION = "hostile";
/** The region the stalled streams sync: 150 resources of about 60 KB (9 MB). */
const STALLED_REGION = "large";
/** The good client calls this often (sequentially; a slow call delays the next). */
const CALL_EVERY_MS = 10;
/** The good client's other connection syncs REGION this often. */
const SYNC_EVERY_MS = 250;
const RSS_TARGET_BYTES = 30 * 1024 * 1024;

export async function runB8(ctx: BenchContext): Promise<BenchResult> {
  const scale = ctx.quick ? { malformed: 2000, forgedTokens: 10_000 } : { malformed: 10_000, forgedTokens: 100_000 };
  const phaseMs = ctx.quick ? 5000 : 10_000;
  const db = await createBenchDatabase(ctx.serverUrl, "b8");
  let ctrl: CtrlProcess | undefined;
  try {
    await migrate(db.url);
    await seedRegion(db.url, REGION, 2000);
    await seedRegion(db.url, STALLED_REGION, 150, { padBytes: 60_000, firstIndex: 2000 });
    // The default stream send timeout (60 s): the stalled streams hold for all of it.
    ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs }, { cpuProfileDir: ctx.cpuProfileDir });
    const c = ctrl;

    // The well-behaved client: GetRegion over gRPC on its own connection, all along.
    const regions = createClient(RegionService, createGrpcTransport({ baseUrl: c.url, interceptors: [adminAuth] }));
    const cluster = createClient(ClusterService, createGrpcTransport({ baseUrl: c.url, interceptors: [adminAuth] }));
    type Phase = "before" | "during" | "after";
    const samples: Record<Phase, number[]> = { before: [], during: [], after: [] };
    const syncSamples: Record<Phase, number[]> = { before: [], during: [], after: [] };
    let phase: Phase | undefined;
    let failures = 0;
    let running = true;
    /** Runs `call` every `everyMs` (sequentially) until the end, recording its time per phase. */
    const repeat = async (everyMs: number, into: Record<Phase, number[]>, call: () => Promise<unknown>) => {
      while (running) {
        const t0 = performance.now();
        const during = phase;
        try {
          await call();
          if (during && during === phase) into[during].push(performance.now() - t0);
        } catch {
          failures++;
        }
        await sleep(Math.max(0, everyMs - (performance.now() - t0)));
      }
    };
    const syncRegion = async () => {
      let resources = 0;
      for await (const res of cluster.syncDesiredState({ region: REGION }, { timeoutMs: 30_000 })) {
        if (res.message.case === "batch") resources += res.message.value.resources.length;
      }
      if (resources !== 2000) throw new Error(`synced ${resources} resources`);
    };
    const goodClient = Promise.all([
      repeat(CALL_EVERY_MS, samples, () => regions.getRegion({ name: REGION }, { timeoutMs: 30_000 })),
      repeat(SYNC_EVERY_MS, syncSamples, syncRegion),
    ]);

    await sleep(2000); // warm-up, not measured
    phase = "before";
    await sleep(phaseMs);
    phase = undefined;
    const memBefore = await c.memory();
    const reducedBefore = await c.memory({ reduce: true });

    log(`B8: attacking (${fmtInt(scale.malformed)} malformed, ${fmtInt(scale.forgedTokens)} forged tokens, 1,000 resets, 50 stalled streams)`);
    phase = "during";
    const plan: AttackPlan = {
      url: c.url,
      adminToken: ADMIN_TOKEN,
      region: REGION,
      stalledRegion: STALLED_REGION,
      ...scale,
      rapidResets: 1000,
      stalledStreams: 50,
    };
    const cpuBefore = await c.cpu();
    // The peak of the attack alone: VmHWM reset to the RSS now (not start-up's peak).
    c.resetPeakRss();
    const attackStarted = performance.now();
    const reports = await attack(plan);
    const attackSeconds = (performance.now() - attackStarted) / 1000;
    const peakDuring = c.peakRss();
    const cpuDuring = await c.cpu();
    phase = undefined;

    await sleep(1000);
    phase = "after";
    await sleep(phaseMs);
    phase = undefined;
    running = false;
    await goodClient;
    // ctrl returns a burst's memory itself once it is allowed to (--memory-release-interval,
    // 30 s): what an operator sees after an attack is what is left then.
    const releasesDuring = (await c.metrics()).memoryReleases;
    const waitStarted = performance.now();
    while ((await c.metrics()).memoryReleases === releasesDuring && performance.now() - waitStarted < 40_000) await sleep(500);
    const releaseWaitSeconds = (performance.now() - waitStarted) / 1000;
    // Plain GCs first: the memory-reducing ones return the pooled pages a plain one keeps.
    const memAfter = await c.memory();
    const reducedAfter = await c.memory({ reduce: true });
    const bounds = (await c.metrics()).boundsEnforced;

    const p99 = (from: Record<Phase, number[]>, phase: Phase) => percentile(from[phase], 99);
    const p99Row = (what: string, from: Record<Phase, number[]>) => {
      const ratio = p99(from, "during") / p99(from, "before");
      return {
        benchmark: `B8 hostile load: good client's ${what} p99 during the attack`,
        measured: fmtMs(p99(from, "during")),
        reference: `alone: ${fmtMs(p99(from, "before"))}; after: ${fmtMs(p99(from, "after"))}`,
        ratio: fmtRatio(ratio),
        target: "≤ 3× alone",
        met: ratio <= 3,
      };
    };
    return {
      rows: [
        p99Row("unary", samples),
        p99Row("SyncDesiredState (2,000 resources, another region)", syncSamples),
        {
          benchmark: "B8 hostile load: ctrl RSS after the attack (memory-reducing forced GC)",
          measured: fmtBytes(reducedAfter.rss),
          reference: `before: ${fmtBytes(reducedBefore.rss)} (+${fmtBytes(reducedAfter.rss - reducedBefore.rss)}); peak during the attack: ${fmtBytes(peakDuring)} (+${fmtBytes(peakDuring - reducedBefore.rss)})`,
          ratio: fmtRatio(reducedAfter.rss / reducedBefore.rss),
          target: "≤ before + 30 MB",
          met: reducedAfter.rss - reducedBefore.rss <= RSS_TARGET_BYTES,
        },
        {
          benchmark: "B8 diagnostic: ctrl RSS after the attack (plain forced GC, V8's freed pages still pooled)",
          measured: fmtBytes(memAfter.rss),
          reference: `before: ${fmtBytes(memBefore.rss)} (+${fmtBytes(memAfter.rss - memBefore.rss)})`,
          ratio: fmtRatio(memAfter.rss / memBefore.rss),
          target: "(diagnostic)",
          met: undefined,
        },
      ],
      notes: [
        `B8: good client = sequential GetRegion over gRPC every ${CALL_EVERY_MS} ms, and beside it a SyncDesiredState of ${REGION} (2,000 resources) every ${SYNC_EVERY_MS} ms on its own connection; ` +
          `samples before/during/after: unary ${samples.before.length}/${samples.during.length}/${samples.after.length}, sync ${syncSamples.before.length}/${syncSamples.during.length}/${syncSamples.after.length}; failed calls ${failures}; ` +
          `p50 unary ${fmtMs(percentile(samples.before, 50))} / ${fmtMs(percentile(samples.during, 50))} / ${fmtMs(percentile(samples.after, 50))}, ` +
          `sync ${fmtMs(percentile(syncSamples.before, 50))} / ${fmtMs(percentile(syncSamples.during, 50))} / ${fmtMs(percentile(syncSamples.after, 50))}.`,
        // CPU is less noisy than latency on a shared machine: what each hostile request cost ctrl.
        `B8: ctrl CPU during the attack: ${cpuSeconds(cpuBefore, cpuDuring).toFixed(1)} s in ${attackSeconds.toFixed(1)} s ` +
          `(including the good client's ${fmtInt(samples.during.length)} calls), ` +
          `${fmtInt((cpuSeconds(cpuBefore, cpuDuring) * 1e6) / (scale.malformed + scale.forgedTokens))} µs per malformed or forged-token request.`,
        `B8: ctrl ran ${fmtInt(releasesDuring)} memory releases of its own until the end of the after phase; its next came ${releaseWaitSeconds.toFixed(1)} s later, and "after" is measured then. ` +
          `ctrl memory after forced GC, before → after: heap used ${fmtBytes(memBefore.heapUsed)} → ${fmtBytes(memAfter.heapUsed)}, ` +
          `heap total ${fmtBytes(memBefore.heapTotal)} → ${fmtBytes(memAfter.heapTotal)}, external ${fmtBytes(memBefore.external)} → ${fmtBytes(memAfter.external)}; ` +
          `after memory-reducing GC: heap used ${fmtBytes(reducedBefore.heapUsed)} → ${fmtBytes(reducedAfter.heapUsed)}, heap total ${fmtBytes(reducedBefore.heapTotal)} → ${fmtBytes(reducedAfter.heapTotal)}.`,
        ...reports.map(
          (r) =>
            `B8 attack "${r.attack}": ${fmtInt(r.sent)} in ${r.seconds.toFixed(1)} s; outcomes ` +
            Object.entries(r.outcomes)
              .map(([k, v]) => `${k}: ${fmtInt(v)}`)
              .join(", "),
        ),
        `B8: bounds enforced by ctrl: ${
          Object.entries(bounds)
            .map(([k, v]) => `${k} ${fmtInt(v)}`)
            .join(", ") || "none"
        }; ` +
          `stream send timeout 60 s (the default); the stalled streams sync ${STALLED_REGION} (150 resources of about 60 KB); attackers in a separate process on the same machine.`,
      ],
    };
  } finally {
    await ctrl?.stop();
    await db.drop();
  }
}

function cpuSeconds(from: NodeJS.CpuUsage, to: NodeJS.CpuUsage): number {
  return (to.user - from.user + to.system - from.system) / 1e6;
}

/** Runs the attacker process to completion; its reports. */
function attack(plan: AttackPlan): Promise<AttackReport[]> {
  const child = fork(fileURLToPath(new URL("./b8-attacker.ts", import.meta.url)), [], {
    env: { ...process.env, FLOTILLA_B8_ATTACK: JSON.stringify(plan) },
    execArgv: ["--disable-warning=ExperimentalWarning"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return new Promise<AttackReport[]>((resolve, reject) => {
    let reports: AttackReport[] | undefined;
    child.once("message", (m: AttackReport[]) => (reports = m));
    child.once("exit", (code) => (reports ? resolve(reports) : reject(new Error(`B8 attacker exited (${code}) without a report`))));
  });
}
