// Diagnostic: ctrl's two server paths for WatchDeploymentChanges in the same run, B2-style
// (commit → receive latency and ctrl CPU per delivered event, same-process writes) and
// B4-style (memory per idle stream). The lean reader speaks gRPC (ctrl's direct path, as
// agents connect) or the Connect protocol (connect-node's per-message pipeline).
// Usage: node bench/diag/watch-paths.ts [streams=200] [writes=40] [reps=2]
import { WatchFleet } from "../lib/clients.ts";
import { CtrlProcess } from "../lib/ctrl-process.ts";
import { oneDeployment } from "../lib/one-deployment.ts";
import { fmtBytes, fmtMs, fmtRatio, percentile, sleep, waitFor } from "../lib/util.ts";

const [streams = 200, writes = 40, reps = 2] = process.argv.slice(2).map(Number);
const REGION = "paths";
const protocols = ["grpc", "connect"] as const;
type Protocol = (typeof protocols)[number];

interface Result {
  p50: number;
  p99: number;
  cpuPerEventUs: number;
  heapPerStream: number;
  rssPerStream: number;
}

const { db, write } = await oneDeployment("paths", REGION);
try {
  /** A fresh ctrl per protocol and rep, so neither inherits the other's heap. */
  const measure = async (protocol: Protocol): Promise<Result> => {
    const ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: 200 });
    try {
      const receivedAt = new Map<number, number[]>();
      const openFleet = (count: number, onVersion?: (v: number, t: number) => void) =>
        new WatchFleet(ctrl.url, REGION, count, {
          connections: 4,
          protocol,
          onMessage: (_stream, res, t) => {
            if (res.events > 0) onVersion?.(res.version, t);
          },
        });
      const warm = openFleet(20);
      await waitFor("warm-up streams", async () => (await ctrl.metrics()).watchStreams === 20, 30_000, 50);
      await warm.close();
      await waitFor("warm-up streams to close", async () => (await ctrl.metrics()).watchStreams === 0, 30_000, 50);
      await sleep(500);
      const before = await ctrl.memory();
      const fleet = openFleet(streams, (v, t) => {
        let list = receivedAt.get(v);
        if (!list) receivedAt.set(v, (list = []));
        list.push(t);
      });
      try {
        await waitFor(`${streams} open streams`, async () => (await ctrl.metrics()).watchStreams === streams, 120_000, 100);
        await sleep(6000);
        const open = await ctrl.memory();
        for (let i = 0; i < 3; i++) await write(ctrl, fleet);
        const cpu0 = await ctrl.cpu();
        const events0 = (await ctrl.metrics()).watchEvents;
        const committed = new Map<number, number>();
        for (let i = 0; i < writes; i++) {
          const r = await write(ctrl, fleet);
          committed.set(r.version, r.committedAt);
          await sleep(20 + Math.random() * 30);
        }
        const cpu = await ctrl.cpu();
        const events = (await ctrl.metrics()).watchEvents - events0;
        if (fleet.errors.length) throw new Error(`${fleet.errors.length} streams failed: ${String(fleet.errors[0]!.error)}`);
        const samples = [...committed].flatMap(([v, t]) => (receivedAt.get(v) ?? []).map((r) => r - t));
        return {
          p50: percentile(samples, 50),
          p99: percentile(samples, 99),
          cpuPerEventUs: (cpu.user + cpu.system - cpu0.user - cpu0.system) / events,
          heapPerStream: (open.heapUsed - before.heapUsed) / streams,
          rssPerStream: (open.rss - before.rss) / streams,
        };
      } finally {
        await fleet.close();
      }
    } finally {
      await ctrl.stop();
    }
  };

  const results = new Map<Protocol, Result[]>(protocols.map((p) => [p, []]));
  for (let rep = 0; rep < reps; rep++) {
    for (const protocol of protocols) {
      const r = await measure(protocol);
      results.get(protocol)!.push(r);
      console.log(
        `rep ${rep + 1} ${protocol}: ${streams} streams: p50 ${fmtMs(r.p50)} p99 ${fmtMs(r.p99)}, ctrl CPU ${r.cpuPerEventUs.toFixed(1)} µs/event, ` +
          `heap ${fmtBytes(r.heapPerStream)}/stream, RSS ${fmtBytes(r.rssPerStream)}/stream`,
      );
    }
  }
  const med = (p: Protocol, key: keyof Result) =>
    percentile(
      results.get(p)!.map((r) => r[key]),
      50,
    );
  for (const key of ["p50", "p99", "cpuPerEventUs", "heapPerStream", "rssPerStream"] as const) {
    console.log(
      `median ${key}: grpc ${med("grpc", key).toFixed(1)}, connect ${med("connect", key).toFixed(1)}, connect/grpc ${fmtRatio(med("connect", key) / med("grpc", key))}`,
    );
  }
} finally {
  await db.drop();
}
