// flotilla secret set|unset and get secrets against a real ctrl: a value comes from stdin or
// --from-file (a flag is no way to pass one), every output shows names and fingerprints only;
// manifests list secretEnv by names (a value in a manifest is refused naming the field), a
// manifest without secretEnv keeps the stored secrets; get -o yaml, describe and diff never
// show a value (describe shows each secret's fingerprint, beside the other service fields in
// words); a viewer may not set one.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { OperatorService, Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { ADMIN_TOKEN, startTestCtrl, testSecretKeyRing, type TestCtrl } from "@flotilla/testkit/ctrl";
import { testDatabases } from "@flotilla/testkit/databases";
import { runCli } from "./cli-harness.ts";

const [{ db }] = await testDatabases();

describe("flotilla secret", () => {
  let t: TestCtrl;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const outputs: string[] = [];
  const flotilla = async (args: string[], input = "", extraEnv: NodeJS.ProcessEnv = {}) => {
    const result = await runCli({ ...env, ...extraEnv }, args, input);
    outputs.push(result.stdout, result.stderr);
    return result;
  };
  const value = `s3cret-${randomBytes(12).toString("hex")}`;
  const fileValue = `f1le-${randomBytes(12).toString("hex")}\n`;

  before(async () => {
    t = await startTestCtrl(db, {}, { secrets: testSecretKeyRing() });
    await t.store.regions.create("local");
    dir = mkdtempSync(join(tmpdir(), "flotilla-cli-secret-"));
    writeFileSync(join(dir, "admin.token"), `${ADMIN_TOKEN}\n`);
    writeFileSync(join(dir, "vera.token"), (await t.client(OperatorService).createOperator({ name: "vera", role: Role.VIEWER })).token);
    env = { PATH: process.env.PATH, FLOTILLA_CONFIG: join(dir, "config.yaml") };
    assert.equal((await flotilla(["context", "set", "test", "--server", t.url, "--token-file", join(dir, "admin.token")])).code, 0);
    writeFileSync(
      join(dir, "api.yaml"),
      "apiVersion: flotilla.dev/v1\nkind: Deployment\nmetadata: {name: api}\nspec: {namespace: demo, image: 'api:1', regions: [{region: local, replicas: 1}]}\n",
    );
    assert.equal((await flotilla(["apply", "-f", join(dir, "api.yaml")])).code, 0);
  });
  after(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("set from stdin and from a file, changed, shown by fingerprint; no flag carries a value", async () => {
    const set = await flotilla(["secret", "set", "deployment/api", "DB_PASSWORD"], value);
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, /^deployment\/api: secret DB_PASSWORD set \(fingerprint [0-9a-f]{16}\), revision 2\n$/);
    writeFileSync(join(dir, "tls.key"), fileValue);
    assert.equal((await flotilla(["secret", "set", "deploy/api", "TLS_KEY", "--from-file", join(dir, "tls.key")])).code, 0);
    const again = await flotilla(["secret", "set", "deployment/api", "DB_PASSWORD"], value);
    assert.match(again.stdout, /secret DB_PASSWORD unchanged/);
    const changed = await flotilla(["secret", "set", "deployment/api", "DB_PASSWORD"], `${value}-2`);
    assert.match(changed.stdout, /secret DB_PASSWORD changed \(fingerprint [0-9a-f]{16} → [0-9a-f]{16}\)/);
    const flag = await flotilla(["secret", "set", "deployment/api", "X", "--value", value]);
    assert.notEqual(flag.code, 0, "no --value flag");
    const listed = await flotilla(["get", "secrets", "deployment/api"]);
    assert.match(listed.stdout, /^NAME\s+SET\s+FINGERPRINT\nDB_PASSWORD\s+true\s+[0-9a-f]{16}\nTLS_KEY\s+true\s+[0-9a-f]{16}\n$/);
    const refused = await flotilla(["secret", "set", "deployment/api", "OTHER"], "v", { FLOTILLA_TOKEN_FILE: join(dir, "vera.token") });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /PERMISSION_DENIED|role/i);
  });

  test("manifests: names only; without secretEnv the stored ones stay; a value in a manifest is refused", async () => {
    assert.equal((await flotilla(["apply", "-f", join(dir, "api.yaml")])).stdout, "deployment/api unchanged\n", "a manifest without secretEnv keeps them");
    const yaml = (await flotilla(["get", "deployment", "api", "-o", "yaml"])).stdout;
    assert.match(yaml, /secretEnv:\n\s+- name: DB_PASSWORD\n\s+- name: TLS_KEY\n/);
    writeFileSync(join(dir, "named.yaml"), yaml);
    assert.match((await flotilla(["apply", "-f", join(dir, "named.yaml")])).stdout, /deployment\/api unchanged/);
    writeFileSync(
      join(dir, "fewer.yaml"),
      "apiVersion: flotilla.dev/v1\nkind: Deployment\nmetadata: {name: api}\nspec: {namespace: demo, image: 'api:1', regions: [{region: local, replicas: 1}], secretEnv: [{name: DB_PASSWORD}]}\n",
    );
    const diff = await flotilla(["diff", "-f", join(dir, "fewer.yaml")]);
    assert.match(diff.stdout, /- secretEnv\[1\]\.name: "TLS_KEY"/);
    writeFileSync(
      join(dir, "valued.yaml"),
      "apiVersion: flotilla.dev/v1\nkind: Deployment\nmetadata: {name: api}\nspec: {namespace: demo, image: 'api:1', secretEnv: [{name: DB_PASSWORD, value: nope}]}\n",
    );
    const valued = await flotilla(["apply", "-f", join(dir, "valued.yaml")]);
    assert.equal(valued.code, 1);
    assert.match(valued.stderr, /spec\.secretEnv\[0\]\.value: a manifest never holds a secret value/);
    assert.equal((await flotilla(["secret", "unset", "deployment/api", "TLS_KEY"])).code, 0);
    assert.match((await flotilla(["get", "secrets", "deployment/api", "-o", "json"])).stdout, /"name": "DB_PASSWORD"/);
    await flotilla(["describe", "deployment", "api"]);
    await flotilla(["history", "deployment", "api", "-o", "yaml"]);
    await flotilla(["audit"]);
  });

  test("describe: the service fields in words, secret env by fingerprint", async () => {
    writeFileSync(
      join(dir, "service.yaml"),
      `apiVersion: flotilla.dev/v1
kind: Deployment
metadata: {name: api}
spec:
  namespace: demo
  image: 'api:1'
  port: 8080
  regions: [{region: local, replicas: 2}]
  readinessProbe: {httpGet: {path: /healthz, port: 8080}, initialDelaySeconds: 5}
  livenessProbe: {tcpSocket: {port: 8080}}
  disruptionBudget: {maxUnavailable: 1}
  maxSurge: 50%
  terminationGracePeriodSeconds: 45
  podLabels: {tier: api}
  podAnnotations: {example.com/owner: shop}
  envFrom: [{configMapName: api-config, prefix: CFG_}]
  env:
    - {name: DB_URL, valueFrom: {secretKeyRef: {name: db, key: url}}}
`,
    );
    const applied = await flotilla(["apply", "-f", join(dir, "service.yaml")]);
    assert.equal(applied.code, 0, applied.stderr);
    const fingerprint = JSON.parse((await flotilla(["get", "secrets", "deployment/api", "-o", "json"])).stdout).secretEnv[0].fingerprint;
    const described = await flotilla(["describe", "deployment", "api"]);
    assert.equal(described.code, 0, described.stderr);
    const text = described.stdout;
    assert.match(text, /^Disruption budget: +max unavailable 1$/m);
    assert.match(text, /^Rolling update: +max surge 50%, max unavailable 25%$/m);
    assert.match(text, /^Termination grace: +45s$/m);
    assert.match(text, /^ {2}readiness +http-get http:\/\/:8080\/healthz delay=5s timeout=1s period=10s #success=1 #failure=3$/m);
    assert.match(text, /^ {2}liveness +tcp-socket :8080 delay=0s timeout=1s period=10s #success=1 #failure=3$/m);
    assert.match(text, /^Pod labels:\n {2}tier=api\nPod annotations:\n {2}example\.com\/owner=shop\n/m);
    assert.match(text, /^Env from:\n {2}every key of configmap api-config, prefixed CFG_\n/m);
    assert.match(text, /^Env:\n {2}DB_URL from secret db key url\n/m);
    assert.match(text, new RegExp(`^Secret env:\\n {2}DB_PASSWORD: set, fingerprint ${fingerprint}\\n`, "m"));
    assert.ok(!text.includes(value), "no secret value");
  });

  test("no output of any command held a value", () => {
    const all = outputs.join("\n");
    for (const secret of [value, `${value}-2`, fileValue.trim()]) assert.ok(!all.includes(secret), "a value in the CLI's output");
  });
});
