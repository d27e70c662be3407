// B12: staged rollouts on MySQL/MariaDB, with simulated agents: per region a client
// that follows WatchDeploymentChanges and reports what it received RUNNING at that version
// through ReportObservedState, batched and paced as the agent's reporter sends (≤ 500
// observations a call, ≤ one call per 250 ms), so the gates pass as they would with real agents.
// (a) Wave hand-off: deployments rolling out over 10 regions in 3 waves (bake 0), agents and
//     rollouts on one ctrl: from the report that makes the last region of a wave RUNNING (its
//     send) to the arrival of the deployment's new revision on the next wave's first watch stream.
// (b) Rollouts waiting on a bake: a ctrl's database queries per second (counted by a proxy
//     between it and the server) and its RSS after forced GCs, without rollouts and then with
//     rollouts baking for an hour (staged through a second ctrl, as another replica would);
//     then, the two stopped, a ctrl started over them (it takes the driver's lease: its start
//     looks once at every progressing rollout).
import net from "node:net";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ClusterService, ResourceObservationSchema, type ResourceObservation } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { create } from "@bufbuild/protobuf";
import { ResourceType, RolloutState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { DEFAULT_RETENTION_INTERVAL_MS } from "@flotilla/ctrl";
import { Store } from "@flotilla/store";
import { adminAuth } from "./lib/clients.ts";
import { CtrlProcess, type ChildMemory } from "./lib/ctrl-process.ts";
import { createBenchDatabase, migrate } from "./lib/db.ts";
import type { BenchContext, BenchResult, Row } from "./lib/report.ts";
import { fmtBytes, fmtInt, fmtMs, fmtRatio, log, median, now, percentile, sleep, waitFor } from "./lib/util.ts";
import { storeDecisions } from "@flotilla/ctrl/rollouts";

export const REGIONS = 10;
/** Wave of region i: the first region, the next three, the rest. */
export const WAVE_OF = (i: number) => (i === 0 ? "canary" : i <= 3 ? "early" : "rest");
export const THREE_WAVES = { waves: [{ name: "canary", selector: "wave=canary" }, { name: "early", selector: "wave=early" }, { name: "rest" }] };
const BAKE = { waves: [{ name: "bake", regions: ["bake"], bake: { seconds: 3600n, nanos: 0 } }, { name: "rest" }] };
/** The agent's reporter: DEFAULT_MAX_BATCH and the default --report-interval. */
const REPORT_BATCH = 500;
export const REPORT_INTERVAL_MS = 250;
const WRITERS = 8;
export const TARGET_HANDOFF_P99_MS = 250;
const TARGET_RSS_BYTES = 30 * 1024 * 1024;

export function clients(baseUrl: string) {
  const transport = createGrpcTransport({ baseUrl, interceptors: [adminAuth] });
  return {
    cluster: createClient(ClusterService, transport),
    deployments: createClient(DeploymentService, transport),
    regions: createClient(RegionService, transport),
  };
}

/**
 * A region's agent reduced to its protocol: follows the region's changes from `from` and
 * reports each deployment it received RUNNING at that version (every replica ready, the
 * desired image). Remembers when each revision arrived and when its report was sent.
 */
export class SimulatedAgent {
  /** `${id}@${image}` → receive time of the event that brought it. */
  readonly received = new Map<string, number>();
  /** `${id}@${image}` → send time of the report that said it RUNNING. */
  readonly reported = new Map<string, number>();
  /** `${id}@${image}` → when ctrl answered that report (the observation committed). */
  readonly answered = new Map<string, number>();
  /** Deployment id → the revision of the newest spec received (what its pods would run: analysis selects them by it). */
  readonly revisions = new Map<string, number>();
  reports = 0;
  /** Reports ctrl refused (the agent's reporter sends them again, as this does). */
  readonly failedReports: string[] = [];
  error: unknown;
  readonly #dirty = new Map<string, ResourceObservation>();
  readonly #abort = new AbortController();
  #applied = 0n;
  readonly #done: Promise<void>;

  constructor(region: string, baseUrl: string, from: bigint) {
    const { cluster } = clients(baseUrl);
    const watch = (async () => {
      for await (const res of cluster.watchDeploymentChanges({ region, versionLastSeen: from }, { signal: this.#abort.signal })) {
        const at = now();
        for (const event of res.events) {
          if (event.change.case !== "upsert" || event.change.value.spec.case !== "deployment") continue;
          const { id, spec } = event.change.value;
          const image = spec.value.workload?.image ?? "";
          const replicas = spec.value.replicas;
          const key = `${id}@${image}`;
          if (!this.received.has(key)) this.received.set(key, at);
          this.revisions.set(id, Number(spec.value.revision));
          this.#dirty.set(
            id,
            create(ResourceObservationSchema, {
              type: ResourceType.DEPLOYMENT,
              id,
              appliedVersion: event.version,
              observedImage: image,
              desiredReplicas: replicas,
              updatedReplicas: replicas,
              readyReplicas: replicas,
              availableReplicas: replicas,
            }),
          );
        }
        this.#applied = res.version;
      }
    })();
    const report = (async () => {
      while (!this.#abort.signal.aborted) {
        const started = now();
        if (this.#dirty.size > 0) {
          const batch = [...this.#dirty.values()].slice(0, REPORT_BATCH);
          for (const o of batch) this.#dirty.delete(o.id);
          const sentAt = now();
          try {
            await cluster.reportObservedState({ region, appliedVersion: this.#applied, observations: batch }, { signal: this.#abort.signal });
          } catch (error) {
            if (this.#abort.signal.aborted) return;
            // As the agent's reporter does: the batch goes back (unless newer news replaced it) and is sent again.
            this.failedReports.push(error instanceof Error ? error.message : String(error));
            for (const o of batch) if (!this.#dirty.has(o.id)) this.#dirty.set(o.id, o);
            await sleep(REPORT_INTERVAL_MS);
            continue;
          }
          this.reports++;
          const answeredAt = now();
          for (const o of batch) {
            const key = `${o.id}@${o.observedImage}`;
            if (!this.reported.has(key)) this.reported.set(key, sentAt);
            if (!this.answered.has(key)) this.answered.set(key, answeredAt);
          }
        }
        await sleep(Math.max(0, started + REPORT_INTERVAL_MS - now()));
      }
    })();
    this.#done = Promise.all([watch, report]).then(
      () => undefined,
      (error: unknown) => {
        if (!this.#abort.signal.aborted) this.error = error;
      },
    );
  }

  async close(): Promise<void> {
    this.#abort.abort();
    await this.#done;
  }
}

/**
 * A TCP proxy in front of the database server that counts the commands a client sends
 * (COM_QUERY, prepared statements' executes: each a packet with sequence id 0), so one
 * ctrl's queries are counted apart from every other client of a shared server.
 */
class QueryCountingProxy {
  queries = 0;
  /** Commands by statement shape (text with its literals as ?; a prepared execute by its command). */
  readonly byStatement = new Map<string, number>();
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();

  private constructor(server: net.Server) {
    this.#server = server;
  }

  static async start(target: URL): Promise<{ proxy: QueryCountingProxy; port: number }> {
    const server = net.createServer();
    const proxy = new QueryCountingProxy(server);
    server.on("connection", (client) => proxy.#relay(client, target));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return { proxy, port: (server.address() as net.AddressInfo).port };
  }

  #relay(client: net.Socket, target: URL): void {
    const server = net.connect(Number(target.port || 3306), target.hostname);
    for (const s of [client, server]) {
      this.#sockets.add(s);
      s.on("close", () => this.#sockets.delete(s));
      s.on("error", () => {
        client.destroy();
        server.destroy();
      });
    }
    server.pipe(client);
    let pending: Buffer = Buffer.alloc(0);
    client.on("data", (chunk: Buffer) => {
      server.write(chunk);
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      while (pending.length >= 4 && pending.length >= 4 + pending.readUIntLE(0, 3)) {
        const length = pending.readUIntLE(0, 3);
        const command = pending[4];
        // 0x03 COM_QUERY, 0x17 COM_STMT_EXECUTE (the handshake response has sequence id 1).
        if (pending[3] === 0 && (command === 0x03 || command === 0x17)) {
          this.queries++;
          const shape = command === 0x03 ? statementShape(pending.subarray(5, Math.min(4 + length, 165)).toString("latin1")) : "(prepared statement execute)";
          this.byStatement.set(shape, (this.byStatement.get(shape) ?? 0) + 1);
        }
        pending = pending.subarray(4 + length);
      }
    });
    client.on("end", () => server.end());
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** A statement's text with its literals as `?`, cut to 100 characters: what a query count is grouped by. */
function statementShape(text: string): string {
  return text
    .replace(/'(?:[^'\\]|\\.)*'?/g, "?")
    .replace(/\b\d+\b/g, "?")
    .replace(/\s+/g, " ")
    .replace(/\?(, \?)+/g, "?, …")
    .slice(0, 100);
}

/** Creates or updates deployments `ids` with `image`, WRITERS at a time. */
export async function writeAll(baseUrl: string, op: "create" | "update", ids: string[], regions: string[], image: string, strategy: object): Promise<void> {
  const { deployments } = clients(baseUrl);
  let next = 0;
  await Promise.all(
    Array.from({ length: WRITERS }, async () => {
      for (let i = next++; i < ids.length; i = next++) {
        const deployment = { id: ids[i]!, namespace: "bench", image, port: 8080, regions: regions.map((region) => ({ region, replicas: 2 })), strategy };
        if (op === "create") await deployments.createDeployment({ deployment });
        else await deployments.updateDeployment({ deployment });
      }
    }),
  );
}

/** Active rollouts by state name. */
export async function active(store: Store): Promise<string> {
  const counts = await store.rollouts.countActive();
  return [...counts].map(([state, n]) => `${RolloutState[state]} ${n}`).join(", ") || "none";
}

export async function noneActive(store: Store): Promise<boolean> {
  return [...(await store.rollouts.countActive()).values()].every((n) => n === 0);
}

/**
 * Waits until every agent reported every deployment of `ids` at `image` and no rollout is
 * active; fails naming the active ones after `timeoutMs`, or with an agent's error.
 */
export async function settleRollouts(
  store: Store,
  agents: readonly { error?: unknown; reported: { has(key: string): boolean } }[],
  ids: readonly string[],
  image: string,
  timeoutMs: number,
): Promise<void> {
  await waitFor(
    `${ids.length} rollouts of ${image} to end`,
    async () => {
      for (const a of agents) if (a.error) throw a.error;
      return agents.every((a) => ids.every((id) => a.reported.has(`${id}@${image}`))) && (await noneActive(store));
    },
    timeoutMs,
    200,
  ).catch(async (error: unknown) => {
    throw new Error(`${error instanceof Error ? error.message : String(error)} (active: ${await active(store)})`);
  });
}

/** (a): the hand-off latencies of every deployment's two wave ends, in ms. */
async function handoff(ctx: BenchContext, count: number): Promise<{ samples: number[]; fromAnswer: number[]; notes: string }> {
  const db = await createBenchDatabase(ctx.serverUrl, "b12a");
  let ctrl: CtrlProcess | undefined;
  let store: Store | undefined;
  const agents: SimulatedAgent[] = [];
  try {
    await migrate(db.url);
    store = await Store.open(db.url, { rollouts: storeDecisions });
    ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs }, { cpuProfileDir: ctx.cpuProfileDir });
    const regionNames = Array.from({ length: REGIONS }, (_, i) => `r${i}`);
    const { regions } = clients(ctrl.url);
    for (const [i, name] of regionNames.entries()) await regions.createRegion({ region: { name, labels: { wave: WAVE_OF(i) } } });
    for (const name of regionNames) agents.push(new SimulatedAgent(name, ctrl.url, 0n));
    const ids = Array.from({ length: count }, (_, i) => `roll-${String(i).padStart(5, "0")}`);
    const s = store;
    const settle = (image: string) => settleRollouts(s, agents, ids, image, 600_000);
    // The creation rolls out too (the same waves): it warms ctrl up and gives every region the deployments.
    await writeAll(ctrl.url, "create", ids, regionNames, "app:v1", THREE_WAVES);
    await settle("app:v1");
    log(`B12: ${fmtInt(count)} deployments created and rolled out over ${REGIONS} regions`);

    const t0 = now();
    await writeAll(ctrl.url, "update", ids, regionNames, "app:v2", THREE_WAVES);
    await settle("app:v2");
    const seconds = (now() - t0) / 1000;
    const [unsucceeded] = await s.database.db
      .selectFrom("rollouts")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("state", "!=", RolloutState.SUCCEEDED)
      .execute();
    if (Number(unsucceeded?.n) > 0) throw new Error(`B12: ${unsucceeded?.n} rollouts did not succeed`);

    const byWave = ["canary", "early", "rest"].map((wave) => agents.filter((_, i) => WAVE_OF(i) === wave));
    const samples: number[] = [];
    const fromAnswer: number[] = [];
    for (const id of ids) {
      const key = `${id}@app:v2`;
      for (let w = 0; w + 1 < byWave.length; w++) {
        // The completing report: the last of the wave's regions to say RUNNING.
        const last = byWave[w]!.reduce((a, b) => (b.reported.get(key)! > a.reported.get(key)! ? b : a));
        const next = Math.min(...byWave[w + 1]!.map((a) => a.received.get(key)!));
        samples.push(next - last.reported.get(key)!);
        fromAnswer.push(next - last.answered.get(key)!);
      }
    }
    const reports = agents.reduce((n, a) => n + a.reports, 0);
    const failed = agents.flatMap((a) => a.failedReports);
    const failures = failed.length ? `; ${failed.length} reports failed and were sent again (first: ${failed[0]})` : "";
    return {
      samples,
      fromAnswer,
      notes: `${fmtInt(count)} deployments updated in ${seconds.toFixed(1)} s (${WRITERS} writers; every rollout SUCCEEDED), ${fmtInt(reports)} reports over both rollouts${failures}`,
    };
  } finally {
    for (const a of agents) await a.close();
    await ctrl?.stop();
    await store?.close();
    await db.drop();
  }
}

interface Rest {
  qps: number;
  pollerQps: number;
  /** Queries/s by statement shape. */
  statements: Map<string, number>;
  memory: ChildMemory;
  /** The highest RSS during the window (VmHWM; no forced GC). */
  peakRss: number;
}

/** (b): a ctrl's queries/s and peak RSS over `windowMs`, and its memory after forced GCs. */
async function atRest(ctrl: CtrlProcess, proxy: QueryCountingProxy, windowMs: number): Promise<Rest> {
  ctrl.resetPeakRss();
  const q0 = proxy.queries;
  const s0 = new Map(proxy.byStatement);
  const p0 = (await ctrl.metrics()).pollerQueries;
  const t0 = now();
  await sleep(windowMs);
  const seconds = (now() - t0) / 1000;
  const statements = new Map([...proxy.byStatement].map(([shape, n]) => [shape, (n - (s0.get(shape) ?? 0)) / seconds]));
  const rest = { qps: (proxy.queries - q0) / seconds, pollerQps: ((await ctrl.metrics()).pollerQueries - p0) / seconds, statements };
  const peakRss = ctrl.peakRss();
  return { ...rest, peakRss, memory: await ctrl.memory({ reduce: true }) };
}

async function waiting(ctx: BenchContext, count: number, windowMs: number) {
  const db = await createBenchDatabase(ctx.serverUrl, "b12b");
  const proxies: QueryCountingProxy[] = [];
  const ctrls: CtrlProcess[] = [];
  let agent: SimulatedAgent | undefined;
  let store: Store | undefined;
  const viaProxy = async () => {
    const { proxy, port } = await QueryCountingProxy.start(new URL(ctx.serverUrl));
    proxies.push(proxy);
    const url = new URL(db.url);
    url.host = `127.0.0.1:${port}`;
    // No memory release of ctrl's own between the measurements: they compare RSS with and without rollouts.
    const ctrl = await CtrlProcess.start({ databaseUrl: url.toString(), pollIntervalMs: ctx.pollIntervalMs, memoryReleaseGrowthBytes: 0 });
    ctrls.push(ctrl);
    return { ctrl, proxy };
  };
  try {
    await migrate(db.url);
    store = await Store.open(db.url, { rollouts: storeDecisions });
    const measured = await viaProxy();
    // The replica the rollouts are staged through and reported to: its work is not the measured ctrl's.
    const other = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: ctx.pollIntervalMs });
    ctrls.push(other);
    const { regions } = clients(other.url);
    for (const name of ["bake", "rest"]) await regions.createRegion({ region: { name } });
    agent = new SimulatedAgent("bake", other.url, 0n);
    await sleep(2000);
    const without = await atRest(measured.ctrl, measured.proxy, windowMs);
    log(`B12: no rollouts: ${without.qps.toFixed(2)} queries/s, RSS ${fmtBytes(without.memory.rss)}`);
    // The peak while the rollouts are staged and reported (the measured ctrl follows both).
    measured.ctrl.resetPeakRss();

    const ids = Array.from({ length: count }, (_, i) => `bake-${String(i).padStart(5, "0")}`);
    const t0 = now();
    await writeAll(other.url, "create", ids, ["bake", "rest"], "app:v1", BAKE);
    const s = store;
    const baking = async () => {
      const [row] = await s.database.db
        .selectFrom("rollouts")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("state", "=", RolloutState.PROGRESSING)
        .where("due_at", ">", Date.now() + 30 * 60_000)
        .execute();
      return Number(row?.n);
    };
    await waitFor(`${count} rollouts baking`, async () => (await baking()) === count, 600_000, 500);
    log(`B12: ${fmtInt(count)} rollouts baking (staged and reported in ${((now() - t0) / 1000).toFixed(0)} s)`);
    await agent.close();
    agent = undefined;
    const stagingPeakRss = measured.ctrl.peakRss();
    // The measured replica has followed the reports through its status feed, which looks again
    // for skipped event numbers for 10 s (its gap timeout): measure the state at rest after that.
    await sleep(12_000);
    const baked = await atRest(measured.ctrl, measured.proxy, windowMs);
    log(`B12: ${fmtInt(count)} baking: ${baked.qps.toFixed(2)} queries/s, RSS ${fmtBytes(baked.memory.rss)}`);

    // A replica started over them, the others gone (they give the driver's lease up): it takes
    // the lease at once, and its start looks at every progressing rollout once.
    for (const c of [measured.ctrl, other]) await c.stop();
    const started = await viaProxy();
    const s0 = now();
    let last = -1;
    await waitFor(
      "the new replica's start-up look to end",
      async () => {
        const q = started.proxy.queries;
        const quiet = q - last < count / 100 + 20;
        last = q;
        return quiet && now() - s0 > 2000;
      },
      600_000,
      1000,
    );
    const startupQueries = started.proxy.queries;
    const startupSeconds = (now() - s0) / 1000;
    const fresh = await atRest(started.ctrl, started.proxy, windowMs);
    log(`B12: replica started over ${fmtInt(count)} baking: ${startupQueries} queries in ${startupSeconds.toFixed(1)} s, then ${fresh.qps.toFixed(2)}/s`);
    return { without, baked, stagingPeakRss, fresh, startupQueries, startupSeconds };
  } finally {
    await agent?.close();
    for (const c of ctrls) await c.stop();
    for (const p of proxies) await p.close();
    await store?.close();
    await db.drop();
  }
}

export async function runB12(ctx: BenchContext): Promise<BenchResult> {
  const deployments = ctx.quick ? 100 : 1000;
  const waitingRollouts = ctx.quick ? 500 : 10_000;
  // A full window is the retention jobs' interval: each window then holds one run of them,
  // whatever its phase (shorter windows held one or none, by chance, and read 1.00× or 1.13×).
  const windowMs = ctx.quick ? 5000 : DEFAULT_RETENTION_INTERVAL_MS;

  const a = await handoff(ctx, deployments);
  const p99 = percentile(a.samples, 99);
  log(`B12: wave hand-off p50 ${fmtMs(median(a.samples))}, p99 ${fmtMs(p99)} over ${a.samples.length}`);
  const b = await waiting(ctx, waitingRollouts, windowMs);
  const rss = b.baked.memory.rss - b.without.memory.rss;
  const peak = b.baked.peakRss - b.without.peakRss;
  const fmtSigned = (bytes: number) => `${bytes >= 0 ? "+" : ""}${fmtBytes(bytes)}`;
  const rows: Row[] = [
    {
      benchmark: `B12 wave hand-off p99: last report completing a wave → next wave's first region receives it (${fmtInt(deployments)} deployments, ${REGIONS} regions, 3 waves, bake 0)`,
      measured: fmtMs(p99),
      reference: `min ${fmtMs(Math.min(...a.samples))}, p50 ${fmtMs(median(a.samples))}, max ${fmtMs(Math.max(...a.samples))} (${fmtInt(a.samples.length)} hand-offs); from the report's answer: p50 ${fmtMs(median(a.fromAnswer))}, p99 ${fmtMs(percentile(a.fromAnswer, 99))}`,
      ratio: "—",
      target: `≤ ${TARGET_HANDOFF_P99_MS} ms`,
      met: p99 <= TARGET_HANDOFF_P99_MS,
    },
    {
      benchmark: `B12 ctrl database queries/s, ${fmtInt(waitingRollouts)} rollouts baking (1 h), no reports`,
      measured: `${b.baked.qps.toFixed(2)}/s`,
      reference: `no rollouts: ${b.without.qps.toFixed(2)}/s`,
      ratio: fmtRatio(b.baked.qps / b.without.qps),
      target: "within 10% of none (≤ 1.10×)",
      met: b.baked.qps <= b.without.qps * 1.1,
    },
    {
      benchmark: `B12 ctrl RSS, ${fmtInt(waitingRollouts)} rollouts baking (after forced GCs)`,
      measured: fmtSigned(rss),
      reference: `no rollouts: ${fmtBytes(b.without.memory.rss)} → ${fmtBytes(b.baked.memory.rss)}`,
      ratio: fmtRatio(b.baked.memory.rss / b.without.memory.rss),
      target: `≤ +${fmtBytes(TARGET_RSS_BYTES)}`,
      met: rss <= TARGET_RSS_BYTES,
    },
    {
      benchmark: `B12 ctrl peak RSS over the window, ${fmtInt(waitingRollouts)} rollouts baking (VmHWM, no forced GC)`,
      measured: fmtSigned(peak),
      reference: `no rollouts: peak ${fmtBytes(b.without.peakRss)} → ${fmtBytes(b.baked.peakRss)}; while they were staged and reported: peak ${fmtBytes(b.stagingPeakRss)} (${fmtSigned(b.stagingPeakRss - b.without.peakRss)})`,
      ratio: fmtRatio(b.baked.peakRss / b.without.peakRss),
      target: `≤ +${fmtBytes(TARGET_RSS_BYTES)}`,
      met: peak <= TARGET_RSS_BYTES,
    },
  ];
  const mem = (m: ChildMemory) => `RSS ${fmtBytes(m.rss)}, heap ${fmtBytes(m.heapUsed)}`;
  const shapes = new Set([...b.without.statements.keys(), ...b.baked.statements.keys()]);
  const moved = [...shapes]
    .map((shape) => ({ shape, without: b.without.statements.get(shape) ?? 0, baked: b.baked.statements.get(shape) ?? 0 }))
    .filter((m) => (Math.abs(m.baked - m.without) * windowMs) / 1000 >= 3)
    .map((m) => `\`${m.shape}\` ${m.without.toFixed(2)} → ${m.baked.toFixed(2)}/s`);
  return {
    rows,
    notes: [
      `B12 hand-off: ${a.notes}; measured on the update's rollout (app:v1 → app:v2; the creation's rollout before it is the warm-up). ` +
        `From the send of the report that makes the last region of a wave RUNNING to the receive time of the deployment's new revision on the watch stream of the next wave's first region ` +
        `(the outbox row's commit as an agent sees it: it includes the report's own handling and the stream's delivery). ` +
        `Agents and rollouts on the same ctrl; agents report as the agent's reporter does (≤ ${REPORT_BATCH} observations a call, ≤ one call per ${REPORT_INTERVAL_MS} ms; that pacing comes before the send, outside the figure).`,
      `B12 waiting rollouts: queries counted by a proxy between the measured ctrl and the server (COM_QUERY and prepared executes of its own connections; other clients of the shared server not counted); ${(windowMs / 1000).toFixed(0)} s windows; ` +
        `rollouts staged and reported through a second ctrl, as another replica's would be. Without: ${b.without.qps.toFixed(2)} queries/s (${b.without.pollerQps.toFixed(2)} of them the change poller's), ${mem(b.without.memory)}; ` +
        `with ${fmtInt(waitingRollouts)} baking: ${b.baked.qps.toFixed(2)} queries/s (poller ${b.baked.pollerQps.toFixed(2)}), ${mem(b.baked.memory)}. Memory after memory-reducing forced GCs, ctrl's own memory release off. ` +
        `Statements whose count in a window moved by 3 or more: ${moved.join("; ") || "none"}.`,
      `B12: a replica started over the ${fmtInt(waitingRollouts)} baking rollouts ran ${fmtInt(b.startupQueries)} queries in its first ${b.startupSeconds.toFixed(0)} s (its start-up look at every progressing rollout), then ${b.fresh.qps.toFixed(2)} queries/s, ${mem(b.fresh.memory)}.`,
    ],
  };
}
