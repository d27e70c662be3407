// The render target writes exactly the committed manifests (test/fixtures/render), both when
// fed directly and when an agent renders a region created through ctrl's operator API.
// FLOTILLA_UPDATE_FIXTURES=1 rewrites the fixture from the direct rendering.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { cp, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { DesiredResourceSchema, ResourceTombstoneSchema, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { RenderTarget } from "../src/targets/render.ts";
import { REGION, startStack, waitFor, type Stack } from "@flotilla/testkit/stack";

const FIXTURE = join(import.meta.dirname, "fixtures", "render");

const web = {
  id: "web",
  namespace: "demo",
  image: "nginx:1.27",
  command: ["nginx"],
  env: [
    { name: "MODE", value: "prod" },
    { name: "DB_PASSWORD", valueFrom: { source: { case: "secretKeyRef" as const, value: { name: "db", key: "password" } } } },
  ],
  envFrom: [{ source: { case: "configMapName" as const, value: "web-config" }, prefix: "CFG_" }],
  port: 80,
  cpuMillicores: 250,
  memoryMib: 128,
  disruptionBudget: { budget: { case: "minAvailable" as const, value: "1" } },
  maxSurge: "1",
  maxUnavailable: "0",
  terminationGracePeriodSeconds: 45n,
  podLabels: { tier: "frontend" },
  podAnnotations: { "prometheus.io/scrape": "true" },
};
const gateway = { id: "gw", namespace: "env-prod", image: "sentinel:1", port: 0 };
const policySpec = { endpointSelector: { matchLabels: { app: "web" } }, ingress: [{ fromEndpoints: [{ matchLabels: { app: "lb" } }] }] };

/** The same three resources as written through the API below, at the versions a fresh region gives them. */
const RESOURCES = [
  create(DesiredResourceSchema, {
    type: ResourceType.DEPLOYMENT,
    id: web.id,
    version: 1n,
    namespace: web.namespace,
    spec: { case: "deployment", value: { workload: web, replicas: 2, revision: 1n } },
  }),
  create(DesiredResourceSchema, {
    type: ResourceType.SENTINEL,
    id: gateway.id,
    version: 2n,
    namespace: gateway.namespace,
    spec: { case: "sentinel", value: { workload: gateway, replicas: 1 } },
  }),
  create(DesiredResourceSchema, {
    type: ResourceType.CILIUM_NETWORK_POLICY,
    id: "allow-lb",
    version: 3n,
    namespace: "demo",
    spec: { case: "ciliumNetworkPolicy", value: { spec: policySpec } },
  }),
];

/** Every published file under `dir` (the staging directory left out), relative path → contents. */
async function tree(dir: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const path = join(entry.parentPath, entry.name);
    const relativePath = path.slice(dir.length + 1);
    if (!entry.isFile() || relativePath.startsWith(".staging")) continue;
    try {
      files[relativePath] = await readFile(path, "utf8");
    } catch (error) {
      // Removed between the listing and the read: the agent is still at work; the caller polls again.
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  }
  return files;
}

describe("render target", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "flotilla-render-"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test("writes the committed manifests; listManaged reads them back; delete removes them", async () => {
    const target = new RenderTarget({ dir, region: REGION });
    for (const resource of RESOURCES) await target.apply(resource);
    if (process.env.FLOTILLA_UPDATE_FIXTURES === "1") {
      await rm(FIXTURE, { recursive: true, force: true });
      await cp(dir, FIXTURE, { recursive: true });
    }
    assert.deepEqual(await tree(dir), await tree(FIXTURE));

    const managed = (await target.listManaged()).map((o) => `${o.key} ${o.kind} ${o.namespace}/${o.name}`).sort();
    assert.deepEqual(managed, [
      "cilium_network_policy/allow-lb CiliumNetworkPolicy demo/allow-lb",
      "deployment/web Deployment demo/web",
      "deployment/web PodDisruptionBudget demo/web",
      "deployment/web Service demo/web",
      "sentinel/gw Deployment env-prod/gw",
    ]);
    await target.delete(create(ResourceTombstoneSchema, { type: ResourceType.DEPLOYMENT, id: "web", namespace: "demo", name: "web" }));
    assert.deepEqual(Object.keys(await tree(dir)).sort(), [
      "demo/ciliumnetworkpolicy-allow-lb.yaml",
      "demo/namespace-demo.yaml",
      "env-prod/deployment-gw.yaml",
      "env-prod/namespace-env-prod.yaml",
    ]);
    const other = new RenderTarget({ dir, region: "elsewhere" });
    assert.deepEqual(await other.listManaged(), [], "another region's agent manages none of these");
  });

  test("file work leaves the event loop a turn per resource and per file read", async () => {
    const many = await mkdtemp(join(tmpdir(), "flotilla-render-many-"));
    try {
      const target = new RenderTarget({ dir: many, region: REGION });
      let turned = false;
      setImmediate(() => (turned = true));
      await target.apply(RESOURCES[0]);
      assert.ok(turned, "an apply (synchronous file calls) let the event loop turn");

      for (let i = 0; i < 50; i++) await target.apply(create(DesiredResourceSchema, { ...RESOURCES[0], id: `web-${i}` }));
      let turns = 0;
      let ticking = true;
      const tick = () => {
        turns++;
        if (ticking) setImmediate(tick);
      };
      setImmediate(tick);
      const managed = await target.listManaged();
      ticking = false;
      assert.equal(managed.length, 153, "a Deployment, a Service and a PodDisruptionBudget per resource");
      assert.ok(turns >= managed.length, `${turns} event-loop turns while ${managed.length} files were read`);
    } finally {
      await rm(many, { recursive: true, force: true });
    }
  });
});

for (const { db, skip } of await testDatabases()) {
  describe(`render target behind an agent (${db.name})`, { skip }, () => {
    let stack: Stack;
    let dir: string;
    before(async () => {
      stack = await startStack(db);
      dir = await mkdtemp(join(tmpdir(), "flotilla-render-"));
    });
    after(async () => {
      await stack?.close();
      await rm(dir, { recursive: true, force: true });
    });

    test("renders a region created through the operator API exactly as committed", async () => {
      await stack.t.client(DeploymentService).createDeployment({ deployment: { ...web, regions: [{ region: REGION, replicas: 2 }] } });
      await stack.t.client(SentinelService).createSentinel({ sentinel: { ...gateway, region: REGION, replicas: 1 } });
      await stack.t
        .client(NetworkPolicyService)
        .createNetworkPolicy({ networkPolicy: { id: "allow-lb", region: REGION, namespace: "demo", spec: policySpec } });
      const agent = await stack.agent({ target: new RenderTarget({ dir, region: REGION }) });
      await agent.ready;
      const expected = await tree(FIXTURE);
      let actual: Record<string, string> = {};
      await waitFor(async () => JSON.stringify((actual = await tree(dir))) === JSON.stringify(expected), "rendered manifests", 10_000);
      assert.deepEqual(actual, expected);
    });
  });
}
