// End to end: operator API on a real ctrl → agent → Kubernetes emulator, for deployments,
// sentinels and network policies (create, update image, scale, stop, delete).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DeploymentDesiredStatus, SentinelDesiredState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import type { Agent } from "../src/agent.ts";
import {
  deploymentOf,
  desiredVersion,
  imageOf,
  OTHER_REGION,
  policyOf,
  REGION,
  replicasOf,
  serviceOf,
  startStack,
  waitFor,
  type Stack,
} from "@flotilla/testkit/stack";

const MANAGED = { "app.kubernetes.io/managed-by": "flotilla", "flotilla.dev/region": REGION };

for (const { db, skip } of await testDatabases()) {
  describe(`agent end to end (${db.name})`, { skip }, () => {
    let stack: Stack;
    let agent: Agent;
    before(async () => {
      stack = await startStack(db);
      agent = await stack.agent({ listen: "127.0.0.1:0" });
      await agent.ready;
    });
    after(() => stack?.close());

    test("health, readiness and metrics endpoints", async () => {
      assert.equal((await fetch(`${agent.url}/healthz`)).status, 200);
      // Ready also needs the cluster's first answer, which may come after the first sync.
      await waitFor(async () => (await fetch(`${agent.url}/readyz`)).status === 200, "readyz 200");
      const metrics = await (await fetch(`${agent.url}/metrics`)).text();
      for (const name of ["flotilla_agent_full_sync_duration_seconds", "flotilla_agent_version_last_seen", "workqueue_depth"]) {
        assert.match(metrics, new RegExp(`^${name}`, "m"));
      }
    });

    test("deployment: create, update image, scale, stop, start, delete", async () => {
      const { emulator } = stack;
      const deployments = stack.t.client(DeploymentService);
      const base = {
        id: "web",
        namespace: "demo",
        image: "nginx:1.27",
        port: 80,
        command: ["nginx", "-g", "daemon off;"],
        env: [{ name: "MODE", value: "prod" }],
        cpuMillicores: 250,
        memoryMib: 128,
        regions: [
          { region: REGION, replicas: 2 },
          { region: OTHER_REGION, replicas: 5 },
        ],
      };
      await deployments.createDeployment({ deployment: base });
      const created = await waitFor(() => deploymentOf(emulator, "demo", "web"), "Deployment demo/web");
      assert.deepEqual(created.metadata.labels, { ...MANAGED, "flotilla.dev/resource-type": "deployment", "flotilla.dev/resource-id": "web" });
      assert.ok(desiredVersion(created)! >= 1);
      const spec = created.spec as Record<string, any>;
      assert.equal(spec.replicas, 2, "the replicas of this region");
      assert.deepEqual(spec.selector.matchLabels, { "flotilla.dev/resource-type": "deployment", "flotilla.dev/resource-id": "web" });
      assert.equal(spec.template.metadata.labels["flotilla.dev/resource-id"], "web");
      const container = spec.template.spec.containers[0];
      assert.equal(container.image, "nginx:1.27");
      assert.deepEqual(container.command, ["nginx", "-g", "daemon off;"]);
      assert.deepEqual(container.env, [{ name: "MODE", value: "prod" }]);
      assert.deepEqual(container.resources.requests, { cpu: "250m", memory: "128Mi" });
      assert.equal(container.ports[0].containerPort, 80);
      const managers = (created.metadata.managedFields as { manager: string; operation: string }[]).filter((m) => m.operation === "Apply");
      assert.deepEqual(
        managers.map((m) => m.manager),
        ["flotilla-agent"],
      );
      const service = await waitFor(() => serviceOf(emulator, "demo", "web"), "Service demo/web");
      assert.equal((service.spec as any).ports[0].port, 80);
      assert.deepEqual((service.spec as any).selector, spec.selector.matchLabels);
      assert.equal(desiredVersion(service), desiredVersion(created));
      const namespaceLabels = emulator.get("v1", "Namespace", "demo")?.metadata.labels;
      assert.equal(namespaceLabels?.["app.kubernetes.io/managed-by"], "flotilla");
      assert.equal(namespaceLabels?.["flotilla.dev/region"], REGION);
      assert.equal(namespaceLabels?.["flotilla.dev/resource-id"], undefined, "namespaces are shared: no resource labels");

      await deployments.updateDeployment({ deployment: { ...base, image: "nginx:1.28" } });
      const updated = await waitFor(
        () => imageOf(deploymentOf(emulator, "demo", "web")) === "nginx:1.28" && deploymentOf(emulator, "demo", "web"),
        "image update",
      );
      assert.ok(desiredVersion(updated)! > desiredVersion(created)!);

      await deployments.updateDeployment({ deployment: { ...base, image: "nginx:1.28", regions: [{ region: REGION, replicas: 4 }] } });
      await waitFor(() => replicasOf(deploymentOf(emulator, "demo", "web")) === 4, "scale to 4");

      await deployments.updateDeployment({ deployment: { ...base, image: "nginx:1.28", port: 0, regions: [{ region: REGION, replicas: 4 }] } });
      await waitFor(() => !serviceOf(emulator, "demo", "web"), "Service removed once the port is 0");
      assert.ok(deploymentOf(emulator, "demo", "web"));

      await deployments.updateDeployment({ deployment: { ...base, desiredStatus: DeploymentDesiredStatus.STOPPED } });
      await waitFor(() => !deploymentOf(emulator, "demo", "web") && !serviceOf(emulator, "demo", "web"), "stopped: objects deleted");

      await deployments.updateDeployment({ deployment: { ...base, desiredStatus: DeploymentDesiredStatus.RUNNING } });
      await waitFor(() => deploymentOf(emulator, "demo", "web") && serviceOf(emulator, "demo", "web"), "running again");

      await deployments.deleteDeployment({ id: "web" });
      await waitFor(() => !deploymentOf(emulator, "demo", "web") && !serviceOf(emulator, "demo", "web"), "deleted");
      assert.ok(emulator.get("v1", "Namespace", "demo"), "namespaces are never deleted by the agent");
      // The table entry goes once the delete call has returned, just after the objects.
      await waitFor(() => agent.table.get("deployment/web") === undefined, "a finished delete leaves the desired table");
    });

    test("a deployment of another region only is never applied here", async () => {
      const deployments = stack.t.client(DeploymentService);
      await deployments.createDeployment({
        deployment: { id: "elsewhere", namespace: "demo", image: "x:1", regions: [{ region: OTHER_REGION, replicas: 1 }] },
      });
      await deployments.createDeployment({ deployment: { id: "marker", namespace: "demo", image: "x:1", regions: [{ region: REGION, replicas: 1 }] } });
      await waitFor(() => deploymentOf(stack.emulator, "demo", "marker"), "marker applied");
      assert.equal(deploymentOf(stack.emulator, "demo", "elsewhere"), undefined);
    });

    test("sentinel: create, update, standby, archive, delete", async () => {
      const { emulator } = stack;
      const sentinels = stack.t.client(SentinelService);
      const base = { id: "gw", region: REGION, namespace: "env-prod", image: "sentinel:1", replicas: 2, port: 8080 };
      await sentinels.createSentinel({ sentinel: base });
      const created = await waitFor(() => deploymentOf(emulator, "env-prod", "gw"), "sentinel Deployment");
      assert.equal(created.metadata.labels?.["flotilla.dev/resource-type"], "sentinel");
      assert.equal(replicasOf(created), 2);
      assert.equal(imageOf(created), "sentinel:1");
      await waitFor(() => serviceOf(emulator, "env-prod", "gw"), "sentinel Service");

      await sentinels.updateSentinel({ sentinel: { ...base, image: "sentinel:2", replicas: 3 } });
      await waitFor(
        () => imageOf(deploymentOf(emulator, "env-prod", "gw")) === "sentinel:2" && replicasOf(deploymentOf(emulator, "env-prod", "gw")) === 3,
        "sentinel updated",
      );

      await sentinels.updateSentinel({ sentinel: { ...base, desiredState: SentinelDesiredState.STANDBY } });
      await waitFor(() => !deploymentOf(emulator, "env-prod", "gw") && !serviceOf(emulator, "env-prod", "gw"), "standby: removed");

      await sentinels.updateSentinel({ sentinel: { ...base, desiredState: SentinelDesiredState.RUNNING } });
      await waitFor(() => deploymentOf(emulator, "env-prod", "gw"), "running again");

      await sentinels.updateSentinel({ sentinel: { ...base, desiredState: SentinelDesiredState.ARCHIVED } });
      await waitFor(() => !deploymentOf(emulator, "env-prod", "gw"), "archived: removed");
      await sentinels.deleteSentinel({ id: "gw" });
    });

    test("network policy: create, update spec, delete", async () => {
      const { emulator } = stack;
      const policies = stack.t.client(NetworkPolicyService);
      const spec = { endpointSelector: { matchLabels: { app: "web" } }, ingress: [{ fromEndpoints: [{ matchLabels: { app: "lb" } }] }] };
      await policies.createNetworkPolicy({ networkPolicy: { id: "allow-lb", region: REGION, namespace: "demo", spec } });
      const created = await waitFor(() => policyOf(emulator, "demo", "allow-lb"), "CiliumNetworkPolicy");
      assert.deepEqual(created.spec, spec);
      assert.equal(created.metadata.labels?.["flotilla.dev/resource-type"], "cilium_network_policy");
      assert.ok(desiredVersion(created));

      const changed = { ...spec, ingress: [{ fromEndpoints: [{ matchLabels: { app: "gateway" } }] }] };
      await policies.updateNetworkPolicy({ networkPolicy: { id: "allow-lb", region: REGION, namespace: "demo", spec: changed } });
      await waitFor(() => JSON.stringify(policyOf(emulator, "demo", "allow-lb")?.spec) === JSON.stringify(changed), "policy updated");

      await policies.deleteNetworkPolicy({ id: "allow-lb" });
      await waitFor(() => !policyOf(emulator, "demo", "allow-lb"), "policy deleted");
    });

    test("every entry of the desired table ends done", async () => {
      await waitFor(
        () => agent.table.counts().pending === 0 && agent.table.counts().error === 0,
        "table settled",
        10_000,
        () => agent.table.counts(),
      );
    });
  });
}
