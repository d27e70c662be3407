// A test stack: a real ctrl (SQLite or MySQL/MariaDB) with regions east and west, the Kubernetes
// emulator, and agents of region east against both.
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { KubeConfig } from "@kubernetes/client-node";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { Phase } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { KubernetesEmulator, type EmulatorOptions } from "@flotilla/k8s-emulator";
import {
  buildManifests,
  DESIRED_VERSION_ANNOTATION,
  silentLogger,
  startAgent,
  tracksDesiredVersion,
  type Agent,
  type AgentConfig,
  type KubeObject,
} from "@flotilla/agent";
import { KubeClient, kubeconfigConnectionFromString, KubernetesTarget } from "@flotilla/agent/kubernetes";
import type { CtrlOptions } from "@flotilla/ctrl";
import type { StoreOptions } from "@flotilla/store";
import { startTestCtrl, type TestCtrl } from "./ctrl.ts";
import type { TestDatabase } from "./databases.ts";
import { desiredInDatabase } from "./follower.ts";
import type { KubeCluster } from "./kube-target.ts";

export const REGION = "east";
export const OTHER_REGION = "west";
/** ctrl's bookmark interval in these tests; agents are told the same. */
export const BOOKMARK_MS = 200;

export interface Stack {
  t: TestCtrl;
  emulator: KubernetesEmulator;
  token: string;
  /** A client-node KubeConfig of the emulator, for tests that act on the cluster as others would. */
  kubeConfig: KubeConfig;
  /** The agents' client of the emulator. */
  kubeClient: KubeClient;
  /** Starts an agent of region east with test-friendly timings; stopped by close(). */
  agent(overrides?: Partial<AgentConfig>): Promise<Agent>;
  close(): Promise<void>;
}

export async function startStack(
  db: TestDatabase,
  options: { ctrl?: Partial<CtrlOptions>; emulator?: EmulatorOptions; store?: StoreOptions } = {},
): Promise<Stack> {
  const { t, token } = await startCtrlOfRegions(db, options.ctrl, options.store);
  const emulator = await KubernetesEmulator.start({ rolloutDelayMs: 20, ...options.emulator });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(emulator.kubeconfigYaml());
  const kubeClient = new KubeClient(await kubeconfigConnectionFromString(emulator.kubeconfigYaml()));
  const agents = agentStarter(t, token, kubeClient, emulator.options.bookmarkIntervalMs);
  return {
    t,
    emulator,
    token,
    kubeConfig,
    kubeClient,
    agent: agents.start,
    async close() {
      await agents.stopAll();
      await emulator.stop();
      await t.close();
    },
  };
}

/** ctrl with regions east and west, and an agent token of east. */
async function startCtrlOfRegions(db: TestDatabase, ctrl: Partial<CtrlOptions> = {}, store?: StoreOptions) {
  const t = await startTestCtrl(db, { pollIntervalMs: 50, stream: { bookmarkIntervalMs: BOOKMARK_MS }, ...ctrl }, store);
  await t.store.regions.create(REGION);
  await t.store.regions.create(OTHER_REGION);
  const { token } = await t.client(RegionService).createAgentToken({ region: REGION });
  return { t, token };
}

/** Starts agents of region east with test-friendly timings against `kubeClient`. */
function agentStarter(t: TestCtrl, token: string, kubeClient: KubeClient, observerBookmarkIntervalMs: number) {
  const agents: Agent[] = [];
  return {
    async start(overrides: Partial<AgentConfig> = {}): Promise<Agent> {
      const agent = await startAgent({
        ctrlUrl: t.url,
        region: REGION,
        token,
        target: new KubernetesTarget({ kubeClient, region: REGION }),
        bookmarkIntervalMs: BOOKMARK_MS,
        reconnectBackoff: { minMs: 50, maxMs: 500 },
        retryBackoff: { minMs: 20, maxMs: 500 },
        reportIntervalMs: 50,
        heartbeatIntervalMs: 300,
        observerBookmarkIntervalMs,
        observerBackoff: { minMs: 50, maxMs: 500 },
        log: silentLogger,
        ...overrides,
      });
      agents.push(agent);
      return agent;
    },
    stopAll: () => Promise.all(agents.map((a) => a.stop())),
  };
}

/** A stack like startStack's on any Kubernetes target: the agent uses the cluster's agent credential. */
export interface TargetStack {
  t: TestCtrl;
  cluster: KubeCluster;
  /** Starts an agent of region east; stopped by close(). */
  agent(overrides?: Partial<AgentConfig>): Promise<Agent>;
  /** Stops the agents and ctrl; the cluster is the caller's. */
  close(): Promise<void>;
}

export async function startTargetStack(db: TestDatabase, cluster: KubeCluster, ctrl: Partial<CtrlOptions> = {}, store?: StoreOptions): Promise<TargetStack> {
  const { t, token } = await startCtrlOfRegions(db, ctrl, store);
  const kubeClient = new KubeClient(await kubeconfigConnectionFromString(cluster.agentKubeconfig));
  const agents = agentStarter(t, token, kubeClient, cluster.bookmarkIntervalMs);
  return {
    t,
    cluster,
    agent: agents.start,
    async close() {
      await agents.stopAll();
      await t.close();
    },
  };
}

