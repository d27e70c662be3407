// The Kubernetes emulator in a process of its own for the agent benchmarks (B6, B7), driven over
// IPC by bench/lib/emulator-process.ts. Rollouts as shipped. For B7 it seeds its store with what
// the agent's first run would have left there (see seed()).
import { fromBinary } from "@bufbuild/protobuf";
import { buildManifests, DESIRED_VERSION_ANNOTATION, FIELD_MANAGER } from "@flotilla/agent";
import { KubernetesEmulator, type KubeObject } from "@flotilla/k8s-emulator";
import { DesiredResourceSchema, type DesiredResource } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { secretEnvContext, unpackValues } from "@flotilla/runtime/sealed-values";
import type { SecretKeyRing } from "@flotilla/store";
import { createConnection } from "mysql2/promise";
import type { DeploymentWant, EmulatorChildConfig, EmulatorRequest, EmulatorState, SeedResult, SeedSpec } from "./lib/emulator-process.ts";
import { memoryAfterGc, serveParent } from "./lib/ipc.ts";
import { readSecretsKey } from "./lib/secrets-key.ts";
import { now, sleep } from "./lib/util.ts";

const config = JSON.parse(process.env.FLOTILLA_BENCH_EMULATOR ?? "{}") as EmulatorChildConfig;
if (!process.send) throw new Error("emulator-child.ts must be started by bench/lib/emulator-process.ts (IPC channel)");

// No Event objects: neither benchmark reads them, and for B7's 100,000 Deployments they would be
// most of the emulator's writes (its ReplicaSets and pods are made as shipped).
const emulator = await KubernetesEmulator.start({ eventLimit: 0, ...(config.requestLogLimit !== undefined && { requestLogLimit: config.requestLogLimit }) });

