// B1: full sync throughput. N desired resources in one region; one gRPC client runs
// SyncDesiredState to completion: a lean reader (the target row: it measures ctrl, see
// lean-sync.ts) and connect-node clients (reported: they bound the wall time here).
// Reference: the same keyset scan straight through mysql2. The lean reader also syncs over TLS
// from a second ctrl process serving TLS on the same database (target: TLS costs ≤ 20%).
import { createConnection } from "mysql2/promise";
import { DEFAULT_STREAM_OPTIONS } from "@flotilla/ctrl";
import { clusterClient, type ClusterClient } from "./lib/clients.ts";
import { LeanSyncClient, type LeanSyncResult } from "./lib/lean-sync.ts";
import { CtrlProcess } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate, rawKeysetScan, seedRegion } from "./lib/db.ts";
import { benchTls, type BenchTls } from "./lib/tls.ts";
import type { BenchContext, BenchResult } from "./lib/report.ts";
import { fmtInt, fmtRatio, log, median, now } from "./lib/util.ts";

const REGION = "sync";

interface Variant {
  name: string;
  ctrl: CtrlProcess;
  sync: () => Promise<LeanSyncResult>;
  ms: number[];
  cpuMs: number[];
  clientCpuMs: number[];
}

/** SyncDesiredState through connect-node: every resource decoded. */
async function connectSync(client: ClusterClient): Promise<LeanSyncResult> {
  const result: LeanSyncResult = { resources: 0, messages: 0, complete: undefined };
  for await (const res of client.syncDesiredState({ region: REGION })) {
    result.messages++;
    if (res.message.case === "batch") result.resources += res.message.value.resources.length;
    else if (res.message.case === "complete") result.complete = res.message.value;
  }
  return result;
}

async function fullSync(v: Variant, expected: number, head: number): Promise<{ ms: number; messages: number }> {
  const started = now();
  const { resources, messages, complete } = await v.sync();
  const ms = now() - started;
  if (!complete) throw new Error(`B1 (${v.name}): SyncDesiredState ended without a complete marker`);
  if (resources !== expected || Number(complete.resourceCount) !== expected || Number(complete.version) !== head) {
    throw new Error(`B1 (${v.name}): got ${resources} resources, complete=${complete.resourceCount}@${complete.version}; want ${expected}@${head}`);
  }
  return { ms, messages };
}

export async function runB1(ctx: BenchContext): Promise<BenchResult> {
  const count = ctx.quick ? 10_000 : 100_000;
  const reps = ctx.quick ? 2 : 3;
  const pageSize = DEFAULT_STREAM_OPTIONS.snapshotBatchSize;
  const db = await createBenchDatabase(ctx.serverUrl, "b1");
  let ctrl: CtrlProcess | undefined;
  let lean: LeanSyncClient | undefined;
  let tls: BenchTls | undefined;
  let tlsCtrl: CtrlProcess | undefined;
  let leanTls: LeanSyncClient | undefined;
  const raw = await createConnection({ uri: db.url });
  try {
    await migrate(db.url);
    const seedStart = now();
    const seeded = await seedRegion(db.url, REGION, count);
    const seedMs = now() - seedStart;
    log(`B1: seeded ${fmtInt(count)} resources in ${(seedMs / 1000).toFixed(1)} s (${fmtInt(count / (seedMs / 1000))}/s)`);
    await raw.query("ANALYZE TABLE desired_resources");

    ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs }, { cpuProfileDir: ctx.cpuProfileDir });
    lean = new LeanSyncClient(ctrl.url);
    tls = benchTls();
    tlsCtrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs, tls: tls.server });
    leanTls = new LeanSyncClient(tlsCtrl.url, tls.ca);
    const connectDefault = clusterClient(ctrl.url);
    const connectPlain = clusterClient(ctrl.url, { acceptCompression: [] });
    const variant = (name: string, sync: () => Promise<LeanSyncResult>, served = ctrl!): Variant => ({
      name,
      ctrl: served,
      sync,
      ms: [],
      cpuMs: [],
      clientCpuMs: [],
    });
    const leanClient = lean;
    const leanTlsClient = leanTls;
    // The first two accept gzip (connect-node's default), so ctrl gzips each batch.
    const variants: Variant[] = [
      variant("lean reader", () => leanClient.sync(REGION)),
      variant("lean reader over TLS", () => leanTlsClient.sync(REGION), tlsCtrl),
      variant("connect-node client (decodes every resource)", () => connectSync(connectDefault)),
      variant("connect-node client accepting no compression", () => connectSync(connectPlain)),
    ];

    // Warm-up (buffer pool, JIT, HTTP/2 connections); not measured.
    await rawKeysetScan(raw, seeded.regionId, pageSize);
    for (const v of variants) await fullSync(v, count, seeded.head);

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
        const synced = await fullSync(v, count, seeded.head);
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
    const [main, overTls, ...diagnostics] = variants;
    const mainRate = rate(main!);
    const tlsRate = rate(overTls!);
    const reference = `raw keyset scan ${fmtInt(rawRate)}/s`;
    return {
      rows: [
        {
          benchmark: `B1 full sync, ${fmtInt(count)} resources, resources/s (gRPC, lean reader)`,
          measured: `${fmtInt(mainRate)}/s`,
          reference,
          ratio: fmtRatio(mainRate / rawRate),
          target: "≥ 50,000/s and ≥ 0.5×",
          met: mainRate >= 50_000 && mainRate / rawRate >= 0.5,
        },
        {
          benchmark: `B1 full sync over TLS, ${fmtInt(count)} resources, resources/s (gRPC, lean reader)`,
          measured: `${fmtInt(tlsRate)}/s`,
          reference: `plaintext ${fmtInt(mainRate)}/s`,
          ratio: fmtRatio(tlsRate / mainRate),
          target: "≥ 0.8× plaintext",
          met: tlsRate / mainRate >= 0.8,
        },
        ...diagnostics.map((v) => ({
          benchmark: `B1 diagnostic: ${v.name}`,
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
          variants
            .map(
              (v) =>
                `${v.name} ${v.ms.map((m) => m.toFixed(0)).join("/")} (CPU: ctrl ${median(v.cpuMs).toFixed(0)}, client ${median(v.clientCpuMs).toFixed(0)})`,
            )
            .join("; ") +
          ".",
      ],
    };
  } finally {
    await raw.end().catch(() => undefined);
    lean?.close();
    leanTls?.close();
    await ctrl?.stop();
    await tlsCtrl?.stop();
    tls?.cleanup();
    await db.drop();
  }
}
