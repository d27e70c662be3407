// B2: commit → client receive latency with many open watch streams on one ctrl.
// (a) writes through the ctrl process's own Store (they wake its poller at once);
// (b) writes through a second Store in the benchmark process, like another ctrl replica
//     (only the poll interval picks them up).
// Reference: the same measurement with a single open stream, in the same run.
// Then (a) again with ctrl serving TLS, beside the plaintext numbers of the same run.
import { Store } from "@flotilla/store";
import { create } from "@bufbuild/protobuf";
import { DeploymentSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { WatchFleet } from "./lib/clients.ts";
import { CtrlProcess, type WriteSpec } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate } from "./lib/db.ts";
import { benchTls, type BenchTls } from "./lib/tls.ts";
import type { BenchContext, BenchResult, Row } from "./lib/report.ts";
import { fmtInt, fmtMs, fmtRatio, log, now, percentile, sleep, waitFor } from "./lib/util.ts";
import { storeDecisions } from "@flotilla/ctrl/rollouts";

const REGION = "latency";
const DEPLOYMENTS = 10;
const CONNECTIONS = 4;

type Mode = "same-process" | "other-process";

interface LatencyRun {
  streams: number;
  writes: number;
  samples: number[];
  /** Streams that had not received every write when the run ended. */
  incomplete: number;
  errors: number;
  /** CPU time of the ctrl process over the measured writes. */
  ctrlCpuMs: number;
  /** Change events ctrl sent on watch streams over the measured writes. */
  eventsSent: number;
  /** CPU time of this (the clients') process over the measured writes. */
  clientCpuMs: number;
}

