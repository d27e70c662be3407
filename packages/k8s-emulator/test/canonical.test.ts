// Canonical forms and defaults, as the real API server stores built-in objects.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { canonicalQuantity } from "../src/quantity.ts";
import { deployment, expectApiError, startCluster, waitFor, type Cluster } from "@flotilla/testkit/emulator";

describe("resource.Quantity canonical form", () => {
  // Expected values as documented and tested in apimachinery's quantity_test.go.
  const cases: [string | number, string][] = [
    ["1000m", "1"],
    ["0.5", "500m"],
    [0.25, "250m"],
    ["1.5", "1500m"],
    ["100m", "100m"],
    ["2000m", "2"],
    ["1024Mi", "1Gi"],
    ["1.5Gi", "1536Mi"],
    ["0.5Ki", "512"],
    ["1000Mi", "1000Mi"],
    ["128974848", "128974848"],
    ["129e6", "129e6"],
    ["1e4", "10e3"],
    ["0.1n", "1n"],
    ["0.001", "1m"],
    ["1000E", "1e21"],
    ["0", "0"],
    ["0m", "0"],
  ];
  for (const [input, want] of cases) {
    it(`${JSON.stringify(input)} -> ${want}`, () => assert.equal(canonicalQuantity(input), want));
  }
  it("rejects malformed quantities with the server message", () => {
    assert.throws(() => canonicalQuantity("abc"), /quantities must match the regular expression/);
    assert.throws(() => canonicalQuantity("1K"), /unable to parse quantity's suffix/);
  });
});

describe("canonicalization and defaults through the API", () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster();
  });
  after(() => c.emu.stop());

  function web(name: string) {
    const d: any = deployment(name, { image: "registry.example/app" });
    Object.assign(d.spec.template.spec.containers[0], {
      resources: { requests: { cpu: "1000m", memory: "1024Mi" }, limits: { cpu: 0.5, memory: "1.5Gi" } },
      env: [
        { name: "EMPTY", value: "" },
        { name: "SET", value: "x" },
      ],
      args: [],
      readinessProbe: { httpGet: { port: 8080 }, initialDelaySeconds: 0 },
      tty: false,
      ports: [{ containerPort: 8080, hostPort: 0 }],
    });
    d.spec.paused = false;
    d.spec.minReadySeconds = 0;
    d.spec.template.spec.volumes = [{ name: "cfg", configMap: { name: "cfg" } }];
    d.spec.template.spec.nodeSelector = {};
    return d;
  }

  it("stores quantities canonically, drops empty values and fills in defaults", async () => {
    const created: any = await c.apps.createNamespacedDeployment({ namespace: "default", body: web("canon") });
    const raw: any = c.emu.get("apps/v1", "Deployment", "default", "canon");
    const container = raw.spec.template.spec.containers[0];
    assert.deepEqual(container.resources, { requests: { cpu: "1", memory: "1Gi" }, limits: { cpu: "500m", memory: "1536Mi" } });
    assert.deepEqual(container.env, [{ name: "EMPTY" }, { name: "SET", value: "x" }]);
    assert.equal("args" in container, false);
    assert.equal("tty" in container, false);
    assert.deepEqual(container.ports, [{ containerPort: 8080, protocol: "TCP" }]);
    assert.equal("paused" in raw.spec || "minReadySeconds" in raw.spec, false, "omitempty false / 0 are not stored");
    assert.equal("nodeSelector" in raw.spec.template.spec, false);
    assert.equal(container.imagePullPolicy, "Always", "no tag means :latest");
    assert.equal(container.terminationMessagePath, "/dev/termination-log");
    assert.equal(container.terminationMessagePolicy, "File");
    assert.deepEqual(container.readinessProbe, {
      httpGet: { port: 8080, path: "/", scheme: "HTTP" },
      timeoutSeconds: 1,
      periodSeconds: 10,
      successThreshold: 1,
      failureThreshold: 3,
    });
    assert.deepEqual(raw.spec.template.spec.volumes, [{ name: "cfg", configMap: { name: "cfg", defaultMode: 420 } }]);
    const pod = raw.spec.template.spec;
    assert.deepEqual(
      [pod.restartPolicy, pod.dnsPolicy, pod.terminationGracePeriodSeconds, pod.schedulerName, pod.securityContext],
      ["Always", "ClusterFirst", 30, "default-scheduler", {}],
    );
    assert.deepEqual(raw.spec.strategy, { type: "RollingUpdate", rollingUpdate: { maxSurge: "25%", maxUnavailable: "25%" } });
    assert.deepEqual([raw.spec.revisionHistoryLimit, raw.spec.progressDeadlineSeconds], [10, 600]);
    assert.equal(created.spec.template.spec.containers[0].resources.requests.cpu, "1", "the create response is canonical too");

    // Re-applying the non-canonical manifest changes nothing.
    await c.apply(web("canon-ssa"));
    const settled: any = await waitFor(
      () => {
        const x: any = c.emu.get("apps/v1", "Deployment", "default", "canon-ssa");
        return x?.status?.conditions?.some((k: any) => k.reason === "NewReplicaSetAvailable") && x;
      },
      5000,
      "rollout",
    );
    const again = await c.apply(web("canon-ssa"));
    assert.equal(again.metadata?.resourceVersion, settled.metadata.resourceVersion);
  });

  it("keeps int-or-string types and checks them", async () => {
    const d: any = deployment("intstr");
    d.spec.strategy = { type: "RollingUpdate", rollingUpdate: { maxSurge: 1, maxUnavailable: "10%" } };
    await c.apps.createNamespacedDeployment({ namespace: "default", body: d });
    const stored: any = c.emu.get("apps/v1", "Deployment", "default", "intstr");
    assert.deepEqual(stored.spec.strategy.rollingUpdate, { maxSurge: 1, maxUnavailable: "10%" });

    d.metadata.name = "intstr-bad";
    d.spec.strategy.rollingUpdate = { maxSurge: "1", maxUnavailable: "120%" };
    const err = await expectApiError(c.apps.createNamespacedDeployment({ namespace: "default", body: d }), 422);
    assert.deepEqual(
      err.details.causes.map((x: any) => x.field),
      ["spec.strategy.rollingUpdate.maxSurge", "spec.strategy.rollingUpdate.maxUnavailable"],
    );
    assert.match(err.message, /must not be greater than 100%/);
    d.spec.strategy.rollingUpdate = { maxSurge: 0, maxUnavailable: 0 };
    const zero = await expectApiError(c.apps.createNamespacedDeployment({ namespace: "default", body: d }), 422);
    assert.match(zero.message, /may not be 0 when `maxSurge` is 0/);
  });

  it("defaults Services: targetPort, protocol, cluster IP, node ports", async () => {
    const svc: any = await c.core.createNamespacedService({
      namespace: "default",
      body: { metadata: { name: "np" }, spec: { type: "NodePort", selector: { app: "x" }, ports: [{ port: 80 }] } },
    });
    assert.equal(svc.spec.ports[0].targetPort, 80);
    assert.equal(svc.spec.ports[0].protocol, "TCP");
    assert.ok(svc.spec.ports[0].nodePort >= 30000 && svc.spec.ports[0].nodePort <= 32767);
    assert.equal(svc.spec.externalTrafficPolicy, "Cluster");
    assert.match(svc.spec.clusterIP, /^10\.96\./);
    assert.deepEqual([svc.spec.sessionAffinity, svc.spec.ipFamilies, svc.spec.ipFamilyPolicy], ["None", ["IPv4"], "SingleStack"]);

    const err = await expectApiError(
      c.core.createNamespacedService({
        namespace: "default",
        body: { metadata: { name: "bad-target" }, spec: { ports: [{ port: 80, targetPort: "8080" as any }] } },
      }),
      422,
    );
    assert.equal(err.details.causes[0].field, "spec.ports[0].targetPort");
    assert.match(err.message, /must contain at least one letter/);
  });

  it("rejects an unparsable quantity as the decoder does (400)", async () => {
    const d: any = deployment("badq");
    d.spec.template.spec.containers[0].resources = { limits: { cpu: "lots" } };
    const err = await expectApiError(c.apps.createNamespacedDeployment({ namespace: "default", body: d }), 400);
    assert.equal(err.reason, "BadRequest");
    assert.match(err.message, /^Deployment in version "v1" cannot be handled as a Deployment: quantities must match/);
  });
});