const KINDS = [
  { apiVersion: "v1", kind: "Namespace" },
  { apiVersion: "apps/v1", kind: "Deployment" },
  { apiVersion: "v1", kind: "Service" },
  { apiVersion: "v1", kind: "Secret" },
  { apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler" },
];
const YIELD_EVERY = 500;
/** Time without any write after which the rollouts count as settled (several pod-readiness delays). */
const SETTLED_AFTER_MS = 4 * emulator.options.rolloutDelayMs + 500;

function state(): EmulatorState {
  return { resourceVersion: emulator.resourceVersion, objects: Object.fromEntries(KINDS.map((k) => [k.kind, emulator.list(k).length])) };
}

/**
 * Opens the resource's secret values in place (`sealed` as one for the region's agent, as ctrl
 * stores them beside the body), each with its fingerprint, from which the agent's manifests take the same pod
 * template checksum as from the one delivered with the seal.
 */
function openSecrets(resource: DesiredResource, ring: SecretKeyRing, sealed: Uint8Array | null): void {
  const workload = resource.spec.case === "deployment" ? resource.spec.value.workload : undefined;
  if (!workload || workload.secretEnv.length === 0) return;
  if (!sealed) throw new Error(`${resource.id} has secret names but no sealed values`);
  const names = workload.secretEnv.map((s) => s.name);
  const values = unpackValues(ring.openBytes(secretEnvContext(resource.id, names), sealed), names.length);
  workload.secretEnv.forEach((s, i) => {
    s.value = values[i]!.toString("utf8");
    s.fingerprint = ring.fingerprint(resource.id, s.name, s.value);
  });
  workload.secretEnvChecksum = "";
}

/**
 * Fills the store with exactly what the agent of `region` applies on its first run, as that run
 * leaves it: every desired resource of the region, read from ctrl's table, built into objects
 * by the agent's own manifest builder; each namespace created (as the agent creates a missing
 * one) and each object server-side applied by the agent's field manager, through the emulator's
 * own apply (the API's apply without HTTP: defaults, managedFields, generation); secret values
 * opened with `secretsKeyFile`, as the agent receives them. The emulator's
 * rollout controller then runs every Deployment's rollout to completion, as it would have.
 * HorizontalPodAutoscalers are applied last, once those rollouts settled: the emulator's
 * autoscaler copies every HPA of a Deployment's namespace on each event of that Deployment, so
 * applied amid 100,000 rollouts (10,000 HPAs) they kept seeding busy for over 20 minutes (5
 * without them); afterwards only their own scale-ups pay it. The store ends as the agent's first
 * run leaves it either way.
 */
async function seed({ databaseUrl, region, secretsKeyFile }: SeedSpec): Promise<SeedResult> {
  const started = performance.now();
  const ring = secretsKeyFile === undefined ? undefined : readSecretsKey(secretsKeyFile);
  const conn = await createConnection({ uri: databaseUrl, supportBigNumbers: true });
  const namespaces = new Set(emulator.list({ apiVersion: "v1", kind: "Namespace" }).map((n) => n.metadata.name));
  const applied: Record<string, number> = {};
  const autoscalers: KubeObject[] = [];
  const apply = (kube: KubeObject) => {
    emulator.apply(kube, { manager: FIELD_MANAGER });
    applied[kube.kind] = (applied[kube.kind] ?? 0) + 1;
  };
  let resources = 0;
  let createdNamespaces = 0;
  try {
    const [regionRows] = await conn.query("SELECT id FROM regions WHERE name = ?", [region]);
    const regionId = (regionRows as { id: number }[])[0]?.id;
    if (regionId === undefined) throw new Error(`region ${region} not found`);
    // 100,000 rows are about 15 MB: one query.
    const [rows] = await conn.query("SELECT version, body, secret_env_sealed FROM desired_resources WHERE region_id = ?", [regionId]);
    for (const row of rows as { version: number | string; body: Buffer; secret_env_sealed: Buffer | null }[]) {
      const resource = fromBinary(DesiredResourceSchema, row.body);
      resource.version = BigInt(row.version);
      if (ring) openSecrets(resource, ring, row.secret_env_sealed);
      for (const object of buildManifests(resource, region).apply) {
        const kube = object as KubeObject;
        if (object.kind === "Namespace") {
          if (namespaces.has(object.metadata.name)) continue;
          emulator.create(kube, { manager: FIELD_MANAGER });
          namespaces.add(object.metadata.name);
          createdNamespaces++;
        } else if (object.kind === "HorizontalPodAutoscaler") autoscalers.push(kube);
        else apply(kube);
      }
      // Lets the rollout controller work as the objects arrive.
      if (++resources % YIELD_EVERY === 0) await new Promise((resolve) => setImmediate(resolve));
    }
  } finally {
    await conn.end();
  }
  await settled();
  if (autoscalers.length > 0) {
    for (const [i, kube] of autoscalers.entries()) {
      apply(kube);
      if ((i + 1) % YIELD_EVERY === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    await settled();
  }
  const deployments = emulator.list({ apiVersion: "apps/v1", kind: "Deployment" });
  const rolledOut = deployments.filter((d) => {
    const conditions = (d.status as { conditions?: { type: string; reason: string }[] } | undefined)?.conditions ?? [];
    return conditions.some((c) => c.type === "Progressing" && c.reason === "NewReplicaSetAvailable");
  }).length;
  if (rolledOut !== deployments.length) throw new Error(`${deployments.length - rolledOut} of ${deployments.length} rollouts did not complete`);
  return { resources, namespaces: createdNamespaces, applied, rolledOut, ms: performance.now() - started };
}

/** Resolves once no write (a status update moves the resourceVersion) came for a while. */
async function settled(): Promise<void> {
  for (let last = emulator.resourceVersion; ; ) {
    await sleep(SETTLED_AFTER_MS);
    if (emulator.resourceVersion === last) return;
    last = emulator.resourceVersion;
  }
}

const CONVERGE_CHECK_MS = 10;

/**
 * Waits until every wanted Deployment is as wanted and returns when (now()). Each is checked once,
 * then only those the request log shows applied since the last check (reading every lagging
 * object every few ms would take CPU from the agent's requests).
 */
async function converge(want: DeploymentWant[], timeoutMs: number): Promise<{ at: number }> {
  const deadline = now() + timeoutMs;
  const left = new Map(want.map((w) => [`${w.namespace}/${w.name}`, w]));
  const isAsWanted = (w: DeploymentWant) => {
    const o = emulator.get("apps/v1", "Deployment", w.namespace, w.name) as
      | (KubeObject & { spec?: { template?: { spec?: { containers?: { image?: string }[] } } } })
      | undefined;
    const version = o?.metadata.annotations?.[DESIRED_VERSION_ANNOTATION];
    if (version === undefined || (w.version !== undefined && Number(version) !== w.version)) return false;
    return w.image === undefined || o?.spec?.template?.spec?.containers?.[0]?.image === w.image;
  };
  let log = emulator.requestLog;
  let seen = log.length;
  for (const [key, w] of left) if (isAsWanted(w)) left.delete(key);
  while (left.size > 0) {
    if (now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${left.size} Deployments not as wanted`);
    await sleep(CONVERGE_CHECK_MS);
    if (emulator.requestLog !== log) [log, seen] = [emulator.requestLog, 0]; // cleared meanwhile
    const touched = new Set<string>();
    for (; seen < log.length; seen++) {
      const e = log[seen]!;
      if (e.verb === "apply" && e.resource === "deployments" && e.status < 400) touched.add(`${e.namespace}/${e.name}`);
    }
    for (const key of touched) {
      const w = left.get(key);
      if (w && isAsWanted(w)) left.delete(key);
    }
  }
  return { at: now() };
}

async function handle(req: EmulatorRequest): Promise<unknown> {
  switch (req.op) {
    case "seed":
      return seed(req.seed);
    case "state":
      return state();
    case "requests":
      return emulator.requestLog.slice(req.from);
    case "requestCounts": {
      const counts: Record<string, number> = {};
      for (const e of emulator.requestLog) {
        const what = `${e.verb ?? e.method} ${e.resource ?? e.path}${e.subresource ? `/${e.subresource}` : ""} ${e.status}`;
        counts[what] = (counts[what] ?? 0) + 1;
      }
      return counts;
    }
    case "clearRequests":
      emulator.clearRequestLog();
      return undefined;
    case "get":
      return req.refs.map(([apiVersion, kind, namespace, name]) => emulator.get(apiVersion, kind, namespace, name));
    case "converge":
      return converge(req.want, req.timeoutMs);
    case "memory":
      return memoryAfterGc(req.reduce);
    case "shutdown":
      await emulator.stop();
      setImmediate(() => process.exit(0));
      return {};
  }
}

serveParent(handle, { url: emulator.url, rolloutDelayMs: emulator.options.rolloutDelayMs });
