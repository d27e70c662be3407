// B15: notification delivery with a dead receiver. Two ctrl replicas deliver to receivers this
// process serves: four answer 200 at once (each verifies the Standard Webhooks signature of every
// SAMPLE_EVERY-th request with the standardwebhooks package), one accepts the connection and never
// answers (each attempt waits out --notifier-timeout). Events are written straight into the store
// (recordNotifications in transactions of BATCH, as a transition's transaction writes them; from
// this process, so the replicas find them by their --notifier-poll-interval as they find another
// replica's), all at once: the backlog of 4 × N live deliveries is drained as fast as ctrl goes.
// N events with the dead notifier subscribed, N with the four live ones only (the reference), in
// quarters, alternating: the dead receiver must not slow the others (docs/guides/notifications.md: bounded per receiver).
// ctrl's RSS after forced GCs before the first and after the last, and its peak in between.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { NotificationEvent, NotifierFormat, NotifierService } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { recordNotifications, Store } from "@flotilla/store";
import { Webhook } from "standardwebhooks";
import { adminAuth } from "./lib/clients.ts";
import { CtrlProcess, type ChildMemory } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate } from "./lib/db.ts";
import type { BenchContext, BenchResult } from "./lib/report.ts";
import { fmtBytes, fmtInt, fmtMs, fmtRatio, log, median, now, percentile, sleep, waitFor } from "./lib/util.ts";

const LIVE = 4;
/** Events per transaction. */
const BATCH = 100;
const SAMPLE_EVERY = 50;
/** The steady load the latency is measured under: PACED_BATCH events every PACED_EVERY_MS (100/s, 400 live deliveries/s: below what the backlog drains at). */
const PACED_BATCH = 10;
const PACED_EVERY_MS = 100;
const TARGET_RSS_BYTES = 30 * 1024 * 1024;
/** The dead receiver may cost the others this share of their throughput (and add it to their latency), at most. */
const TARGET_SLOWDOWN = 0.1;

interface Receiver {
  name: string;
  url: string;
  secret: string;
  /** webhook-id → first receipt time. */
  readonly received: Map<string, number>;
  requests: number;
  duplicates: number;
  verified: number;
  forged: number;
  close(): Promise<void>;
}

