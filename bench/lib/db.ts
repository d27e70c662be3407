// Benchmark databases: one fresh MySQL/MariaDB database per benchmark, dropped at the end,
// and fast bulk seeding that bypasses the API (multi-row INSERTs inside transactions).
import { randomBytes } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import {
  AutoscalingSchema,
  DeploymentSchema,
  DesiredResourceSchema,
  ProbeSchema,
  ResourceType,
  SecretEnvVarSchema,
  WorkloadSchema,
} from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { regionSecretEnv, type SecretKeyRing, storedParts, Store, valueContext } from "@flotilla/store";
import { createConnection, type Connection } from "mysql2/promise";
import { storeDecisions } from "@flotilla/ctrl/rollouts";
import { projectName, projectNamespace } from "./projects.ts";

export interface BenchDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

const created = new Set<BenchDatabase>();

/** Creates database `flotilla_bench_<pid>_<suffix>` on the server of `serverUrl`. */
export async function createBenchDatabase(serverUrl: string, suffix: string): Promise<BenchDatabase> {
  const name = `flotilla_bench_${process.pid}_${suffix}`;
  const admin = await createConnection({ uri: serverUrl });
  try {
    await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await admin.query(`CREATE DATABASE \`${name}\``);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const db: BenchDatabase = {
    name,
    url: url.toString(),
    async drop() {
      created.delete(db);
      const c = await createConnection({ uri: serverUrl });
      try {
        await c.query(`DROP DATABASE IF EXISTS \`${name}\``);
      } finally {
        await c.end();
      }
    },
  };
  created.add(db);
  return db;
}

/** Drops every database this process created and has not dropped yet (best effort). */
export async function dropAll(): Promise<void> {
  for (const db of [...created]) await db.drop().catch(() => undefined);
}

/** Creates the schema (migrations) in a fresh database. */
export async function migrate(url: string): Promise<void> {
  const store = await Store.open(url, { rollouts: storeDecisions });
  await store.close();
}

export async function serverVersion(serverUrl: string): Promise<string> {
  const c = await createConnection({ uri: serverUrl });
  try {
    const [rows] = await c.query("SELECT VERSION() AS v");
    return String((rows as { v: string }[])[0]!.v);
  } finally {
    await c.end();
  }
}

export function deploymentId(i: number): string {
  return `svc-${String(i).padStart(6, "0")}`;
}

/** A typical deployment: a few env vars, a port, requests. */
/** `padBytes`: more environment (values of up to 32 KB, ctrl's limit), for large resources. */
function workload(i: number, padBytes = 0) {
  const pad = Array.from({ length: Math.ceil(padBytes / 32_768) }, (_, n) => ({
    name: `PAD${n}`,
    value: randomBytes(Math.min(32_768, padBytes - n * 32_768) / 2).toString("hex"),
  }));
  return {
    image: `app-${i % 100}:1.${i % 17}.${i % 7}`,
    command: [],
    env: [{ name: "LOG_LEVEL", value: "info" }, { name: "SERVICE_NAME", value: deploymentId(i) }, { name: "FEATURE_FLAGS", value: "a,b,c" }, ...pad],
    port: 8080,
    cpuMillicores: 250,
    memoryMib: 256,
  };
}

/**
 * A share of richer deployments: every (1 / `fraction`)-th one carries five secret env values
 * (sealed under `ring` as ctrl stores them), readiness and liveness HTTP probes, and an
 * autoscaler owning its replicas (so the agent also applies a Secret and an HPA for it).
 */
export interface ServiceMix {
  /** 0 < fraction ≤ 1, e.g. 0.1: every 10th deployment. */
  fraction: number;
  ring: SecretKeyRing;
  /**
   * How the desired state carries the values: "sealed", as ctrl stores them (the default: the
   * names and checksum in the body, the values sealed as one in their column); "plain-env", as
   * plain env instead (a control: what the values cost when they are not secret); "none", no
   * secret env at all, the probes and the autoscaler alone (what any design of the values adds to).
   */
  values?: "sealed" | "plain-env" | "none";
}

export const MIX_SECRET_VALUES = 5;
const MIX_AUTOSCALING = create(AutoscalingSchema, { minReplicas: 2, maxReplicas: 10, targetCpuUtilizationPercent: 70 });

/** Every how many-th deployment `mix` makes richer. */
export function mixEvery(mix: ServiceMix): number {
  if (!(mix.fraction > 0 && mix.fraction <= 1)) throw new Error(`a service mix's fraction must be in (0, 1], got ${mix.fraction}`);
  return Math.round(1 / mix.fraction);
}

/**
 * What a mixed deployment adds to its workload: the secret env as ctrl stores it (fingerprinted;
 * sealed under the data key in the deployment, for the region's agent in its desired state), the probes.
 */
function mixedWorkload(id: string, mix: ServiceMix, regionId: number, env: { name: string; value: string }[]) {
  const { ring } = mix;
  const values = Array.from({ length: MIX_SECRET_VALUES }, (_, n) => ({
    name: `SECRET_${n}`,
    // A random 32-byte credential, as a password or an API key might be.
    value: randomBytes(32).toString("base64url"),
  }));
  const secretEnv = (seal: (context: string, value: string) => Uint8Array) =>
    values.map(({ name, value }) =>
      // Revision 1: the revision the deployments are seeded at.
      create(SecretEnvVarSchema, { name, sealed: seal(valueContext(id, name, 1), value), fingerprint: ring.fingerprint(id, name, value) }),
    );
  const probe = (path: string) => create(ProbeSchema, { handler: { case: "httpGet", value: { path, port: 8080 } } });
  const probes = { readinessProbe: probe("/ready"), livenessProbe: probe("/healthz") };
  if (mix.values === "none") return { deployment: probes, desired: probes };
  if (mix.values === "plain-env") return { deployment: { ...probes, env: [...env, ...values] }, desired: { ...probes, env: [...env, ...values] } };
  const deployment = { ...probes, secretEnv: secretEnv((context, value) => ring.seal(context, value)) };
  // As ctrl stores them for the region's agent: the names, and the values sealed as one.
  const named = create(WorkloadSchema, { secretEnv: values.map(({ name }) => create(SecretEnvVarSchema, { name })) });
  const forRegion = regionSecretEnv(
    ring,
    { id: regionId, epoch: 0 },
    id,
    named,
    values.map(({ name, value }) => ({ value: Buffer.from(value), fingerprint: ring.fingerprint(id, name, value) })),
  );
  return {
    deployment,
    desired: { ...probes, secretEnv: forRegion.secretEnv, secretEnvSealed: forRegion.secretEnvSealed, secretEnvChecksum: forRegion.secretEnvChecksum },
  };
}

/**
 * Seeds `count` running deployments placed in one new region, exactly as `count` creates
 * through the API would leave the tables: deployments, placements, desired_resources (with
 * versions 1..count) and regions.head_version = count. The outbox (deployment_changes) is
 * left empty, as if retention had pruned it; SyncDesiredState does not read it.
 */
export async function seedRegion(
  url: string,
  region: string,
  count: number,
  /**
   * `padBytes` of environment more per resource; ids from deploymentId(`firstIndex`) (another
   * region's may not overlap); `mix`: a share of richer deployments (see ServiceMix);
   * `projects`: the deployments spread over that many projects (projects.ts), else all in "default".
   */
  { padBytes = 0, firstIndex = 0, mix, projects }: { padBytes?: number; firstIndex?: number; mix?: ServiceMix; projects?: number } = {},
): Promise<{ regionId: number; head: number; bodyBytes: number }> {
  const conn = await createConnection({ uri: url });
  try {
    const now = Date.now();
    await conn.query("INSERT INTO regions (name, head_version, create_time) VALUES (?, ?, ?)", [region, count, now]);
    const [idRows] = await conn.query("SELECT id FROM regions WHERE name = ?", [region]);
    const regionId = Number((idRows as { id: number }[])[0]!.id);
    // Multi-row INSERTs of at most a few MB (binary travels hex-escaped; the server caps a packet).
    const chunk = padBytes > 0 ? Math.max(1, Math.floor(4_000_000 / padBytes)) : 2000;
    const perTransaction = 20_000;
    const every = mix ? mixEvery(mix) : 0;
    let bodyBytes = 0;
    for (let start = 0; start < count; start += perTransaction) {
      await conn.beginTransaction();
      for (let from = start; from < Math.min(count, start + perTransaction); from += chunk) {
        const deployments: unknown[][] = [];
        const placements: unknown[][] = [];
        const desired: unknown[][] = [];
        for (let i = from; i < Math.min(count, from + chunk); i++) {
          const id = deploymentId(firstIndex + i);
          const namespace = projects ? projectNamespace(i % projects) : `team-${i % 50}`;
          const mixed = mix !== undefined && i % every === 0;
          const base = workload(i, padBytes);
          const rich = mixed ? mixedWorkload(id, mix, regionId, base.env) : undefined;
          const w = { ...base, ...rich?.deployment };
          const replicas = 1 + (i % 5);
          const autoscaling = mixed ? MIX_AUTOSCALING : undefined;
          const project = projects ? projectName(i % projects) : undefined;
          const deployment = create(DeploymentSchema, { id, project, namespace, ...w, regions: [{ region, replicas, autoscaling }] });
          deployments.push([id, project ?? "default", 1, Buffer.from(toBinary(DeploymentSchema, deployment)), now, now]);
          placements.push([ResourceType.DEPLOYMENT, id, regionId]);
          const { body, secret_env_sealed } = storedParts(
            create(DesiredResourceSchema, {
              type: ResourceType.DEPLOYMENT,
              id,
              namespace,
              spec: { case: "deployment", value: { workload: { ...w, ...rich?.desired }, replicas, autoscaling } },
            }),
          );
          bodyBytes += body.length;
          desired.push([regionId, ResourceType.DEPLOYMENT, id, namespace, i + 1, Buffer.from(body), secret_env_sealed && Buffer.from(secret_env_sealed)]);
        }
        await conn.query("INSERT INTO deployments (id, project, revision, body, create_time, update_time) VALUES ?", [deployments]);
        await conn.query("INSERT INTO placements (resource_type, resource_id, region_id) VALUES ?", [placements]);
        await conn.query("INSERT INTO desired_resources (region_id, resource_type, resource_id, namespace, version, body, secret_env_sealed) VALUES ?", [
          desired,
        ]);
      }
      await conn.commit();
    }
    return { regionId, head: count, bodyBytes };
  } finally {
    await conn.end();
  }
}

/**
 * The reference for B1: the keyset scan SyncDesiredState runs (same SQL, same page size;
 * here in one consistent-snapshot transaction), straight through mysql2, rows not decoded.
 */
export async function rawKeysetScan(conn: Connection, regionId: number, pageSize: number): Promise<{ rows: number; bytes: number }> {
  await conn.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
  await conn.query("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY");
  try {
    await conn.query("SELECT head_version FROM regions WHERE id = ?", [regionId]);
    let rows = 0;
    let bytes = 0;
    let after: [number, string] = [-1, ""];
    for (;;) {
      const [page] = await conn.query(
        `SELECT resource_type, resource_id, version, body FROM desired_resources
          WHERE region_id = ? AND (resource_type > ? OR (resource_type = ? AND resource_id > ?))
          ORDER BY resource_type, resource_id LIMIT ?`,
        [regionId, after[0], after[0], after[1], pageSize],
      );
      const list = page as { resource_type: number; resource_id: string; body: Buffer }[];
      if (list.length === 0) break;
      rows += list.length;
      for (const r of list) bytes += r.body.length;
      const last = list[list.length - 1]!;
      after = [last.resource_type, last.resource_id];
      if (list.length < pageSize) break;
    }
    return { rows, bytes };
  } finally {
    await conn.query("ROLLBACK");
  }
}
