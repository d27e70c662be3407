// B1: full sync throughput. N desired resources in one region; one gRPC client runs
// SyncDesiredState to completion. Reference: the same keyset scan straight through mysql2.
import { createConnection } from "mysql2/promise";
import { DEFAULT_STREAM_OPTIONS } from "@flotilla/ctrl/services/cluster/options.ts";
import { clusterClient, type ClusterClient } from "./lib/clients.ts";
import { CtrlProcess } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate, rawKeysetScan, seedRegion } from "./lib/db.ts";
import type { BenchContext, BenchResult } from "./lib/report.ts";
import { fmtInt, fmtRatio, log, median, now } from "./lib/util.ts";

const REGION = "sync";

interface Variant {
  name: string;
  ctrl: CtrlProcess;
  client: ClusterClient;
  ms: number[];
  cpuMs: number[];
  clientCpuMs: number[];
}

async function fullSync(client: ClusterClient, expected: number, head: number): Promise<{ ms: number; messages: number }> {
  const started = now();
  let resources = 0;
  let messages = 0;
  let complete: { version: bigint; resourceCount: bigint } | undefined;
  for await (const res of client.syncDesiredState({ region: REGION })) {
    messages++;
    if (res.message.case === "batch") resources += res.message.value.resources.length;
    else if (res.message.case === "complete") complete = res.message.value;
  }
  const ms = now() - started;
  if (!complete) throw new Error("B1: SyncDesiredState ended without a complete marker");
  if (resources !== expected || Number(complete.resourceCount) !== expected || Number(complete.version) !== head) {
    throw new Error(`B1: got ${resources} resources, complete=${complete.resourceCount}@${complete.version}; want ${expected}@${head}`);
  }
  return { ms, messages };
}

export async function runB1(ctx: BenchContext): Promise<BenchResult> {
  const count = ctx.quick ? 10_000 : 100_000;
  const reps = ctx.quick ? 2 : 3;
  const pageSize = DEFAULT_STREAM_OPTIONS.snapshotBatchSize;
  const db = await createBenchDatabase(ctx.serverUrl, "b1");
  let ctrl: CtrlProcess | undefined;
  const raw = await createConnection({ uri: db.url });
  try {
    await migrate(db.url);
    const seedStart = now();
    const seeded = await seedRegion(db.url, REGION, count);
    const seedMs = now() - seedStart;
    log(`B1: seeded ${fmtInt(count)} resources in ${(seedMs / 1000).toFixed(1)} s (${fmtInt(count / (seedMs / 1000))}/s)`);
    await raw.query("ANALYZE TABLE desired_resources");

    ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs }, { cpuProfileDir: ctx.cpuProfileDir });
    const variants: Variant[] = [
      // A default connect-node client accepts gzip/br, so ctrl gzips each batch.
      { name: "default", ctrl, client: clusterClient(ctrl.url), ms: [], cpuMs: [], clientCpuMs: [] },
      { name: "no compression", ctrl, client: clusterClient(ctrl.url, { acceptCompression: [] }), ms: [], cpuMs: [], clientCpuMs: [] },
    ];

    // Warm-up (buffer pool, JIT, HTTP/2 connections); not measured.
    await rawKeysetScan(raw, seeded.regionId, pageSize);
    for (const v of variants) await fullSync(v.client, count, seeded.head);

    const rawMs: number[] = [];
    let messages = 0;
    // Interleaved, so drifting machine noise hits every variant alike.
    for (let rep = 0; rep < reps; rep++) {
      const t = now();
      const scanned = await rawKeysetScan(raw, seeded.regionId, pageSize);
      rawMs.push(now() - t);
      if (scanned.rows !== count) throw new Error(`B1: raw scan read ${scanned.rows} rows, want ${count}`);
      for (const v of variants) {
        const cpu0 = await v.ctrl.cpu();
        const client0 = process.cpuUsage();
        const synced = await fullSync(v.client, count, seeded.head);
        const client1 = process.cpuUsage(client0);
        const cpu1 = await v.ctrl.cpu();
        v.clientCpuMs.push((client1.user + client1.system) / 1000);
        v.ms.push(synced.ms);
        v.cpuMs.push((cpu1.user - cpu0.user + cpu1.system - cpu0.system) / 1000);
        messages = synced.messages;
      }
      log(`B1 rep ${rep + 1}/${reps}: raw ${rawMs.at(-1)!.toFixed(0)} ms; ${variants.map((v) => `${v.name} ${v.ms.at(-1)!.toFixed(0)} ms`).join(", ")}`);
    }
    const rawRate = count / (median(rawMs) / 1000);
    const rate = (v: Variant) => count / (median(v.ms) / 1000);
    const [main, ...diagnostics] = variants;
    const mainRate = rate(main!);
    const reference = `raw keyset scan ${fmtInt(rawRate)}/s`;
    return {
      rows: [
        {
          benchmark: `B1 full sync, ${fmtInt(count)} resources, resources/s (gRPC, default client)`,
          measured: `${fmtInt(mainRate)}/s`,
          reference,
          ratio: fmtRatio(mainRate / rawRate),
          target: "≥ 50,000/s and ≥ 0.5×",
          met: mainRate >= 50_000 && mainRate / rawRate >= 0.5,
        },
        ...diagnostics.map((v) => ({
          benchmark: `B1 diagnostic: client accepts ${v.name}`,
          measured: `${fmtInt(rate(v))}/s`,
          reference,
          ratio: fmtRatio(rate(v) / rawRate),
          target: "(diagnostic)",
          met: undefined,
        })),
      ],
      notes: [
        `B1: median of ${reps} interleaved runs each; batch (page) size ${pageSize}; ${messages} response messages per sync; ` +
          `mean desired-resource body ${Math.round(seeded.bodyBytes / count)} B (${(seeded.bodyBytes / 2 ** 20).toFixed(1)} MiB in all); seeding ${fmtInt(count)} rows took ${(seedMs / 1000).toFixed(1)} s.`,
        `B1: wall times (ms) — raw scan ${rawMs.map((m) => m.toFixed(0)).join("/")}; ` +
          variants.map((v) => `${v.name} ${v.ms.map((m) => m.toFixed(0)).join("/")} (CPU: ctrl ${median(v.cpuMs).toFixed(0)}, client ${median(v.clientCpuMs).toFixed(0)})`).join("; ") + ".",
      ],
    };
  } finally {
    await raw.end().catch(() => undefined);
    await ctrl?.stop();
    await db.drop();
  }
}
