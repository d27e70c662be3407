// Shared setup: an emulator plus real @kubernetes/client-node clients for it, and the agent's own.
import assert from "node:assert/strict";
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  Watch,
  type KubernetesObject,
  type V1Deployment,
} from "@kubernetes/client-node";
import { KubernetesEmulator, type EmulatorOptions } from "@flotilla/k8s-emulator";
import { KubeClient, kubeconfigConnectionFromString, type ApiObject } from "@flotilla/agent/kubernetes";

export interface Cluster {
  emu: KubernetesEmulator;
  kc: KubeConfig;
  /** The agent's own client of the emulator. */
  kube: KubeClient;
  objects: KubernetesObjectApi;
  apps: AppsV1Api;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  watch: Watch;
  /** Server-side apply through KubernetesObjectApi. */
  apply<T extends KubernetesObject>(obj: T, manager?: string, force?: boolean): Promise<T>;
}

export async function startCluster(opts: EmulatorOptions = {}): Promise<Cluster> {
  const emu = await KubernetesEmulator.start({ rolloutDelayMs: 50, bookmarkIntervalMs: 100, ...opts });
  const kc = new KubeConfig();
  kc.loadFromString(emu.kubeconfigYaml());
  const objects = KubernetesObjectApi.makeApiClient(kc);
  return {
    emu,
    kc,
    kube: new KubeClient(await kubeconfigConnectionFromString(emu.kubeconfigYaml())),
    objects,
    apps: kc.makeApiClient(AppsV1Api),
    core: kc.makeApiClient(CoreV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
    watch: new Watch(kc),
    apply: (obj, manager = "flotilla-agent", force) => objects.patch(obj, undefined, undefined, manager, force, PatchStrategy.ServerSideApply),
  };
}

export interface DeploymentOptions {
  namespace?: string;
  replicas?: number;
  image?: string;
  labels?: Record<string, string>;
}

export function deployment(name: string, o: DeploymentOptions = {}): V1Deployment & KubernetesObject {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: o.namespace ?? "default", labels: { app: name, ...(o.labels ?? {}) } },
    spec: {
      replicas: o.replicas ?? 2,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: "app", image: o.image ?? "registry.example/app:1.0", ports: [{ containerPort: 8080 }] }] },
      },
    },
  };
}

/** Awaits a rejection with an ApiException of the given code; returns the parsed Status body. */
export async function expectApiError(promise: Promise<unknown>, code: number): Promise<Record<string, any>> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof ApiException, `expected ApiException, got ${String(err)}`);
    assert.equal(err.code, code, `expected HTTP ${code}, got ${err.code}: ${String(err.body)}`);
    const body = typeof err.body === "string" ? JSON.parse(err.body) : err.body;
    assert.equal(body.kind, "Status");
    assert.equal(body.code, code);
    return Object.assign(body, { headers: err.headers });
  }
  assert.fail(`expected HTTP ${code}, but the request succeeded`);
}

export async function waitFor<T>(fn: () => T | undefined | false, timeoutMs = 1500, what = "condition"): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export interface WatchEvent {
  type: string;
  object: any;
}

/** Starts a client Watch and collects its events. */
export async function collectWatch(cluster: Cluster, path: string, query: Record<string, string | number | boolean | undefined> = {}) {
  const events: WatchEvent[] = [];
  let doneErr: unknown = "not done";
  const controller = await cluster.watch.watch(
    path,
    query,
    (type, object) => events.push({ type, object }),
    (err) => {
      doneErr = err;
    },
  );
  return {
    events,
    get done() {
      return doneErr !== "not done";
    },
    get error() {
      return doneErr;
    },
    abort: () => controller.abort(),
  };
}

/** A ServiceAccount `name` in namespace default and a token the emulator issued for it (TokenRequest), with its user name. */
export async function serviceAccountToken(emulator: KubernetesEmulator, name: string): Promise<{ token: string; user: string }> {
  emulator.put({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: "default" } });
  const admin = new KubeClient(await kubeconfigConnectionFromString(emulator.kubeconfigYaml()));
  const request = await admin.create<ApiObject>(`/api/v1/namespaces/default/serviceaccounts/${name}/token`, {
    apiVersion: "authentication.k8s.io/v1",
    kind: "TokenRequest",
    spec: {},
  });
  return { token: (request.status as { token: string }).token, user: `system:serviceaccount:default:${name}` };
}
