// The emulator's HorizontalPodAutoscaler: the API server's defaults, validation and status
// subresource, and the controller as in a cluster without metrics-server, then with a
// utilization set through the test hook (scale up within the scale-up limit to maxReplicas, a
// write as kube-controller-manager that takes spec.replicas from the applier).
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { KubernetesEmulator } from "../src/index.ts";

const deployment = (name: string, replicas?: number) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace: "default" },
  spec: {
    ...(replicas === undefined ? {} : { replicas }),
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "app", image: "registry.example/app:1" }] } },
  },
});

const hpa = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: "autoscaling/v2",
  kind: "HorizontalPodAutoscaler",
  metadata: { name, namespace: "default" },
  spec: { scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name }, ...spec },
});

async function until<T>(read: () => T | undefined, what: string): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const value = read();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe("HorizontalPodAutoscaler", () => {
  let emu: KubernetesEmulator;
  before(async () => {
    emu = await KubernetesEmulator.start({ rolloutDelayMs: 20 });
  });
  after(() => emu.stop());

  const post = (path: string, body: unknown) =>
    fetch(`${emu.url}${path}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const replicasOf = (name: string) => (emu.get("apps/v1", "Deployment", "default", name) as any).spec.replicas as number;
  const statusOf = (name: string) => (emu.get("autoscaling/v2", "HorizontalPodAutoscaler", "default", name) as any).status;

  it("defaults minReplicas and a CPU target of 80%, leaves behavior unset, and starts with the zero status", async () => {
    const response = await post("/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers", hpa("defaulted", { maxReplicas: 3 }));
    assert.equal(response.status, 201);
    const created: any = await response.json();
    assert.equal(created.spec.minReplicas, 1);
    assert.deepEqual(created.spec.metrics, [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 80 } } }]);
    assert.equal(created.spec.behavior, undefined);
    assert.deepEqual(created.status, { desiredReplicas: 0, currentMetrics: null });
    assert.equal(created.metadata.generation, 1);
  });

  it("refuses invalid specs with the API server's field errors", async () => {
    const response = await post(
      "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
      hpa("invalid", {
        minReplicas: 3,
        maxReplicas: 2,
        metrics: [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 0 } } }],
      }),
    );
    assert.equal(response.status, 422);
    const status: any = await response.json();
    assert.match(status.message, /spec\.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`/);
    assert.match(status.message, /spec\.metrics\[0\]\.resource\.target\.averageUtilization: Invalid value: 0: must be greater than 0/);
    const zero = await post("/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers", hpa("zero", { minReplicas: 0, maxReplicas: 0 }));
    const zeroStatus: any = await zero.json();
    assert.match(zeroStatus.message, /spec\.minReplicas: Invalid value: 0: must be greater than or equal to 1/);
    assert.match(zeroStatus.message, /spec\.maxReplicas: Invalid value: 0: must be greater than 0/);
  });

  it("without metrics: scales into [min, max], then reports FailedGetResourceMetric and scales no further", async () => {
    emu.apply(deployment("quiet") as any, { manager: "test" });
    emu.apply(hpa("quiet", { minReplicas: 2, maxReplicas: 5 }) as any, { manager: "test" });
    await until(() => (statusOf("quiet")?.currentReplicas === 2 ? true : undefined), "currentReplicas 2");
    assert.equal(replicasOf("quiet"), 2);
    const status = statusOf("quiet");
    assert.equal(status.desiredReplicas, 2);
    const active = status.conditions.find((c: any) => c.type === "ScalingActive");
    assert.equal(active.status, "False");
    assert.equal(active.reason, "FailedGetResourceMetric");
    assert.deepEqual(status.currentMetrics, [{ type: "" }]);
    const managers = (emu.get("apps/v1", "Deployment", "default", "quiet") as any).metadata.managedFields.map((e: any) => e.manager);
    assert.ok(managers.includes("kube-controller-manager"));
  });

  it("with a utilization set: scales up within the scale-up limit to maxReplicas, and takes spec.replicas from the applier", async () => {
    emu.apply(deployment("busy", 2) as any, { manager: "applier" });
    emu.apply(
      hpa("busy", {
        minReplicas: 2,
        maxReplicas: 5,
        metrics: [{ type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 70 } } }],
      }) as any,
      {
        manager: "applier",
      },
    );
    await until(() => (statusOf("busy")?.currentReplicas === 2 ? true : undefined), "the first reconcile");
    assert.equal((await post("/_emulator/hpa/default/busy/utilization", { cpu: 140 })).status, 200);
    await until(() => (replicasOf("busy") === 5 ? true : undefined), "5 replicas");
    const status = statusOf("busy");
    assert.equal(status.desiredReplicas, 5);
    assert.deepEqual(status.currentMetrics, [{ type: "Resource", resource: { name: "cpu", current: { averageUtilization: 140 } } }]);
    assert.equal(status.conditions.find((c: any) => c.type === "ScalingLimited").reason, "TooManyReplicas");
    const owners = (emu.get("apps/v1", "Deployment", "default", "busy") as any).metadata.managedFields;
    const owns = (manager: string) => JSON.stringify(owners.find((e: any) => e.manager === manager)?.fieldsV1 ?? {}).includes('"f:replicas"');
    assert.ok(owns("kube-controller-manager") && !owns("applier"), "the HPA's write took spec.replicas over");
    // Lower utilization: the downscale stabilization window keeps the highest recommendation.
    await post("/_emulator/hpa/default/busy/utilization", { cpu: 10 });
    await until(
      () => (statusOf("busy").conditions.find((c: any) => c.type === "AbleToScale").reason === "ScaleDownStabilized" ? true : undefined),
      "stabilized",
    );
    assert.equal(replicasOf("busy"), 5);
    assert.equal((await post("/_emulator/hpa/default/busy/utilization", { cpu: "lots" })).status, 400);
  });

  it("finds an HPA from its Deployment's events by the target it names now: created before it, then retargeted", async () => {
    emu.apply(hpa("early", { minReplicas: 2, maxReplicas: 5 }) as any, { manager: "test" });
    await until(() => (statusOf("early")?.conditions?.some((c: any) => c.reason === "FailedGetScale") ? true : undefined), "FailedGetScale");
    emu.apply(deployment("early", 1) as any, { manager: "test" });
    await until(() => (replicasOf("early") === 2 ? true : undefined), "the Deployment created later scaled to 2");
    emu.apply(deployment("moved", 1) as any, { manager: "test" });
    const retargeted = hpa("early", { minReplicas: 2, maxReplicas: 5 });
    retargeted.spec.scaleTargetRef.name = "moved";
    emu.apply(retargeted as any, { manager: "test" });
    await until(() => (replicasOf("moved") === 2 ? true : undefined), "the new target scaled to 2");
    emu.apply(deployment("early", 1) as any, { manager: "test", force: true });
    emu.apply(deployment("moved", 1) as any, { manager: "test", force: true });
    await until(() => (replicasOf("moved") === 2 ? true : undefined), "the new target scaled back to 2");
    assert.equal(replicasOf("early"), 1, "the former target is no longer the HPA's");
  });
});
