// Diagnostic: where B2a's latency goes, plaintext and TLS. One ctrl per transport,
// `streams` watch streams over 4 HTTP/2 connections, same-process writes; every stream's
// receive time is kept, so the latency is reported by the stream's place in the fan-out
// (tenths of the streams, in the order they opened) and by connection. Each ctrl is read by
// Node's HTTP/2 client (WatchFleet) and by B2's frame reader (FrameWatchFleet) in turn.
// Usage: node bench/diag/tls-fanout.ts [streams=1000] [writes=60] [reps=1]
// (CPU_PROFILE_DIR=dir: a CPU profile of each ctrl process there)
import { WatchFleet, type WatchReader } from "../lib/clients.ts";
import { FrameWatchFleet } from "../lib/frame-watch-fleet.ts";
import { CtrlProcess } from "../lib/ctrl-process.ts";
import { oneDeployment } from "../lib/one-deployment.ts";
import { benchTls } from "../lib/tls.ts";
import { fmtMs, percentile, sleep, waitFor } from "../lib/util.ts";

const [streams = 1000, writes = 60, reps = 1] = process.argv.slice(2).map(Number);
const REGION = "tls-fanout";
const CONNECTIONS = 4;
const transports = ["plaintext", "tls"] as const;
type Transport = (typeof transports)[number];
const readers = { node: WatchFleet, frames: FrameWatchFleet } as const;

const { db, write } = await oneDeployment("tlsfan", REGION);
const pki = benchTls();
try {
  const measure = async (transport: Transport): Promise<void> => {
    const ctrl = await CtrlProcess.start(
      { databaseUrl: db.url, pollIntervalMs: 200, ...(transport === "tls" ? { tls: pki.server } : {}) },
      { cpuProfileDir: process.env.CPU_PROFILE_DIR },
    );
    try {
      for (const [reader, Fleet] of Object.entries(readers)) await measureWith(ctrl, transport, reader, Fleet);
    } finally {
      await ctrl.stop();
    }
  };
  const measureWith = async (ctrl: CtrlProcess, transport: Transport, reader: string, Fleet: (typeof readers)[keyof typeof readers]) => {
    // version → receive time per stream index
    const received = new Map<number, Float64Array>();
    const fleet: WatchReader = new Fleet(ctrl.url, REGION, streams, {
      connections: CONNECTIONS,
      ca: transport === "tls" ? pki.ca : undefined,
      onMessage: (stream, res, t) => {
        if (res.events === 0) return;
        const v = res.version;
        let times = received.get(v);
        if (!times) received.set(v, (times = new Float64Array(streams).fill(NaN)));
        times[stream.index] = t;
      },
    });
    try {
      await waitFor(`${streams} open streams`, async () => (await ctrl.metrics()).watchStreams === streams, 120_000, 100);
      for (let i = 0; i < 3; i++) await write(ctrl, fleet);
      const committed = new Map<number, number>();
      for (let i = 0; i < writes; i++) {
        const r = await write(ctrl, fleet);
        committed.set(r.version, r.committedAt);
        await sleep(20 + Math.random() * 30);
      }
      const all: number[] = [];
      const byTenth: number[][] = Array.from({ length: 10 }, () => []);
      const byConnection: number[][] = Array.from({ length: CONNECTIONS }, () => []);
      const firstLast: number[][] = [[], []];
      for (const [v, t] of committed) {
        const times = received.get(v)!;
        let first = Infinity;
        let last = -Infinity;
        times.forEach((r, i) => {
          const ms = r - t;
          all.push(ms);
          byTenth[Math.floor((i * 10) / streams)]!.push(ms);
          byConnection[i % CONNECTIONS]!.push(ms);
          first = Math.min(first, ms);
          last = Math.max(last, ms);
        });
        firstLast[0]!.push(first);
        firstLast[1]!.push(last);
      }
      const q = (xs: number[]) => `p50 ${fmtMs(percentile(xs, 50))} p99 ${fmtMs(percentile(xs, 99))}`;
      console.log(`${transport}, ${reader} reader: all streams ${q(all)}; first stream of a write ${q(firstLast[0]!)}; last ${q(firstLast[1]!)}`);
      console.log(`  by tenth of the fan-out: ${byTenth.map((xs) => fmtMs(percentile(xs, 50))).join(" ")} (p50)`);
      console.log(`  by tenth of the fan-out: ${byTenth.map((xs) => fmtMs(percentile(xs, 99))).join(" ")} (p99)`);
      console.log(`  by connection: ${byConnection.map((xs) => q(xs)).join("; ")}`);
    } finally {
      await fleet.close();
      await waitFor("watch streams to close", async () => (await ctrl.metrics()).watchStreams === 0, 30_000, 100);
    }
  };

  for (let rep = 0; rep < reps; rep++) for (const transport of transports) await measure(transport);
} finally {
  pki.cleanup();
  await db.drop();
}
