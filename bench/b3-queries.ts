// B3: database queries per second issued by ctrl's shared change poller with 1, 100 and
// 1,000 open, mostly idle watch streams on one region, under a low write rate from another
// Store (another replica's writes: only the poll timer picks them up). Reference: the rate
// with one stream, measured in the same run.
import { create } from "@bufbuild/protobuf";
import { DeploymentSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { Store } from "@flotilla/store";
import { WatchFleet } from "./lib/clients.ts";
import { CtrlProcess } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate } from "./lib/db.ts";
import type { BenchContext, BenchResult, Row } from "./lib/report.ts";
import { fmtInt, fmtRatio, log, now, sleep, waitFor } from "./lib/util.ts";

const REGION = "idle";
const WRITES_PER_SECOND = 5;
const CONNECTIONS = 4;

export async function runB3(ctx: BenchContext): Promise<BenchResult> {
  const levels = ctx.quick ? [1, 100, 300] : [1, 100, 1000];
  const windowMs = ctx.quick ? 4000 : 10_000;
  const db = await createBenchDatabase(ctx.serverUrl, "b3");
  let ctrl: CtrlProcess | undefined;
  let store: Store | undefined;
  try {
    await migrate(db.url);
    store = await Store.open(db.url);
    await store.regions.create(REGION);
    const deployment = (i: number, image: string) =>
      create(DeploymentSchema, { id: `idle-${i}`, namespace: "bench", image, port: 8080, regions: [{ region: REGION, replicas: 1 }] });
    for (let i = 0; i < 5; i++) await store.deployments.create(deployment(i, "app:v0"));
    ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs });
    const c = ctrl;
    const s = store;

    let seq = 0;
    const results: { streams: number; qps: number; writes: number; seconds: number; received: number }[] = [];
    for (const streams of levels) {
      const head = (await s.regions.resolve(REGION)).headVersion;
      const fleet = new WatchFleet(c.url, REGION, streams, { connections: CONNECTIONS, versionLastSeen: head });
      try {
        await waitFor(`${streams} open watch streams`, async () => (await c.metrics()).watchStreams === streams, 120_000, 100);
        await sleep(1000); // let stream setup settle
        // Writes at a fixed rate on a schedule (not after each other), measured over the window.
        let writing = true;
        let writes = 0;
        const writer = (async () => {
          const start = now();
          for (let i = 0; writing; i++) {
            await s.deployments.update(deployment(seq % 5, `app:v${++seq}`));
            writes++;
            const next = start + ((i + 1) * 1000) / WRITES_PER_SECOND;
            await sleep(Math.max(0, next - now()));
          }
        })();
        await sleep(500);
        const q0 = (await c.metrics()).pollerQueries;
        const w0 = writes;
        const t0 = now();
        await sleep(windowMs);
        const q1 = (await c.metrics()).pollerQueries;
        const w1 = writes;
        const seconds = (now() - t0) / 1000;
        writing = false;
        await writer;
        const version = (await s.regions.resolve(REGION)).headVersion;
        await waitFor("the last write on every stream", () => fleet.behind(version) === 0, 30_000).catch(() => undefined);
        const received = streams - fleet.behind(version);
        results.push({ streams, qps: (q1 - q0) / seconds, writes: (w1 - w0) / seconds, seconds, received });
        log(
          `B3: ${streams} streams: ${((q1 - q0) / seconds).toFixed(2)} poller queries/s (${q1 - q0} in ${seconds.toFixed(1)} s, ${((w1 - w0) / seconds).toFixed(1)} writes/s)`,
        );
      } finally {
        await fleet.close();
        await waitFor("watch streams to close", async () => (await c.metrics()).watchStreams === 0, 30_000, 100).catch(() => undefined);
      }
    }

    const base = results[0]!;
    const rows: Row[] = results.slice(1).map((r) => ({
      benchmark: `B3 poller queries/s, ${fmtInt(r.streams)} idle streams (+${WRITES_PER_SECOND} writes/s)`,
      measured: `${r.qps.toFixed(2)}/s`,
      reference: `1 stream: ${base.qps.toFixed(2)}/s`,
      ratio: fmtRatio(r.qps / base.qps),
      target: "within ±10% (0.90–1.10×)",
      met: Math.abs(r.qps / base.qps - 1) <= 0.1,
    }));
    return {
      rows,
      notes: [
        `B3: ${(windowMs / 1000).toFixed(0)} s window per level; poll interval ${ctx.pollIntervalMs} ms; writes from a second Store (they do not wake the poller). ` +
          results
            .map(
              (r) =>
                `${fmtInt(r.streams)} streams: ${r.qps.toFixed(2)} queries/s at ${r.writes.toFixed(1)} writes/s, ${fmtInt(r.received)}/${fmtInt(r.streams)} streams caught up`,
            )
            .join("; ") +
          ".",
      ],
    };
  } finally {
    await ctrl?.stop();
    await store?.close();
    await db.drop();
  }
}
