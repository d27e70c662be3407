// A ctrl process for the benchmarks: Store + startCtrl on a given database, driven over IPC
// by bench/lib/ctrl-process.ts so the client's work and memory stay out of its measurements.
// Run with --expose-gc (the parent does) so "memory" can collect garbage first.
import { startCtrl } from "@flotilla/ctrl";
import { create, toBinary } from "@bufbuild/protobuf";
import { ChangeEventSchema, DeploymentSchema, DesiredResourceSchema, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { Store } from "@flotilla/store";
import { createConnection } from "mysql2/promise";
import type { BurstResult, BurstSpec, ChildConfig, ChildRequest, WriteSpec } from "./lib/ctrl-process.ts";
import { memoryAfterGc, serveParent } from "./lib/ipc.ts";
import { readSecretsKey } from "./lib/secrets-key.ts";
import { now } from "./lib/util.ts";
import { storeDecisions } from "@flotilla/ctrl/rollouts";

const config = JSON.parse(process.env.FLOTILLA_BENCH_CHILD ?? "{}") as ChildConfig;
if (!process.send) throw new Error("ctrl-child.ts must be started by bench/lib/ctrl-process.ts (IPC channel)");

const store = await Store.open(config.databaseUrl, {
  rollouts: storeDecisions,
  ...(config.secretsKeyFile !== undefined && { secrets: readSecretsKey(config.secretsKeyFile) }),
});
// ctrl subscribes to the Store's commits to wake its poller; the bulk burst (B6) writes behind
// the Store's back and calls the same listeners after each of its commits.
const commitListeners: ((regionIds: number[]) => void)[] = [];
const subscribe = store.onCommit.bind(store);
store.onCommit = (listener) => {
  commitListeners.push(listener);
  return subscribe(listener);
};
const ctrl = await startCtrl({
  store,
  adminToken: config.adminToken,
  port: 0,
  shutdownGraceMs: 500,
  pollIntervalMs: config.pollIntervalMs,
  stream: config.stream,
  streamSendTimeoutMs: config.streamSendTimeoutMs,
  tls: config.tls,
  memoryReleaseGrowthBytes: config.memoryReleaseGrowthBytes,
  notifications: config.notifications,
  sso: config.sso,
});

// The commit time of this process's latest write: taken in the Store's commit listener, which
// runs synchronously right after the transaction committed (after ctrl's own listener
// woke the poller), so nothing else can run in between.
let lastCommitAt = 0;
/** The same, per region the commit changed. */
const lastCommitByRegion = new Map<number, number>();
store.onCommit((regionIds) => {
  lastCommitAt = now();
  for (const id of regionIds) lastCommitByRegion.set(id, lastCommitAt);
});

function deployment(w: WriteSpec) {
  return create(DeploymentSchema, {
    id: w.id,
    namespace: w.namespace,
    image: w.image,
    port: 8080,
    regions: [{ region: w.region, replicas: w.replicas }],
  });
}

async function gauge(metric: { get(): Promise<{ values: { value: number }[] }> }): Promise<number> {
  return (await metric.get()).values.reduce((sum, v) => sum + v.value, 0);
}

/**
 * The bulk burst: one writer, `perTransaction` updates per transaction, in the same order as
 * the store mode's rounds, writing the rows store.deployments.update would.
 */
async function bulkBurst(spec: BurstSpec): Promise<BurstResult> {
  const per = spec.perTransaction ?? 100;
  const conn = await createConnection({ uri: config.databaseUrl });
  const updates: { t: BurstSpec["targets"][number]; image: string }[] = [];
  for (let u = 1; u <= spec.rounds; u++) for (const t of spec.targets) updates.push({ t, image: `${spec.imagePrefix}${u}` });
  let firstCommit = 0;
  let transactions = 0;
  const started = now();
  try {
    await conn.query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
    for (let from = 0; from < updates.length; from += per) {
      const chunk = updates.slice(from, from + per);
      const at = Date.now();
      await conn.beginTransaction();
      const [regionRows] = await conn.query("SELECT id, head_version FROM regions WHERE name = ? FOR UPDATE", [spec.region]);
      const region = (regionRows as { id: number; head_version: number }[])[0];
      if (!region) throw new Error(`region ${spec.region} not found`);
      const regionId = Number(region.id);
      let version = Number(region.head_version);
      const deployments = new Map<string, unknown[]>();
      const desired = new Map<string, unknown[]>();
      const changes: unknown[][] = [];
      for (const { t, image } of chunk) {
        version++;
        const d = deployment({ id: t.id, namespace: t.namespace, image, region: spec.region, replicas: t.replicas });
        deployments.set(t.id, [t.id, 1, Buffer.from(toBinary(DeploymentSchema, d)), at, at]);
        // What deploymentKind.desired() builds from such a deployment.
        const resource = create(DesiredResourceSchema, {
          type: ResourceType.DEPLOYMENT,
          id: t.id,
          namespace: t.namespace,
          spec: { case: "deployment", value: { workload: { image, port: d.port }, replicas: t.replicas } },
        });
        desired.set(t.id, [regionId, ResourceType.DEPLOYMENT, t.id, t.namespace, version, Buffer.from(toBinary(DesiredResourceSchema, resource))]);
        resource.version = BigInt(version);
        const event = create(ChangeEventSchema, { version: BigInt(version), change: { case: "upsert", value: resource } });
        changes.push([regionId, version, ResourceType.DEPLOYMENT, t.id, Buffer.from(toBinary(ChangeEventSchema, event)), at]);
      }
      await conn.query(
        "INSERT INTO deployments (id, revision, body, create_time, update_time) VALUES ? ON DUPLICATE KEY UPDATE revision = revision + 1, body = VALUES(body), update_time = VALUES(update_time)",
        [[...deployments.values()]],
      );
      await conn.query(
        "INSERT INTO desired_resources (region_id, resource_type, resource_id, namespace, version, body) VALUES ? ON DUPLICATE KEY UPDATE version = VALUES(version), body = VALUES(body), namespace = VALUES(namespace)",
        [[...desired.values()]],
      );
      await conn.query("INSERT INTO deployment_changes (region_id, version, resource_type, resource_id, body, create_time) VALUES ?", [changes]);
      await conn.query("UPDATE regions SET head_version = ? WHERE id = ?", [version, regionId]);
      await conn.commit();
      lastCommitAt = now();
      if (firstCommit === 0) firstCommit = lastCommitAt;
      transactions++;
      for (const listener of commitListeners) listener([regionId]);
    }
  } finally {
    await conn.end();
  }
  return { writes: updates.length, started, firstCommit, lastCommit: lastCommitAt, transactions };
}

/** Round u updates every target once (image `${imagePrefix}${u}`); writers split the targets. */
async function burst(spec: BurstSpec): Promise<BurstResult> {
  let firstCommit = 0;
  let writes = 0;
  const started = now();
  await Promise.all(
    Array.from({ length: spec.writers }, async (_, writer) => {
      for (let u = 1; u <= spec.rounds; u++) {
        for (let i = writer; i < spec.targets.length; i += spec.writers) {
          const t = spec.targets[i]!;
          await store.deployments.update(
            deployment({ id: t.id, namespace: t.namespace, image: `${spec.imagePrefix}${u}`, region: spec.region, replicas: t.replicas }),
          );
          writes++;
          if (firstCommit === 0) firstCommit = lastCommitAt;
        }
      }
    }),
  );
  return { writes, started, firstCommit, lastCommit: lastCommitAt, transactions: writes };
}

async function handle(req: ChildRequest): Promise<unknown> {
  switch (req.op) {
    case "ping":
      return { t: now() };
    case "metrics": {
      const m = ctrl.metrics;
      return {
        pollerQueries: await gauge(m.pollerQueries),
        watchStreams: await gauge(m.watchStreams),
        watchEvents: await gauge(m.watchEvents),
        watchBookmarks: await gauge(m.watchBookmarks),
        watchEndedForLag: await gauge(m.watchEndedForLag),
        boundsEnforced: Object.fromEntries((await m.connectionBounds.get()).values.map((v) => [String(v.labels.reason), v.value])),
        memoryReleases: await gauge(m.memoryReleases),
      };
    }
    case "memory":
      return memoryAfterGc(req.reduce);
    case "cpu":
      return process.cpuUsage();
    case "update":
    case "create": {
      lastCommitAt = 0;
      if (req.op === "update") await store.deployments.update(deployment(req.write));
      else await store.deployments.create(deployment(req.write));
      if (lastCommitAt === 0) throw new Error(`${req.op} of ${req.write.id} changed nothing`);
      return { t: lastCommitAt };
    }
    case "lastCommit":
      return { t: lastCommitByRegion.get(req.regionId) };
    case "burst":
      return req.burst.mode === "bulk" ? bulkBurst(req.burst) : burst(req.burst);
    case "shutdown":
      await ctrl.shutdown();
      await store.close();
      setImmediate(() => process.exit(0));
      return {};
  }
}

serveParent(handle, { url: ctrl.url, pid: process.pid });
