// Connection reuse: the kubernetes target's requests share a few connections to the API server,
// though the kubeconfig has TLS settings (insecure-skip-tls-verify), for which client-node builds
// a new connection pool per request.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { DesiredResourceSchema, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { KubernetesEmulator } from "@flotilla/k8s-emulator";
import { KubernetesTarget, PooledKubeConfig } from "../src/targets/kubernetes.ts";
import { REGION } from "@flotilla/testkit/stack";

const APPLIES = 50;
/** As the agent's default concurrency. */
const WORKERS = 8;

let emulator: KubernetesEmulator;
before(async () => {
  emulator = await KubernetesEmulator.start({ rolloutDelayMs: 20 });
});
after(() => emulator?.stop());

test(`${APPLIES} applies by ${WORKERS} workers use a few connections, not one per request`, async () => {
  const kubeConfig = new PooledKubeConfig();
  kubeConfig.loadFromString(emulator.kubeconfigYaml());
  assert.equal(kubeConfig.getCurrentCluster()?.skipTLSVerify, true, "the kubeconfig has a TLS setting");
  const target = new KubernetesTarget({ kubeConfig, region: REGION });
  const resources = Array.from({ length: APPLIES }, (_, i) =>
    create(DesiredResourceSchema, {
      type: ResourceType.DEPLOYMENT,
      id: `app-${i}`,
      version: 1n,
      namespace: `ns-${i % 5}`,
      spec: { case: "deployment", value: { workload: { image: "app:1", port: 80 }, replicas: 1 } },
    }),
  );
  const connectionsBefore = emulator.connectionCount;
  emulator.clearRequestLog();
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, worker) => {
      for (let i = worker; i < APPLIES; i += WORKERS) await target.apply(resources[i]!);
    }),
  );
  const requests = emulator.requestLog.length;
  const connections = emulator.connectionCount - connectionsBefore;
  assert.ok(requests >= 2 * APPLIES, `each apply writes a Deployment and a Service (${requests} requests)`);
  // A worker has one request in flight at a time; the first ones (which also fetch API discovery) open
  // a few more. Without reuse, every request opens a connection of its own.
  assert.ok(connections <= 2 * WORKERS, `${requests} requests used ${connections} connections`);
});

test("a changed TLS setting (a rotated client certificate) gets a connection pool of its own", async () => {
  const kubeConfig = new PooledKubeConfig();
  kubeConfig.loadFromString(emulator.kubeconfigYaml());
  const target = new KubernetesTarget({ kubeConfig, region: REGION });
  const apply = (i: number) =>
    target.apply(
      create(DesiredResourceSchema, {
        type: ResourceType.DEPLOYMENT,
        id: `rotated-${i}`,
        version: 1n,
        namespace: "rotation",
        spec: { case: "deployment", value: { workload: { image: "app:1", port: 80 }, replicas: 1 } },
      }),
    );
  await apply(0);
  const settled = emulator.connectionCount;
  await apply(1);
  assert.equal(emulator.connectionCount, settled, "same settings: the pool's connection is reused");
  // Over plain http the certificate is never presented, but it is part of the TLS options.
  const user = kubeConfig.getCurrentUser() as { certData?: string };
  user.certData = Buffer.from("-----BEGIN CERTIFICATE-----\nrotated\n-----END CERTIFICATE-----\n").toString("base64");
  await apply(2);
  assert.ok(emulator.connectionCount > settled, "new settings: a new pool, hence a new connection");
  await apply(3);
  const rotated = emulator.connectionCount;
  await apply(4);
  assert.equal(emulator.connectionCount, rotated, "the new pool is reused in turn");
});
