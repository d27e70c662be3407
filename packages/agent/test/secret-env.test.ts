// Secret env values end to end: ctrl seals them, the agent of the region writes them into the
// Kubernetes Secret "<deployment>-env" (ownership marks, secretKeyRef from the container, a
// keyed checksum on the pod template that rolls the pods when a value changes); a deployment of
// another region never reaches this cluster; the agent's debug log never holds a value; the
// render target writes placeholders; a foreign Secret of that name is a conflict, untouched.
// Once applied, the values leave the agent's table: a Secret deleted or edited later is written
// again with the values fetched from ctrl, and left alone while ctrl cannot be reached.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { DesiredResourceSchema, ResourceType, SecretEnvVarSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { RenderTarget, SECRET_ENV_CHECKSUM_ANNOTATION } from "@flotilla/agent";
import { createLogger } from "@flotilla/runtime";
import { ADMIN_TOKEN, testSecretKeyRing } from "@flotilla/testkit/ctrl";
import { testDatabases } from "@flotilla/testkit/databases";
import { deploymentOf, OTHER_REGION, REGION, startStack, waitFor, waitForPhase, type Stack } from "@flotilla/testkit/stack";
import { startTcpProxy, type TcpProxy } from "@flotilla/testkit/tcp-proxy";
import type { Agent } from "../src/agent.ts";
import { DesiredTable, desiredResource } from "../src/desired-table.ts";
import { secretEnvApplied } from "../src/sealed-secrets.ts";

const [{ db: sqlite }] = await testDatabases();
const secretOf = (stack: Stack, name: string) => stack.emulator.get("v1", "Secret", "demo", name);
const decoded = (secret: ReturnType<typeof secretOf>, key: string) => {
  const data = (secret as { data?: Record<string, string> } | undefined)?.data?.[key];
  return data === undefined ? undefined : Buffer.from(data, "base64").toString("utf8");
};
const checksumOf = (stack: Stack, name: string) =>
  (deploymentOf(stack.emulator, "demo", name) as { spec?: { template?: { metadata?: { annotations?: Record<string, string> } } } } | undefined)?.spec?.template
    ?.metadata?.annotations?.[SECRET_ENV_CHECKSUM_ANNOTATION];

describe("secret env in the cluster", () => {
  let stack: Stack;
  const logLines: string[] = [];
  const value = `s3cret-${randomBytes(12).toString("hex")}`;
  const westValue = `w3st-${randomBytes(12).toString("hex")}`;
  before(async () => {
    stack = await startStack(sqlite, { store: { secrets: testSecretKeyRing() } });
    await stack.agent({ log: createLogger({ level: "debug", write: (line) => logLines.push(line) }) });
  });
  after(() => stack?.close());

  const deployments = () => stack.t.client(DeploymentService);

  test("a value reaches its region's Secret, referenced by secretKeyRef; another region's never does", async () => {
    await deployments().createDeployment({
      deployment: { id: "api", namespace: "demo", image: "api:1", regions: [{ region: REGION, replicas: 1 }], secretEnv: [{ name: "DB_PASSWORD", value }] },
    });
    await deployments().createDeployment({
      deployment: {
        id: "far",
        namespace: "demo",
        image: "api:1",
        regions: [{ region: OTHER_REGION, replicas: 1 }],
        secretEnv: [{ name: "DB_PASSWORD", value: westValue }],
      },
    });
    const secret = await waitFor(() => secretOf(stack, "api-env"), "the Secret api-env");
    assert.equal(decoded(secret, "DB_PASSWORD"), value);
    assert.equal(secret.metadata?.labels?.["app.kubernetes.io/managed-by"], "flotilla", "our ownership marks");
    assert.equal(secret.metadata?.labels?.["flotilla.dev/resource-id"], "api");
    const container = (deploymentOf(stack.emulator, "demo", "api") as unknown as { spec: { template: { spec: { containers: { env?: unknown[] }[] } } } }).spec
      .template.spec.containers[0]!;
    assert.deepEqual(container.env, [{ name: "DB_PASSWORD", valueFrom: { secretKeyRef: { name: "api-env", key: "DB_PASSWORD" } } }]);
    await waitForPhase(stack, "api", "RUNNING");
    assert.equal(secretOf(stack, "far-env"), undefined, "region west's secret never reaches east's cluster");
    assert.ok(!JSON.stringify(stack.emulator.list("v1", "Secret")).includes(Buffer.from(westValue).toString("base64")));
  });

  test("a changed value changes the Secret and the pod template's checksum; no value in the agent's debug log", async () => {
    const before = await waitFor(() => checksumOf(stack, "api"), "the checksum annotation");
    assert.match(before, /^[0-9a-f]{16}$/);
    const current = (await deployments().getDeployment({ id: "api" })).deployment!;
    const next = `n3xt-${randomBytes(12).toString("hex")}`;
    current.secretEnv = [create(SecretEnvVarSchema, { name: "DB_PASSWORD", value: next })];
    await deployments().updateDeployment({ deployment: current });
    await waitFor(() => decoded(secretOf(stack, "api-env"), "DB_PASSWORD") === next, "the new value in the Secret");
    await waitFor(() => checksumOf(stack, "api") !== before, "a new checksum (the pods roll)");
    assert.ok(
      logLines.some((l) => l.includes("applied")),
      "the agent logged at debug",
    );
    for (const secret of [value, next, westValue]) assert.ok(!logLines.join("\n").includes(secret), "no value in the agent's log");
  });

  test("secret env removed: the Secret goes; a foreign Secret of the name is a conflict and stays", async () => {
    const current = (await deployments().getDeployment({ id: "api" })).deployment!;
    current.secretEnv = [];
    await deployments().updateDeployment({ deployment: current });
    await waitFor(() => !secretOf(stack, "api-env"), "the Secret deleted");
    assert.equal(checksumOf(stack, "api"), undefined);
    await stack.kubeClient.apply(
      "/api/v1/namespaces/demo/secrets/web-env",
      { apiVersion: "v1", kind: "Secret", metadata: { name: "web-env", namespace: "demo" }, data: { K: "Zm9yZWlnbg==" } },
      {
        fieldManager: "someone-else",
        force: false,
      },
    );
    await deployments().createDeployment({
      deployment: { id: "web", namespace: "demo", image: "web:1", regions: [{ region: REGION, replicas: 1 }], secretEnv: [{ name: "K", value: "ours" }] },
    });
    await waitForPhase(stack, "web", "FAILED", /web-env/);
    assert.equal(decoded(secretOf(stack, "web-env"), "K"), "foreign", "the foreign Secret is untouched");
  });
});