/** Polls `check` until it returns a truthy value (returned) or fails after `timeoutMs`, showing `describe()`. */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  what: string,
  timeoutMs = 20_000,
  describe?: () => unknown,
): Promise<Exclude<T, false | null | undefined | "" | 0>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as Exclude<T, false | null | undefined | "" | 0>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${describe ? `: ${JSON.stringify(describe())}` : ""}`);
    await sleep(20);
  }
}

export const deploymentOf = (emulator: KubernetesEmulator, namespace: string, name: string) => emulator.get("apps/v1", "Deployment", namespace, name);
export const serviceOf = (emulator: KubernetesEmulator, namespace: string, name: string) => emulator.get("v1", "Service", namespace, name);
export const policyOf = (emulator: KubernetesEmulator, namespace: string, name: string) => emulator.get("cilium.io/v2", "CiliumNetworkPolicy", namespace, name);

interface AnyObject {
  metadata: { annotations?: Record<string, string> };
  spec?: unknown;
}

export function desiredVersion(object: AnyObject | undefined): number | undefined {
  const value = object?.metadata.annotations?.[DESIRED_VERSION_ANNOTATION];
  return value === undefined ? undefined : Number(value);
}

/** The first container's image of a Deployment. */
export function imageOf(object: AnyObject | undefined): string | undefined {
  const spec = object?.spec as { template?: { spec?: { containers?: { image?: string }[] } } } | undefined;
  return spec?.template?.spec?.containers?.[0]?.image;
}

export function replicasOf(object: AnyObject | undefined): number | undefined {
  return (object?.spec as { replicas?: number } | undefined)?.replicas;
}

/** Names of the managed objects of a kind in the emulator, sorted ("ns/name"). */
export function managedNames(emulator: KubernetesEmulator, apiVersion: string, kind: string, region = REGION): string[] {
  return emulator
    .list(apiVersion, kind)
    .filter((o) => o.metadata.labels?.["flotilla.dev/region"] === region)
    .map((o) => `${o.metadata.namespace}/${o.metadata.name}`)
    .sort();
}

const PRUNABLE = [
  ["apps/v1", "Deployment"],
  ["v1", "Service"],
  ["cilium.io/v2", "CiliumNetworkPolicy"],
] as const;

/** An object that does not track the desired version may carry the version its content last changed in. */
function atDesiredVersion(have: AnyObject, want: KubeObject, version: number): boolean {
  const applied = desiredVersion(have);
  return tracksDesiredVersion(want) ? applied === version : applied !== undefined && applied <= version;
}

/**
 * How the emulator differs from the region's desired state in ctrl's database ("" when equal):
 * every desired object present with the desired version, image and replicas, and no managed
 * object of the region that is not desired.
 */
export async function convergenceDiff(stack: Stack, region = REGION): Promise<string> {
  const { state } = await desiredInDatabase(stack.t.store, region);
  const problems: string[] = [];
  const expected = new Set<string>();
  for (const resource of state.values()) {
    for (const want of buildManifests(resource, region).apply) {
      if (want.kind === "Namespace") continue;
      const name = `${want.kind} ${want.metadata.namespace}/${want.metadata.name}`;
      expected.add(name);
      const have = stack.emulator.get(want.apiVersion, want.kind, want.metadata.namespace, want.metadata.name);
      if (!have) problems.push(`missing ${name}@${resource.version}`);
      else if (!atDesiredVersion(have, want, Number(resource.version))) problems.push(`${name} at ${desiredVersion(have)}, want ${resource.version}`);
      else if (want.kind === "Deployment" && (imageOf(have) !== imageOf(want) || replicasOf(have) !== replicasOf(want))) problems.push(`${name} differs`);
    }
  }
  for (const [apiVersion, kind] of PRUNABLE) {
    for (const object of stack.emulator.list(apiVersion, kind)) {
      const name = `${kind} ${object.metadata.namespace}/${object.metadata.name}`;
      if (object.metadata.labels?.["flotilla.dev/region"] === region && !expected.has(name)) problems.push(`extra ${name}`);
    }
  }
  return problems.slice(0, 10).join("; ");
}

export async function waitConverged(stack: Stack, timeoutMs = 30_000): Promise<void> {
  let diff = "";
  await waitFor(
    async () => (diff = await convergenceDiff(stack)) === "",
    "convergence",
    timeoutMs,
    () => diff,
  );
}

/** A deployment's status in region east as GetDeployment shows it. */
export interface RegionPhase {
  phase: string;
  reason: string;
  stale: boolean;
}

/** The status of deployment `id` in this region, or undefined once the deployment is gone. */
export async function statusOf(stack: Pick<Stack, "t">, id: string): Promise<RegionPhase | undefined> {
  try {
    const { deployment } = await stack.t.client(DeploymentService).getDeployment({ id });
    const status = deployment?.status.find((s) => s.region === REGION);
    return status && { phase: Phase[status.phase], reason: status.reason, stale: status.stale };
  } catch (error) {
    if (ConnectError.from(error).code === Code.NotFound) return undefined;
    throw error;
  }
}

/** Waits for phase `phase` (and a reason matching `reason`), returning the phases seen on the way. */
export async function waitForPhase(
  stack: Pick<Stack, "t">,
  id: string,
  phase: string,
  reason?: RegExp,
  seen: string[] = [],
  timeoutMs = 30_000,
): Promise<RegionPhase> {
  let last: RegionPhase | undefined;
  return waitFor(
    async () => {
      last = await statusOf(stack, id);
      if (last && seen.at(-1) !== last.phase) seen.push(last.phase);
      return last?.phase === phase && (!reason || reason.test(last.reason)) && last;
    },
    `${id} ${phase}`,
    timeoutMs,
    () => ({ last, seen }),
  );
}