export async function runB2(ctx: BenchContext): Promise<BenchResult> {
  const streams = ctx.quick ? 200 : 1000;
  const writes = ctx.quick ? 40 : 200;
  const referenceWrites = ctx.quick ? 20 : 100;
  const db = await createBenchDatabase(ctx.serverUrl, "b2");
  let ctrl: CtrlProcess | undefined;
  let other: Store | undefined;
  let tls: BenchTls | undefined;
  try {
    await migrate(db.url);
    other = await Store.open(db.url, { rollouts: storeDecisions });
    await other.regions.create(REGION);
    const spec = (i: number, image: string): WriteSpec => ({ id: `lat-${i}`, namespace: "bench", image, region: REGION, replicas: 2 });
    const toDeployment = (w: WriteSpec) =>
      create(DeploymentSchema, { id: w.id, namespace: w.namespace, image: w.image, port: 8080, regions: [{ region: w.region, replicas: w.replicas }] });
    for (let i = 0; i < DEPLOYMENTS; i++) await other.deployments.create(toDeployment(spec(i, "app:w0")));
    ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs }, { cpuProfileDir: ctx.cpuProfileDir });
    log(`B2: ctrl child clock offset ${ctrl.clockOffset.toFixed(3)} ms`);
    // Replaced by a TLS-serving ctrl for the last measurement.
    let c = ctrl;
    let ca: Buffer | undefined;
    const store = other;

    // Commit times come from the Stores' commit listeners: they run synchronously right after
    // the transaction committed, before anything else can run in that process.
    let lastCommitAt = 0;
    store.onCommit(() => {
      lastCommitAt = now();
    });
    let seq = 0;
    /** Writes one change; returns the commit time (this process's clock). */
    const write = async (mode: Mode): Promise<number> => {
      const n = ++seq;
      const w = spec(n % DEPLOYMENTS, `app:w${n}`);
      if (mode === "same-process") return c.write("update", w);
      lastCommitAt = 0;
      await store.deployments.update(toDeployment(w));
      if (lastCommitAt === 0) throw new Error(`B2: write ${n} changed nothing`);
      return lastCommitAt;
    };

    const measure = async (mode: Mode, streamCount: number, writeCount: number): Promise<LatencyRun> => {
      const head = (await store.regions.resolve(REGION)).headVersion;
      // version → every stream's receive time (commit times may be known only later).
      const received = new Map<number, number[]>();
      const fleet = new WatchFleet(c.url, REGION, streamCount, {
        connections: CONNECTIONS,
        ca,
        versionLastSeen: head,
        onMessage(_stream, res, receivedAt) {
          if (res.events === 0) return;
          let list = received.get(res.version);
          if (!list) received.set(res.version, (list = []));
          list.push(receivedAt);
        },
      });
      try {
        await waitFor(`${streamCount} open watch streams`, async () => (await c.metrics()).watchStreams === streamCount, 120_000, 100);
        // Warm-up: every stream must receive these before measuring.
        let version = head;
        for (let i = 0; i < 3; i++) {
          await write(mode);
          version++;
        }
        await waitFor("warm-up writes on every stream", () => fleet.behind(version) === 0, 30_000);
        const committed = new Map<number, number>();
        const cpu0 = await c.cpu();
        const clientCpu0 = process.cpuUsage();
        const events0 = (await c.metrics()).watchEvents;
        for (let i = 0; i < writeCount; i++) {
          const committedAt = await write(mode);
          version++;
          committed.set(version, committedAt);
          // Each write is measured on its own: the next one starts only after every stream
          // received this one, after a random pause (for other-process writes up to one
          // poll interval, so writes land at every phase of the poller's timer).
          const v = version;
          await waitFor(`version ${v} on every stream`, () => fleet.behind(v) === 0, 30_000, 2).catch(() => undefined);
          await sleep(mode === "same-process" ? 20 + Math.random() * 30 : Math.random() * ctx.pollIntervalMs);
        }
        const finalVersion = version;
        await waitFor("the last write on every stream", () => fleet.behind(finalVersion) === 0, 15_000).catch(() => undefined);
        const cpu1 = await c.cpu();
        const clientCpu = process.cpuUsage(clientCpu0);
        const events1 = (await c.metrics()).watchEvents;
        const samples: number[] = [];
        for (const [v, t] of committed) for (const r of received.get(v) ?? []) samples.push(r - t);
        return {
          streams: streamCount,
          writes: writeCount,
          samples,
          incomplete: fleet.behind(finalVersion),
          errors: fleet.errors.length,
          ctrlCpuMs: (cpu1.user - cpu0.user + cpu1.system - cpu0.system) / 1000,
          eventsSent: events1 - events0,
          clientCpuMs: (clientCpu.user + clientCpu.system) / 1000,
        };
      } finally {
        await fleet.close();
        await waitFor("watch streams to close", async () => (await c.metrics()).watchStreams === 0, 30_000, 100).catch(() => undefined);
      }
    };

    const rows: Row[] = [];
    const notes: string[] = [];
    let plaintextSameProcess: LatencyRun | undefined;
    for (const mode of ["same-process", "other-process"] as const) {
      const main = await measure(mode, streams, writes);
      if (mode === "same-process") plaintextSameProcess = main;
      const ref = await measure(mode, 1, referenceWrites);
      const p = (r: LatencyRun, q: number) => percentile(r.samples, q);
      const target = mode === "same-process" ? 25 : ctx.pollIntervalMs + 50;
      const label = mode === "same-process" ? "(a) same-process writes" : `(b) other-process writes, poll ${ctx.pollIntervalMs} ms`;
      log(
        `B2 ${mode}: ${main.streams} streams p50 ${fmtMs(p(main, 50))} p99 ${fmtMs(p(main, 99))}; 1 stream p50 ${fmtMs(p(ref, 50))} p99 ${fmtMs(p(ref, 99))}`,
      );
      rows.push(
        {
          benchmark: `B2${mode === "same-process" ? "a" : "b"} latency p50, ${fmtInt(streams)} streams, ${label}`,
          measured: fmtMs(p(main, 50)),
          reference: `1 stream: ${fmtMs(p(ref, 50))}`,
          ratio: fmtRatio(p(main, 50) / p(ref, 50)),
          target: "—",
          met: undefined,
        },
        {
          benchmark: `B2${mode === "same-process" ? "a" : "b"} latency p99, ${fmtInt(streams)} streams, ${label}`,
          measured: fmtMs(p(main, 99)),
          reference: `1 stream: ${fmtMs(p(ref, 99))}`,
          ratio: fmtRatio(p(main, 99) / p(ref, 99)),
          target: `≤ ${target} ms`,
          met: p(main, 99) <= target && main.incomplete === 0 && main.errors === 0,
        },
      );
      notes.push(
        `B2 ${mode}: ${main.writes} writes × ${fmtInt(main.streams)} streams = ${fmtInt(main.samples.length)} samples (max ${fmtMs(main.samples.reduce((a, b) => Math.max(a, b), -Infinity))}, min ${fmtMs(main.samples.reduce((a, b) => Math.min(a, b), Infinity))}, negative ${main.samples.filter((x) => x < 0).length}); ` +
          `streams missing the last write at the end: ${main.incomplete}, failed streams: ${main.errors}. ` +
          `ctrl CPU over the measured writes: ${main.ctrlCpuMs.toFixed(0)} ms for ${fmtInt(main.eventsSent)} events sent = ${((main.ctrlCpuMs * 1000) / main.eventsSent).toFixed(0)} µs per delivered event ` +
          `(so one write fanned out to ${fmtInt(streams)} streams costs ≈ ${((main.ctrlCpuMs / main.eventsSent) * streams).toFixed(0)} ms of ctrl CPU); ` +
          `the clients' process (all ${fmtInt(streams)} streams, sharing the machine's cores with ctrl) used ${main.clientCpuMs.toFixed(0)} ms = ${((main.clientCpuMs * 1000) / main.eventsSent).toFixed(0)} µs per received event. ` +
          `Reference: ${ref.writes} writes on 1 stream (max ${fmtMs(Math.max(...ref.samples))}).`,
      );
    }
    // (a) over TLS: the same database and writes, ctrl restarted serving TLS.
    await ctrl.stop();
    tls = benchTls();
    ctrl = c = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs, tls: tls.server }, { cpuProfileDir: ctx.cpuProfileDir });
    ca = tls.ca;
    const overTls = await measure("same-process", streams, writes);
    const plain = plaintextSameProcess!;
    log(`B2 same-process over TLS: ${overTls.streams} streams p50 ${fmtMs(percentile(overTls.samples, 50))} p99 ${fmtMs(percentile(overTls.samples, 99))}`);
    for (const q of [50, 99]) {
      rows.push({
        benchmark: `B2a latency p${q} over TLS, ${fmtInt(streams)} streams, (a) same-process writes`,
        measured: fmtMs(percentile(overTls.samples, q)),
        reference: `plaintext: ${fmtMs(percentile(plain.samples, q))}`,
        ratio: fmtRatio(percentile(overTls.samples, q) / percentile(plain.samples, q)),
        target: q === 99 ? "≤ 25 ms" : "—",
        met: q === 99 ? percentile(overTls.samples, 99) <= 25 && overTls.incomplete === 0 && overTls.errors === 0 : undefined,
      });
    }
    notes.push(
      `B2 same-process over TLS: ${overTls.samples.length} samples; streams missing the last write: ${overTls.incomplete}, failed: ${overTls.errors}; ` +
        `ctrl CPU ${((overTls.ctrlCpuMs * 1000) / overTls.eventsSent).toFixed(0)} µs per delivered event (plaintext ${((plain.ctrlCpuMs * 1000) / plain.eventsSent).toFixed(0)} µs); ` +
        `clients ${((overTls.clientCpuMs * 1000) / overTls.eventsSent).toFixed(0)} µs per received event (plaintext ${((plain.clientCpuMs * 1000) / plain.eventsSent).toFixed(0)} µs).`,
    );
    notes.push(
      "B2: a negative sample means a stream received the change before the writer's COMMIT returned: the database makes a commit visible " +
        "to other readers (here ctrl's poll) before it has flushed its log and answered the writer.",
      `B2: ${fmtInt(streams)} streams over ${CONNECTIONS} HTTP/2 connections from the benchmark process; ctrl in its own process; ` +
        `same-process commit times are taken in ctrl's process right after the commit returned and mapped to the benchmark's clock (offset ${ctrl.clockOffset.toFixed(2)} ms, by ping).`,
    );
    return { rows, notes };
  } finally {
    await ctrl?.stop();
    await other?.close();
    tls?.cleanup();
    await db.drop();
  }
}
