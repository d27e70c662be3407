// RBAC proven, not guessed: the agent's rendered manifests are applied with the real kubectl to
// the emulator with RBAC on; the agent (a real process) then runs with its ServiceAccount's
// token and leader election on (as the manifests run it) and does all of its work, using exactly
// the verbs of its ClusterRole and leader-election Role. With one verb taken from its ClusterRole it reports a clear
// `forbidden` failure (status and log) and keeps running, and recovers once the verb is back.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments, stringify } from "yaml";
import { Phase } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { spawnCtrl } from "@flotilla/testkit/ctrl-process";
import { kubectl, kubectlMissing } from "./kubectl.ts";
import { eventually, mainOf, operatorClients, REPO_ROOT, startProcess } from "./processes.ts";

const skip = kubectlMissing();
const ADMIN_TOKEN = "rbac-test-admin-token";
const REGION = "east";
const MANAGED = { "app.kubernetes.io/managed-by": "flotilla", "flotilla.dev/region": REGION };

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

/** A self-signed server certificate for 127.0.0.1: kubectl sends a kubeconfig's credentials only over TLS. */
function serverCertificate(dir: string): { cert: string; key: string } {
  const cert = join(dir, "emulator.crt");
  const key = join(dir, "emulator.key");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-keyout",
      key,
      "-out",
      cert,
      "-days",
      "1",
      "-subj",
      "/CN=emulator",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
    ],
    { stdio: "ignore" },
  );
  return { cert, key };
}

/** A kubeconfig that authenticates with `token` (the emulator's certificate is self-signed). */
function tokenKubeconfig(server: string, token: string): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "emulator", cluster: { server, "insecure-skip-tls-verify": true } }],
    users: [{ name: "flotilla-agent", user: { token } }],
    contexts: [{ name: "agent", context: { cluster: "emulator", user: "flotilla-agent" } }],
    "current-context": "agent",
  });
}

interface RequestLogEntry {
  method: string;
  path: string;
  status: number;
  user?: string;
  verb?: string;
  group?: string;
  resource?: string;
}

/** A call to an emulator endpoint (/_emulator/...) over its TLS. */
function emulatorCall(method: string, url: string, ca: string, body?: unknown): Promise<unknown> {
  return new Promise((resolve, reject) => {
    request(url, { method, ca }, (res) => {
      let text = "";
      res.on("data", (chunk: Buffer) => (text += chunk.toString()));
      res.on("end", () => resolve(JSON.parse(text)));
    })
      .on("error", reject)
      .end(body === undefined ? undefined : JSON.stringify(body));
  });
}

