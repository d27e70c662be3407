// Connection reuse: the kubernetes target's requests share a few connections to the API server
// (one keep-alive pool per cluster), and a rotated client certificate gets a pool of its own.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { DesiredResourceSchema, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { KubernetesEmulator } from "@flotilla/k8s-emulator";
import { initPki, issueAgent } from "@flotilla/ctrl/pki";
import { createLogger } from "@flotilla/runtime";
import { KubeClient } from "../src/kube-api.ts";
import { kubeconfigConnection, kubeconfigConnectionFromString } from "../src/kube-connection.ts";
import { KubernetesTarget } from "../src/targets/kubernetes.ts";
import { REGION } from "@flotilla/testkit/stack";

/** Credential files are read again at most this often here (--kube-credentials-recheck, 1 s by default). */
const RECHECK_MS = 200;
/** Waits until a rotation written now is read (the recheck interval has passed). */
const rechecked = () => new Promise((resolve) => setTimeout(resolve, RECHECK_MS + 50));

const APPLIES = 50;
/** As the agent's default concurrency. */
const WORKERS = 8;

let emulator: KubernetesEmulator;
let tlsEmulator: KubernetesEmulator;
let dir: string;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "flotilla-kube-connections-"));
  const pki = initPki(join(dir, "pki"));
  emulator = await KubernetesEmulator.start({ rolloutDelayMs: 20 });
  tlsEmulator = await KubernetesEmulator.start({
    rolloutDelayMs: 20,
    rbac: true,
    tls: { cert: readFileSync(pki.serverCert), key: readFileSync(pki.serverKey), clientCa: readFileSync(pki.caCert) },
  });
});
after(async () => {
  await emulator?.stop();
  await tlsEmulator?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const deployment = (id: string, namespace: string) =>
  create(DesiredResourceSchema, {
    type: ResourceType.DEPLOYMENT,
    id,
    version: 1n,
    namespace,
    spec: { case: "deployment", value: { workload: { image: "app:1", port: 80 }, replicas: 1 } },
  });

test(`${APPLIES} applies by ${WORKERS} workers use a few connections, not one per request`, async () => {
  const kubeClient = new KubeClient(await kubeconfigConnectionFromString(emulator.kubeconfigYaml()));
  assert.match(emulator.kubeconfigYaml(), /insecure-skip-tls-verify: true/, "the kubeconfig has a TLS setting");
  const target = new KubernetesTarget({ kubeClient, region: REGION });
  const resources = Array.from({ length: APPLIES }, (_, i) => deployment(`app-${i}`, `ns-${i % 5}`));
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
  // A worker has one request in flight at a time. Without reuse, every request opens a connection of its own.
  assert.ok(connections <= 2 * WORKERS, `${requests} requests used ${connections} connections`);
});

test("a rotated client certificate file gets a connection pool of its own, over TLS with the client certificate's user", async () => {
  const pkiDir = join(dir, "pki");
  const users = ["east", "west"].map((region) => ({ region, user: `flotilla-agent ${region}`, ...issueAgent(pkiDir, region) }));
  tlsEmulator.put({
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name: "agents" },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
    subjects: users.map(({ user }) => ({ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: user })),
  });
  const rotate = (index: number) => {
    copyFileSync(users[index]!.cert, join(dir, "client.pem"));
    copyFileSync(users[index]!.key, join(dir, "client.key"));
  };
  rotate(0);
  // Paths relative to the kubeconfig's directory, as client-go resolves them.
  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    [
      "apiVersion: v1",
      "kind: Config",
      `clusters: [{ name: c, cluster: { server: ${JSON.stringify(tlsEmulator.url)}, certificate-authority: pki/ca.pem } }]`,
      "users: [{ name: u, user: { client-certificate: client.pem, client-key: client.key } }]",
      "contexts: [{ name: x, context: { cluster: c, user: u } }]",
      "current-context: x",
    ].join("\n"),
  );
  const logs: string[] = [];
  const log = createLogger({ write: (line) => logs.push(line) });
  const target = new KubernetesTarget({
    kubeClient: new KubeClient(await kubeconfigConnection([kubeconfig], { log, credentialsRecheckMs: RECHECK_MS })),
    region: REGION,
  });
  const apply = (i: number) => target.apply(deployment(`rotated-${i}`, "rotation"));
  const lastUser = () => tlsEmulator.requestLog.at(-1)?.user;
  await apply(0);
  const settled = tlsEmulator.connectionCount;
  await apply(1);
  assert.equal(tlsEmulator.connectionCount, settled, "same settings: the pool's connection is reused");
  assert.equal(lastUser(), users[0]!.user);
  // Mid-rotation: the new certificate without its key yet; the previous pair stays in use.
  copyFileSync(users[1]!.cert, join(dir, "client.pem"));
  await rechecked();
  await apply(5);
  assert.equal(tlsEmulator.connectionCount, settled, "the previous pair's pool is still used");
  assert.equal(lastUser(), users[0]!.user);
  assert.match(logs.join("\n"), /Kubernetes credentials changed .* but do not load; keeping the previous ones/);
  rotate(1);
  await rechecked();
  await apply(2);
  assert.ok(tlsEmulator.connectionCount > settled, "new settings: a new pool, hence a new connection");
  assert.equal(lastUser(), users[1]!.user, "the rotated certificate is presented");
  assert.match(logs.join("\n"), /Kubernetes credentials changed .*client\.pem.*: the next requests use them/);
  await apply(3);
  const rotated = tlsEmulator.connectionCount;
  await apply(4);
  assert.equal(tlsEmulator.connectionCount, rotated, "the new pool is reused in turn");
});