describe("secret values leave the agent once applied", () => {
  let stack: Stack;
  let agent: Agent;
  let toCtrl: TcpProxy;
  const value = `s3cret-${randomBytes(12).toString("hex")}`;
  before(async () => {
    stack = await startStack(sqlite, { store: { secrets: testSecretKeyRing() } });
    const ctrlUrl = new URL(stack.t.url);
    // The agent reaches ctrl through a proxy the test can cut.
    toCtrl = await startTcpProxy(ctrlUrl.hostname, Number(ctrlUrl.port));
    agent = await stack.agent({ ctrlUrl: `http://127.0.0.1:${toCtrl.port}`, ctrlCallTimeoutMs: 500 });
  });
  after(async () => {
    await stack?.close();
    await toCtrl?.close();
  });

  const entry = () => agent.table.get("deployment/api");
  const valuesLeft = () => {
    const current = entry();
    if (current?.status !== "done" || current.desired.kind !== "upsert") return false;
    const resource = desiredResource(current.desired);
    return resource.spec.case === "deployment" && secretEnvApplied(resource.spec.value.workload!.secretEnv);
  };
  const edit = () => {
    const secret = secretOf(stack, "api-env")!;
    stack.emulator.put({ ...secret, data: { DB_PASSWORD: Buffer.from("edited by hand").toString("base64") } });
  };

  test("the applied Secret is checked without them; deleted or edited, it is written again with the values fetched from ctrl, and left as it is while ctrl is unreachable", async () => {
    await stack.t.client(DeploymentService).createDeployment({
      deployment: { id: "api", namespace: "demo", image: "api:1", regions: [{ region: REGION, replicas: 1 }], secretEnv: [{ name: "DB_PASSWORD", value }] },
    });
    await waitFor(() => decoded(secretOf(stack, "api-env"), "DB_PASSWORD") === value, "the value in its Secret");
    await waitFor(valuesLeft, "the values out of the agent's table once applied");

    // A re-apply (as the periodic refresh makes) of a Secret that holds the values writes nothing.
    const resourceVersion = secretOf(stack, "api-env")!.metadata?.resourceVersion;
    assert.ok(agent.table.requestReapply("deployment/api", "refresh"));
    await waitFor(valuesLeft, "the re-apply done");
    assert.equal(secretOf(stack, "api-env")!.metadata?.resourceVersion, resourceVersion, "the Secret untouched");

    assert.ok(stack.emulator.delete("v1", "Secret", "demo", "api-env"));
    assert.ok(agent.table.requestReapply("deployment/api", "refresh"));
    await waitFor(() => decoded(secretOf(stack, "api-env"), "DB_PASSWORD") === value, "the deleted Secret written again with the value");
    await waitFor(valuesLeft, "the values out of the table again");

    edit();
    assert.ok(agent.table.requestReapply("deployment/api", "refresh"));
    await waitFor(() => decoded(secretOf(stack, "api-env"), "DB_PASSWORD") === value, "the edited Secret written again with the value");
    await waitFor(valuesLeft, "the values out of the table again");

    // ctrl unreachable: the apply fails saying why, and writes nothing to the Secret (an apply
    // without its data would remove the values); the retry after ctrl is back restores it.
    toCtrl.cut();
    edit();
    assert.ok(agent.table.requestReapply("deployment/api", "refresh"));
    await waitFor(() => entry()?.status === "error" && entry()!.error, "the apply failed");
    assert.match(entry()!.error!, /Secret demo\/api-env does not hold the secret env values applied before/);
    assert.equal(decoded(secretOf(stack, "api-env"), "DB_PASSWORD"), "edited by hand", "nothing written while the values cannot be had");
    toCtrl.restore();
    await waitFor(() => decoded(secretOf(stack, "api-env"), "DB_PASSWORD") === value, "the Secret restored once ctrl answers", 30_000);
    await waitFor(valuesLeft, "the values out of the table again");

    // ctrl stalled (it takes the request and never answers): the fetch ends at the call deadline
    // (--ctrl-call-timeout) rather than holding the worker; released, the retry restores it.
    toCtrl.hold();
    edit();
    assert.ok(agent.table.requestReapply("deployment/api", "refresh"));
    await waitFor(
      () => entry()?.status === "error" && /fetching them from ctrl failed: .*deadline/i.test(entry()!.error ?? ""),
      "the fetch's deadline",
      10_000,
      () => entry()?.error,
    );
    assert.equal(decoded(secretOf(stack, "api-env"), "DB_PASSWORD"), "edited by hand");
    toCtrl.release();
    await waitFor(() => decoded(secretOf(stack, "api-env"), "DB_PASSWORD") === value, "the Secret restored once ctrl answers again", 30_000);
  });
});