/** A receiver answering 200 at once (`dead`: never answering), its receipts by event. */
async function receiver(name: string, dead: boolean, receipts: (subject: string, at: number) => void): Promise<Receiver> {
  const r: Receiver = { name, url: "", secret: "", received: new Map(), requests: 0, duplicates: 0, verified: 0, forged: 0, close: async () => {} };
  const server = http.createServer((req, res) => {
    r.requests++;
    if (dead) return; // held open: the attempt ends at ctrl's timeout
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const at = now();
      const body = Buffer.concat(chunks).toString("utf8");
      const id = String(req.headers["webhook-id"]);
      if (r.requests % SAMPLE_EVERY === 0) {
        try {
          new Webhook(r.secret).verify(body, req.headers as Record<string, string>);
          r.verified++;
        } catch {
          r.forged++;
        }
      }
      if (r.received.has(id)) r.duplicates++;
      else {
        r.received.set(id, at);
        receipts((JSON.parse(body) as { data: { subject: string } }).data.subject, at);
      }
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  r.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return r;
}

interface Phase {
  events: number;
  /** Live deliveries, and the seconds from the first receipt to the last. */
  deliveries: number;
  seconds: number;
  /** Commit of the event's transaction → its first receipt, per live delivery (ms). */
  latencies: number[];
  writeSeconds: number;
}

export async function runB15(ctx: BenchContext): Promise<BenchResult> {
  const events = ctx.quick ? 1000 : 10_000;
  const db = await createBenchDatabase(ctx.serverUrl, "b15");
  const ctrls: CtrlProcess[] = [];
  const receivers: Receiver[] = [];
  let store: Store | undefined;
  /** subject → commit time of its transaction; subject → receipts (ms after it) at live receivers. */
  const committed = new Map<string, number>();
  const latencies = new Map<string, number[]>();
  const onReceipt = (subject: string, at: number) => {
    const t = committed.get(subject);
    if (t === undefined) return;
    let list = latencies.get(subject);
    if (!list) latencies.set(subject, (list = []));
    list.push(at - t);
  };
  try {
    await migrate(db.url);
    store = await Store.open(db.url);
    // Receivers on loopback; otherwise ctrl's defaults (10 s timeout, 32 in flight, 4 per receiver).
    for (let i = 0; i < 2; i++)
      ctrls.push(
        await CtrlProcess.start({
          databaseUrl: db.url,
          pollIntervalMs: ctx.pollIntervalMs,
          memoryReleaseGrowthBytes: 0,
          notifications: { allowPrivate: true },
        }),
      );
    const notifiers = createClient(NotifierService, createGrpcTransport({ baseUrl: ctrls[0]!.url, interceptors: [adminAuth] }));
    const subscribe = async (r: Receiver) => {
      const { signingSecret } = await notifiers.createNotifier({ notifier: { name: r.name, url: r.url, format: NotifierFormat.STANDARD_WEBHOOKS } });
      r.secret = signingSecret;
    };
    for (let i = 0; i < LIVE; i++) receivers.push(await receiver(`live-${i}`, false, onReceipt));
    const live = receivers.slice();
    for (const r of live) await subscribe(r);
    const dead = await receiver("dead", true, onReceipt);
    receivers.push(dead);
    const before = await Promise.all(ctrls.map((c) => c.memory({ reduce: true })));
    for (const c of ctrls) c.resetPeakRss();

    let written = 0;
    const s = store;
    /** `count` events, all at once (a backlog) or `paced` (a steady load); waits for their live deliveries. */
    const phase = async (label: string, count: number, paced = false): Promise<Phase> => {
      const subjects: string[] = [];
      const t0 = now();
      const batch = paced ? PACED_BATCH : BATCH;
      for (let from = 0; from < count; from += batch) {
        if (paced) await sleep(Math.max(0, t0 + (from / batch) * PACED_EVERY_MS - now()));
        const inputs = Array.from({ length: Math.min(batch, count - from) }, (_, i) => {
          const subject = `b15-${String(written + from + i).padStart(6, "0")}`;
          subjects.push(subject);
          return { event: NotificationEvent.DEPLOYMENT_FAILED, subject, data: { region: "bench", reason: "B15" } };
        });
        await s.database.db.transaction().execute((tx) => recordNotifications(tx, inputs, Date.now()));
        const at = now();
        for (const input of inputs) committed.set(input.subject, at);
      }
      const writeSeconds = (now() - t0) / 1000;
      written += count;
      await waitFor(`${label}: ${fmtInt(count * LIVE)} live deliveries`, () => subjects.every((x) => (latencies.get(x)?.length ?? 0) >= LIVE), 900_000, 100);
      const phaseLatencies = subjects.flatMap((x) => latencies.get(x)!);
      // The drain's rate, from the first receipt to the last: when a replica's poll first finds
      // the backlog is chance (up to its 1 s interval), and would weigh on short runs.
      const receipts = subjects.flatMap((x) => latencies.get(x)!.map((ms) => committed.get(x)! + ms));
      const seconds = (Math.max(...receipts) - Math.min(...receipts)) / 1000;
      log(
        `B15 ${label}: ${fmtInt(receipts.length / seconds)} live deliveries/s, p99 ${fmtMs(percentile(phaseLatencies, 99))} (events written in ${writeSeconds.toFixed(1)} s)`,
      );
      return { events: count, deliveries: receipts.length, seconds, latencies: phaseLatencies, writeSeconds };
    };
    // A quarter of the events of each kind at a time, in the order without, with, with, without,
    // twice: the machine's drift over the run (other work on a shared machine moved one
    // configuration's rate 2× between runs) weighs on both alike. The dead notifier is deleted
    // after each pair (its backlog with it) and subscribed again before the next.
    const quarter = events / 4;
    // A warm-up first (JIT, connections, the tables' first pages): the first run was the slowest by far.
    await phase("warm-up, 4 live receivers", events / 10);
    const without: Phase[] = [];
    const withDead: Phase[] = [];
    for (let block = 0; block < 2; block++) {
      without.push(await phase("4 live receivers", quarter));
      await subscribe(dead);
      withDead.push(await phase("4 live + 1 dead", quarter), await phase("4 live + 1 dead", quarter));
      await notifiers.deleteNotifier({ name: dead.name });
      without.push(await phase("4 live receivers", quarter));
    }
    const combine = (phases: Phase[]) => ({
      rate: phases.reduce((n, p) => n + p.deliveries, 0) / phases.reduce((n, p) => n + p.seconds, 0),
      latencies: phases.flatMap((p) => p.latencies),
      writeSeconds: phases.reduce((n, p) => n + p.writeSeconds, 0),
    });
    const reference = combine(without);
    const measured = combine(withDead);
    // The latency under a steady load, in the same alternation (a tenth of the events per run).
    const steady = { without: [] as Phase[], withDead: [] as Phase[] };
    steady.without.push(await phase("steady, 4 live receivers", events / 10, true));
    await subscribe(dead);
    steady.withDead.push(await phase("steady, 4 live + 1 dead", events / 10, true), await phase("steady, 4 live + 1 dead", events / 10, true));
    await notifiers.deleteNotifier({ name: dead.name });
    steady.without.push(await phase("steady, 4 live receivers", events / 10, true));
    const steadyRef = combine(steady.without).latencies;
    const steadyDead = combine(steady.withDead).latencies;
    const peaks = ctrls.map((c) => c.peakRss());
    const after = await Promise.all(ctrls.map((c) => c.memory({ reduce: true })));
    const growth = after.map((m, i) => m.rss - before[i]!.rss);
    const worst = Math.max(...growth);

    const duplicates = live.reduce((n, r) => n + r.duplicates, 0);
    const verified = live.reduce((n, r) => n + r.verified, 0);
    const forged = live.reduce((n, r) => n + r.forged, 0);
    const p99 = percentile(steadyDead, 99);
    const refP99 = percentile(steadyRef, 99);
    const fmtSigned = (bytes: number) => `${bytes >= 0 ? "+" : ""}${fmtBytes(bytes)}`;
    const mem = (m: ChildMemory) => fmtBytes(m.rss);
    const setup = `${fmtInt(events)} events to ${LIVE + 1} receivers, 1 dead (never answers), 2 ctrl replicas`;
    return {
      rows: [
        {
          benchmark: `B15 live receivers' deliveries/s (${setup})`,
          measured: `${fmtInt(measured.rate)}/s`,
          reference: `as many events to the ${LIVE} live receivers alone: ${fmtInt(reference.rate)}/s`,
          ratio: fmtRatio(measured.rate / reference.rate),
          target: `≥ ${fmtRatio(1 - TARGET_SLOWDOWN)} of the live receivers alone`,
          met: measured.rate >= reference.rate * (1 - TARGET_SLOWDOWN),
        },
        {
          benchmark: `B15 live receivers' p99 latency, event committed → delivered, at a steady ${fmtInt((PACED_BATCH * 1000) / PACED_EVERY_MS)} events/s (${fmtInt(events / 5)} events to 5 receivers, 1 dead, 2 ctrl replicas; ctrl finds them by its 1 s notifier poll)`,
          measured: fmtMs(p99),
          reference: `live receivers alone: p99 ${fmtMs(refP99)}, p50 ${fmtMs(median(steadyRef))}; with the dead one p50 ${fmtMs(median(steadyDead))}`,
          ratio: fmtRatio(p99 / refP99),
          target: `≤ ${fmtRatio(1 + TARGET_SLOWDOWN)} of the live receivers alone`,
          met: p99 <= refP99 * (1 + TARGET_SLOWDOWN),
        },
        {
          benchmark: `B15 ctrl RSS after ${fmtInt(written)} events (with and without the dead receiver) vs. before, the larger of 2 replicas (after forced GCs)`,
          measured: fmtSigned(worst),
          reference: `before ${before.map(mem).join(", ")} → after ${after.map(mem).join(", ")}; peak (VmHWM) during ${peaks.map(fmtBytes).join(", ")}`,
          ratio: fmtRatio(Math.max(...after.map((m, i) => m.rss / before[i]!.rss))),
          target: `≤ +${fmtBytes(TARGET_RSS_BYTES)}`,
          met: worst <= TARGET_RSS_BYTES,
        },
      ],
      notes: [
        `B15: events written straight into the store with recordNotifications (${BATCH} a transaction, as a transition's transaction writes them, ${measured.writeSeconds.toFixed(1)} s for the ${fmtInt(events)} with the dead receiver, ${reference.writeSeconds.toFixed(1)} s for those without), ` +
          `in quarters in the order without, with, with, without, twice (without: ${without.map((p) => `${fmtInt(p.deliveries / p.seconds)}/s`).join(", ")}; with: ${withDead.map((p) => `${fmtInt(p.deliveries / p.seconds)}/s`).join(", ")}), ` +
          `from the bench process: the replicas find them by their 1 s notifier poll, as a delivery another replica wrote. Latency from the transaction's commit to the first receipt at each live receiver. ` +
          `ctrl's notifier defaults but allowPrivate (10 s timeout, 32 attempts in flight per replica, 4 per receiver). The dead receiver got ${fmtInt(dead.requests)} attempts. ` +
          `The backlog's p99 latency (its drain): ${fmtMs(percentile(measured.latencies, 99))} with the dead receiver, ${fmtMs(percentile(reference.latencies, 99))} without. ` +
          `Duplicates at the live receivers: ${duplicates}; signatures verified on a sample: ${verified} good, ${forged} bad.`,
      ],
    };
  } finally {
    // Receivers first: the dead one's attempts then end at once, and ctrl's stop need not wait them out.
    for (const r of receivers) await r.close();
    for (const c of ctrls) await c.stop();
    await store?.close();
    await db.drop();
  }
}
