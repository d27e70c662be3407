// B4: ctrl's memory at rest, and per idle open watch stream. ctrl runs in its own process from
// its production bundle, as the image runs it (bench/ctrl-child.ts bundled with ctrl's code,
// --expose-gc). At rest: a fresh ctrl that has served nothing, once its own first memory release
// ran (as a deployed ctrl is after its start). Per stream: heap and RSS are read after forced GCs
// with 0 streams, then with N idle streams, then again after they closed (leak check), with
// ctrl's memory release off.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { DeploymentSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { Store } from "@flotilla/store";
import { buildBundle } from "./lib/bundle.ts";
import { WatchFleet } from "./lib/clients.ts";
import { CtrlProcess, type ChildMemory } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate } from "./lib/db.ts";
import type { BenchContext, BenchResult, Row } from "./lib/report.ts";
import { fmtBytes, fmtInt, fmtRatio, log, sleep, waitFor } from "./lib/util.ts";

const REGION = "memory";
const TARGET_BYTES = 150 * 1024;
const TARGET_AT_REST = 90 * 1024 * 1024;

interface Measurement {
  connections: number;
  before: ChildMemory;
  open: ChildMemory;
  after: ChildMemory;
}

export async function runB4(ctx: BenchContext): Promise<BenchResult> {
  const streams = ctx.quick ? 200 : 1000;
  const db = await createBenchDatabase(ctx.serverUrl, "b4");
  const bundleDir = await mkdtemp(join(tmpdir(), "flotilla-b4-bundle-"));
  let store: Store | undefined;
  try {
    const bundle = buildBundle("ctrl", join(bundleDir, "ctrl"), ["ctrl-child.ts"]);
    await migrate(db.url);
    store = await Store.open(db.url);
    await store.regions.create(REGION);
    await store.deployments.create(
      create(DeploymentSchema, { id: "mem-0", namespace: "bench", image: "app:v1", port: 8080, regions: [{ region: REGION, replicas: 1 }] }),
    );
    const head = (await store.regions.resolve(REGION)).headVersion;

    // At rest: ctrl's own memory release on (its default), measured once its first one ran.
    const atRest = await (async () => {
      const ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs }, { bundle });
      try {
        await waitFor("ctrl's first memory release", async () => (await ctrl.metrics()).memoryReleases >= 1, 60_000, 100);
        await sleep(2000);
        return await ctrl.memory();
      } finally {
        await ctrl.stop();
      }
    })();
    log(
      `B4: at rest: RSS ${fmtBytes(atRest.rss)} (anonymous ${fmtBytes(atRest.rssAnon)}, mapped files ${fmtBytes(atRest.rssFile)}), heap ${fmtBytes(atRest.heapUsed)}`,
    );

    // A fresh ctrl per measurement, so one cannot inherit the other's heap growth.
    const measure = async (connections: number): Promise<Measurement> => {
      // No memory release of ctrl's own between the measurements: they compare RSS with and without streams.
      const ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs, memoryReleaseGrowthBytes: 0 }, { bundle });
      try {
        // Warm-up: a few streams opened and closed, so lazily created state (JIT code,
        // HTTP/2 machinery, metric label sets) is in the baseline, not charged to streams.
        const warm = new WatchFleet(ctrl.url, REGION, 20, { connections: 2, versionLastSeen: head });
        await waitFor("warm-up streams", async () => (await ctrl.metrics()).watchStreams === 20, 30_000, 50);
        await warm.close();
        await waitFor("warm-up streams to close", async () => (await ctrl.metrics()).watchStreams === 0, 30_000, 50);
        await sleep(500);
        const before = await ctrl.memory();

        const fleet = new WatchFleet(ctrl.url, REGION, streams, { connections, versionLastSeen: head });
        let open: ChildMemory;
        try {
          await waitFor(`${streams} open watch streams`, async () => (await ctrl.metrics()).watchStreams === streams, 120_000, 100);
          // Steady state: every stream has been through a bookmark (5 s) at least once.
          await sleep(6000);
          open = await ctrl.memory();
          if (fleet.errors.length) throw new Error(`B4: ${fleet.errors.length} streams failed: ${String(fleet.errors[0]!.error)}`);
        } finally {
          await fleet.close();
        }
        await waitFor("watch streams to close", async () => (await ctrl.metrics()).watchStreams === 0, 30_000, 100);
        await sleep(1000);
        const after = await ctrl.memory();
        log(
          `B4: ${connections} connections: heap ${fmtBytes(before.heapUsed)} → ${fmtBytes(open.heapUsed)} → ${fmtBytes(after.heapUsed)}, RSS ${fmtBytes(before.rss)} → ${fmtBytes(open.rss)} → ${fmtBytes(after.rss)}`,
        );
        return { connections, before, open, after };
      } finally {
        await ctrl.stop();
      }
    };

    const few = await measure(4);
    const many = await measure(streams);
    const per = (m: Measurement, key: "heapUsed" | "rss") => (m.open[key] - m.before[key]) / streams;
    const rows: Row[] = [
      {
        benchmark: "B4 ctrl RSS at rest: 0 streams, production bundle, after its first memory release",
        measured: fmtBytes(atRest.rss),
        reference: `anonymous ${fmtBytes(atRest.rssAnon)}, mapped files ${fmtBytes(atRest.rssFile)}`,
        ratio: "—",
        target: `≤ ${fmtBytes(TARGET_AT_REST)}`,
        met: atRest.rss <= TARGET_AT_REST,
      },
    ];
    for (const m of [few, many]) {
      const label =
        m.connections === streams
          ? `${fmtInt(streams)} streams on ${fmtInt(streams)} connections (one per agent)`
          : `${fmtInt(streams)} streams on ${m.connections} connections`;
      for (const key of ["heapUsed", "rss"] as const) {
        rows.push({
          benchmark: `B4 ctrl ${key === "heapUsed" ? "heap" : "RSS"} per idle stream, ${label}`,
          measured: `${fmtBytes(per(m, key))}/stream`,
          reference: `0 streams: ${fmtBytes(m.before[key])} → ${fmtInt(streams)}: ${fmtBytes(m.open[key])}`,
          ratio: fmtRatio(m.open[key] / m.before[key]),
          target: "≤ 150 KB/stream",
          met: per(m, key) <= TARGET_BYTES,
        });
      }
    }
    const mem = (m: ChildMemory) => `heap ${fmtBytes(m.heapUsed)}, RSS ${fmtBytes(m.rss)}, external ${fmtBytes(m.external)}`;
    return {
      rows,
      notes: [
        `B4 at rest: ${mem(atRest)}, anonymous ${fmtBytes(atRest.rssAnon)}, mapped files ${fmtBytes(atRest.rssFile)} (after forced GCs; ctrl from its bundle with --enable-source-maps, on MySQL/MariaDB).`,
        `B4: after forced GC in the ctrl process; the ratio column is (with streams) / (without). ` +
          [few, many].map((m) => `${m.connections} connections: before ${mem(m.before)}; open ${mem(m.open)}; after closing ${mem(m.after)}`).join(". ") +
          ".",
        `B4: per-stream external (Buffers) memory: ${fmtBytes((few.open.external - few.before.external) / streams)} on ${few.connections} connections, ` +
          `${fmtBytes((many.open.external - many.before.external) / streams)} on ${many.connections}.`,
      ],
    };
  } finally {
    await store?.close();
    await db.drop();
    await rm(bundleDir, { recursive: true, force: true });
  }
}