describe("an agent on the admin token (a local stack)", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(sqlite, { store: { secrets: testSecretKeyRing() } });
    await stack.agent({ token: ADMIN_TOKEN });
  });
  after(() => stack?.close());

  test("gets no keys: a deployment without secrets runs, one with secrets fails naming why and no Secret is written", async () => {
    const deployments = stack.t.client(DeploymentService);
    await deployments.createDeployment({ deployment: { id: "plain", namespace: "demo", image: "api:1", regions: [{ region: REGION, replicas: 1 }] } });
    await deployments.createDeployment({
      deployment: { id: "vault", namespace: "demo", image: "api:1", regions: [{ region: REGION, replicas: 1 }], secretEnv: [{ name: "K", value: "v4lue" }] },
    });
    await waitForPhase(stack, "plain", "RUNNING");
    await waitForPhase(stack, "vault", "FAILED", /secret env K came without its value: only the region's own agent token receives values/);
    assert.equal(secretOf(stack, "vault-env"), undefined, "no Secret with an empty value");
  });
});

test("the render target writes the Secret's keys with placeholders, never a value", async () => {
  const dir = mkdtempSync(join(tmpdir(), "flotilla-render-secret-"));
  try {
    const target = new RenderTarget({ dir, region: "local" });
    const value = `s3cret-${randomBytes(12).toString("hex")}`;
    const resource = create(DesiredResourceSchema, {
      type: ResourceType.DEPLOYMENT,
      id: "api",
      namespace: "demo",
      version: 1n,
      spec: {
        case: "deployment",
        value: { replicas: 1, workload: { image: "api:1", secretEnv: [{ name: "DB_PASSWORD", value, fingerprint: "0123456789abcdef" }] } },
      },
    });
    await target.apply(resource);
    const files = readdirSync(join(dir, "demo"));
    assert.ok(files.includes("secret-api-env.yaml"), files.join(", "));
    const text = files.map((f) => readFileSync(join(dir, "demo", f), "utf8")).join("\n");
    assert.ok(!text.includes(value) && !text.includes(Buffer.from(value).toString("base64")), "no value on disk");
    assert.match(readFileSync(join(dir, "demo", "secret-api-env.yaml"), "utf8"), /DB_PASSWORD: "<secret value of DB_PASSWORD: not rendered>"/);
    assert.match(readFileSync(join(dir, "demo", "secret-api-env.yaml"), "utf8"), /placeholders: the render target never writes a secret value/);

    // As the agent holds it once applied (its values left the table): the same file.
    const rendered = readFileSync(join(dir, "demo", "secret-api-env.yaml"), "utf8");
    const table = new DesiredTable(() => {});
    table.upsert(resource, 1);
    table.dropSecretEnvValues("deployment/api", 1);
    const kept = desiredResource(table.get("deployment/api")!.desired as { encoded: string });
    assert.ok(kept.spec.case === "deployment" && secretEnvApplied(kept.spec.value.workload!.secretEnv));
    rmSync(join(dir, "demo"), { recursive: true });
    await target.apply(kept);
    assert.equal(readFileSync(join(dir, "demo", "secret-api-env.yaml"), "utf8"), rendered);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