test("the agent works with exactly its ClusterRole, and reports a missing verb as forbidden", { skip, timeout: 180_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "flotilla-rbac-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const tls = serverCertificate(dir);
  const adminKubeconfig = join(dir, "admin.kubeconfig");
  const emulator = startProcess(
    [
      "node",
      mainOf("k8s-emulator"),
      "--listen",
      "127.0.0.1:0",
      "--kubeconfig-out",
      adminKubeconfig,
      "--rbac",
      "--tls-cert-file",
      tls.cert,
      "--tls-private-key-file",
      tls.key,
      "--rollout-delay-ms",
      "20",
    ],
    { env: {}, cwd: dir },
  );
  t.after(() => emulator.stop());
  const [, server] = await emulator.waitFor(/listening on (https:\/\/\S+?)[\s,]/);
  const admin = (args: string[], input?: string) => kubectl([...args, "--kubeconfig", adminKubeconfig], input);
  const ca = readFileSync(tls.cert, "utf8");
  const requestLog = () => emulatorCall("GET", `${server}/_emulator/requests`, ca) as Promise<RequestLogEntry[]>;

  // The agent overlay as an operator installs it.
  const rendered = kubectl(["kustomize", join(REPO_ROOT, "deploy/kubernetes/overlays/agent")]);
  admin(["apply", "-f", "-"], rendered);
  const documents = parseAllDocuments(rendered).map(
    (document) => document.toJS() as { kind: string; metadata: { name: string; namespace?: string }; rules?: Rule[] },
  );
  const clusterRole = documents.find((object) => object.kind === "ClusterRole" && object.metadata.name === "flotilla-agent")!;
  const leaderElectionRole = documents.find((object) => object.kind === "Role" && object.metadata.name === "flotilla-agent-leader-election")!;
  const serviceAccount = documents.find((object) => object.kind === "ServiceAccount")!;
  const token = admin(["create", "token", serviceAccount.metadata.name, "--namespace", serviceAccount.metadata.namespace!]).trim();
  const agentKubeconfig = join(dir, "agent.kubeconfig");
  writeFileSync(agentKubeconfig, tokenKubeconfig(server!, token), { mode: 0o600 });
  // What the token may not do, it may not do: the ServiceAccount cannot read Secrets.
  assert.throws(
    () => kubectl(["get", "secrets", "--all-namespaces", "--kubeconfig", agentKubeconfig]),
    /secrets is forbidden: User "system:serviceaccount:flotilla-system:flotilla-agent" cannot list resource "secrets" in API group "" at the cluster scope/,
  );

  // A managed Deployment nothing desires: the agent's first full sync prunes it (then the only
  // managed object: --prune-max-fraction 1 lets the safety valve allow that).
  admin(
    ["apply", "-f", "-"],
    stringify({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: {
        name: "orphan",
        namespace: "default",
        labels: { ...MANAGED, "flotilla.dev/resource-type": "deployment", "flotilla.dev/resource-id": "orphan" },
      },
      spec: {
        selector: { matchLabels: { app: "orphan" } },
        template: { metadata: { labels: { app: "orphan" } }, spec: { containers: [{ name: "app", image: "nginx:1.27" }] } },
      },
    }),
  );

  const secretsKeyFile = join(dir, "secrets-key.json");
  writeFileSync(secretsKeyFile, JSON.stringify({ keys: [{ id: "rbac", key: randomBytes(32).toString("base64") }] }), { mode: 0o600 });
  const ctrl = await spawnCtrl(`sqlite:${join(dir, "ctrl.db")}`, ADMIN_TOKEN, ["--secrets-key-file", secretsKeyFile]);
  t.after(() => ctrl.kill());
  const { regions, deployments, networkPolicies } = operatorClients(ctrl.url, ADMIN_TOKEN);
  await regions.createRegion({ region: { name: REGION } });
  const { token: agentToken } = await regions.createAgentToken({ region: REGION });
  // Both carry a secret env value: their Secrets are written (create, patch), api's deleted with it.
  const web = {
    id: "web",
    namespace: "rbac-demo",
    image: "nginx:1.27",
    port: 80,
    regions: [{ region: REGION, replicas: 2 }],
    secretEnv: [{ name: "TOKEN", value: "t" }],
  };
  await deployments.createDeployment({ deployment: web });
  // api has a disruption budget and an autoscaler: its PodDisruptionBudget and HorizontalPodAutoscaler are created, then deleted with it.
  await deployments.createDeployment({
    deployment: {
      ...web,
      id: "api",
      port: 8080,
      disruptionBudget: { budget: { case: "minAvailable", value: "1" } },
      regions: [{ region: REGION, replicas: 2, autoscaling: { minReplicas: 1, maxReplicas: 3, targetCpuUtilizationPercent: 70 } }],
    },
  });
  for (const id of ["allow-lb", "deny-all"]) {
    await networkPolicies.createNetworkPolicy({
      networkPolicy: { id, region: REGION, namespace: "rbac-demo", spec: { endpointSelector: { matchLabels: { app: "web" } } } },
    });
  }

  const agent = startProcess(
    [
      "node",
      mainOf("agent"),
      "--ctrl-url",
      ctrl.url,
      "--region",
      REGION,
      "--kubeconfig",
      agentKubeconfig,
      "--listen",
      "127.0.0.1:0",
      "--report-interval",
      "50ms",
      "--prune-max-fraction",
      "1",
      // As the manifests run it: elected on a Lease in its namespace (the manifests' Role), with
      // a short retry period so that a renew (update) happens well within the test.
      "--leader-elect",
      "--leader-elect-resource-namespace",
      serviceAccount.metadata.namespace!,
      "--leader-elect-retry-period",
      "200ms",
    ],
    { env: { FLOTILLA_AGENT_TOKEN: agentToken }, cwd: dir },
  );
  t.after(() => agent.stop());
  const [, agentUrl] = await agent.waitFor(/health and metrics on (http:\/\/[^\s,]+)/);

  const phaseOf = async (id: string) => {
    const { deployment } = await deployments.getDeployment({ id });
    const status = deployment?.status.find((s) => s.region === REGION);
    return status && { phase: Phase[status.phase], reason: status.reason };
  };
  const get = (kind: string, name: string, namespace = "rbac-demo") => {
    try {
      return JSON.parse(admin(["get", kind, name, "--namespace", namespace, "--output", "json"])) as { spec: any };
    } catch {
      return undefined;
    }
  };

  // All of its work: namespace, deployments, service, policy applied; observed (watch) to RUNNING; the orphan pruned.
  for (const id of ["web", "api"]) await eventually(async () => (await phaseOf(id))?.phase === "RUNNING", `${id} RUNNING`, 60_000);
  assert.ok(get("namespace", "rbac-demo", ""), "namespace applied");
  assert.ok(get("service", "web"), "service applied");
  assert.ok(get("ciliumnetworkpolicy", "allow-lb"), "network policy applied");
  assert.equal(get("poddisruptionbudget", "api")?.spec.minAvailable, 1, "disruption budget applied");
  assert.ok(get("secret", "web-env"), "secret env applied");
  assert.equal(get("horizontalpodautoscaler", "api")?.spec.maxReplicas, 3, "autoscaler applied");
  await eventually(() => !get("deployment", "orphan", "default"), "the orphan pruned");
  await deployments.deleteDeployment({ id: "api" });
  await networkPolicies.deleteNetworkPolicy({ id: "deny-all" });
  await eventually(
    () =>
      !get("deployment", "api") &&
      !get("service", "api") &&
      !get("poddisruptionbudget", "api") &&
      !get("horizontalpodautoscaler", "api") &&
      !get("secret", "api-env") &&
      !get("ciliumnetworkpolicy", "deny-all"),
    "deleted resources removed",
  );
  assert.doesNotMatch(agent.output(), /forbidden/i, "nothing was forbidden with the full ClusterRole");

  // And the ClusterRole and the leader-election Role are minimal: the agent used every verb they
  // grant (an apply that created its object needed create as well as patch; the Lease was read,
  // created, then renewed).
  const user = `system:serviceaccount:${serviceAccount.metadata.namespace}:${serviceAccount.metadata.name}`;
  const used = new Set<string>();
  for (const entry of await requestLog()) {
    if (entry.user !== user || !entry.resource || entry.status === 403) continue;
    used.add(`${entry.group}/${entry.resource}:${entry.verb === "apply" ? "patch" : entry.verb}`);
    if (entry.verb === "apply" && entry.status === 201) used.add(`${entry.group}/${entry.resource}:create`);
  }
  const granted = [clusterRole, leaderElectionRole]
    .flatMap((role) => role.rules!)
    .flatMap((rule) => rule.apiGroups.flatMap((group) => rule.resources.flatMap((resource) => rule.verbs.map((verb) => `${group}/${resource}:${verb}`))));
  assert.deepEqual([...used].sort(), granted.sort());

  // One verb less: patch on deployments (server-side apply is a PATCH).
  const without = structuredClone(clusterRole);
  const deploymentsRule = without.rules!.find((rule) => rule.resources.includes("deployments"))!;
  deploymentsRule.verbs = deploymentsRule.verbs.filter((verb) => verb !== "patch");
  const canI = (args: string[]) => {
    try {
      return kubectl(["auth", "can-i", ...args]).trim();
    } catch (error) {
      return String((error as { stdout?: string }).stdout).trim(); // "no" exits 1
    }
  };
  // Asked with the agent's own credentials, and by the admin impersonating its ServiceAccount.
  const agentAccount = "--as=system:serviceaccount:flotilla-system:flotilla-agent";
  const canPatch = () => [
    canI(["patch", "deployments", "--namespace", "rbac-demo", "--kubeconfig", agentKubeconfig]),
    canI(["patch", "deployments", "--namespace", "rbac-demo", "--kubeconfig", adminKubeconfig, agentAccount]),
  ];
  assert.deepEqual(canPatch(), ["yes", "yes"]);
  assert.equal(canI(["list", "secrets", "--kubeconfig", adminKubeconfig]), "yes");
  assert.equal(canI(["list", "secrets", "--kubeconfig", adminKubeconfig, agentAccount]), "no", "answered as the account, not as the admin");
  admin(["apply", "-f", "-"], stringify(without));
  assert.deepEqual(canPatch(), ["no", "no"]);
  await deployments.updateDeployment({ deployment: { ...web, image: "nginx:1.28" } });
  const failed = await eventually(
    async () => {
      const status = await phaseOf("web");
      return status?.phase === "FAILED" && status;
    },
    "web FAILED",
    60_000,
  );
  assert.match(
    failed.reason,
    /forbidden: User "system:serviceaccount:flotilla-system:flotilla-agent" cannot patch resource "deployments" in API group "apps" in the namespace "rbac-demo"/,
  );
  await agent.waitFor(/deployments\.apps "web" is forbidden: User "system:serviceaccount:flotilla-system:flotilla-agent" cannot patch/);

  // Keeps running, retrying with backoff rather than in a loop.
  const refused = (await requestLog()).filter((entry) => entry.status === 403 && entry.method === "PATCH" && entry.path.endsWith("/deployments/web"));
  assert.ok(refused.length >= 1 && refused.length <= 15, `refused patches retried with backoff: ${refused.length}`);
  assert.equal(agent.child.exitCode, null, "the agent is still running");
  assert.equal((await fetch(`${agentUrl}/healthz`)).status, 200);
  assert.equal(get("deployment", "web")!.spec.template.spec.containers[0].image, "nginx:1.27", "nothing was written");

  // The verb back: the next retry applies, and the status recovers.
  admin(["apply", "-f", "-"], stringify(clusterRole));
  await eventually(async () => (await phaseOf("web"))?.phase === "RUNNING", "web RUNNING again", 120_000);
  assert.equal(get("deployment", "web")!.spec.template.spec.containers[0].image, "nginx:1.28");

  // Without watch on services, the observer's next watch (the open ones are dropped) is refused:
  // logged with what was refused; the agent keeps running, and watches again once allowed.
  const noWatch = structuredClone(clusterRole);
  const servicesRule = noWatch.rules!.find((rule) => rule.resources.includes("services"))!;
  servicesRule.verbs = servicesRule.verbs.filter((verb) => verb !== "watch");
  admin(["apply", "-f", "-"], stringify(noWatch));
  await emulatorCall("POST", `${server}/_emulator/faults`, ca, { dropWatches: true });
  // (The agent's own client reads the body of a refused watch: the server's Status names the verb.)
  await agent.waitFor(/observer Service: watch \/api\/v1\/services: services is forbidden: .* cannot watch resource "services"/);
  assert.equal(agent.child.exitCode, null, "the agent is still running");
  const watching = (entries: RequestLogEntry[]) =>
    entries.filter((entry) => entry.user === user && entry.resource === "services" && entry.verb === "watch" && entry.status === 200).length;
  const before = watching(await requestLog());
  admin(["apply", "-f", "-"], stringify(clusterRole));
  await eventually(async () => watching(await requestLog()) > before, "services watched again", 60_000);
});
