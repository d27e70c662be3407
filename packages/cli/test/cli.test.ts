// The built CLI as a user types it, run as a process against a running stack (ctrl, the
// Kubernetes emulator, an agent): apply a directory (created), again (unchanged), edited
// (configured); diff; get in every output format (golden tables); describe; apply --wait on a
// good image, a failing one and a slow one; history and rollback down to the cluster;
// a viewer refused with nothing written; a new Region checked with the rest before the first
// write; delete; errors a person can act on.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import { OperatorService, Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN } from "@flotilla/testkit/ctrl";
import { maskedTable as masked, runCli } from "./cli-harness.ts";
import { deploymentOf, imageOf, managedNames, REGION, startStack, waitFor, type Stack } from "@flotilla/testkit/stack";

const EXAMPLES = new URL("../../../examples/local/", import.meta.url).pathname;
const GOLDEN = new URL("./golden/", import.meta.url).pathname;

const [{ db }] = await testDatabases();

describe("flotilla, the CLI, against a running stack", () => {
  let stack: Stack;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const flotilla = (args: string[], extraEnv: NodeJS.ProcessEnv = {}, input?: string) => runCli({ ...env, ...extraEnv }, args, input);
  const manifests = () => join(dir, "manifests");
  const edit = (file: string, from: string, to: string) => {
    const path = join(manifests(), file);
    writeFileSync(path, readFileSync(path, "utf8").replace(from, to));
  };

  before(async () => {
    // Rollout steps slower than the agent's reports (50 ms): an update is observed PROGRESSING
    // before RUNNING, as describe's transitions below expect (at 20 ms a whole rollout could
    // fall between two reports).
    stack = await startStack(db, { emulator: { rolloutDelayMs: 300 } });
    await stack.agent();
    dir = mkdtempSync(join(tmpdir(), "flotilla-cli-"));
    writeFileSync(join(dir, "admin.token"), `${ADMIN_TOKEN}\n`);
    // The examples, placed in the stack's region instead of pnpm start's.
    cpSync(EXAMPLES, manifests(), { recursive: true });
    for (const file of readdirSync(manifests())) edit(file, /region: local/g as unknown as string, `region: ${REGION}`);
    env = { PATH: process.env.PATH, FLOTILLA_CONFIG: join(dir, "config.yaml") };
    const set = await flotilla(["context", "set", "test", "--server", stack.t.url, "--token-file", join(dir, "admin.token")]);
    assert.equal(set.code, 0, set.stderr);
  });
  after(async () => {
    await stack?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("apply a directory: created, then unchanged, then configured after an edit; --wait follows it to RUNNING", async () => {
    const first = await flotilla(["apply", "-f", manifests(), "--wait", "--timeout", "60s"]);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /^sentinel\/gateway created\nnetworkpolicy\/web-from-gateway created\ndeployment\/web created\n/);
    assert.match(first.stdout, /deployment\/web is RUNNING\n$/);
    const again = await flotilla(["apply", "-f", manifests()]);
    assert.equal(again.stdout, "sentinel/gateway unchanged\nnetworkpolicy/web-from-gateway unchanged\ndeployment/web unchanged\n");
    edit("web.yaml", "nginx:1.27", "nginx:1.28");
    const diff = await flotilla(["diff", "-f", manifests()]);
    assert.equal(diff.code, 1, "diff exits 1 when apply would change something");
    assert.equal(diff.stdout, '~ deployment/web (revision 1)\n    ~ image: "nginx:1.27" → "nginx:1.28"\n');
    const configured = await flotilla(["apply", "-f", manifests(), "-m", "new nginx", "--wait", "--timeout", "60s"]);
    assert.equal(configured.code, 0, configured.stderr);
    assert.match(configured.stdout, /deployment\/web configured\n/);
    assert.equal(imageOf(deploymentOf(stack.emulator, "demo", "web")), "nginx:1.28");
    assert.equal((await flotilla(["diff", "-f", manifests()])).code, 0, "nothing left to change");
  });

  test("get in every output format (golden tables), describe", async () => {
    for (const [kind, args] of [
      ["deployments", []],
      ["deployments", ["-o", "wide"]],
      ["sentinels", []],
      ["networkpolicies", []],
    ] as const) {
      const r = await flotilla(["get", kind, ...args]);
      assert.equal(r.code, 0, r.stderr);
      const golden = join(GOLDEN, `get-${kind}${args.length ? "-wide" : ""}.txt`);
      if (process.env.FLOTILLA_UPDATE_GOLDEN) writeFileSync(golden, masked(r.stdout));
      assert.equal(masked(r.stdout), readFileSync(golden, "utf8"), `flotilla get ${kind} ${args.join(" ")}`);
    }
    const yaml = parse((await flotilla(["get", "deploy", "web", "-o", "yaml"])).stdout);
    assert.equal(yaml.kind, "Deployment");
    assert.equal(yaml.metadata.name, "web");
    assert.equal(yaml.spec.image, "nginx:1.28");
    assert.equal(yaml.status[0].phase, "RUNNING");
    const json = JSON.parse((await flotilla(["get", "deployments", "-o", "json"])).stdout);
    assert.equal(json.kind, "List");
    assert.deepEqual(
      json.items.map((i: { metadata: { name: string } }) => i.metadata.name),
      ["web"],
    );
    // What get -o yaml prints applies unchanged.
    const roundTrip = await flotilla(["apply", "-f", "-"], {}, (await flotilla(["get", "deploy", "web", "-o", "yaml"])).stdout);
    assert.equal(roundTrip.stdout, "deployment/web unchanged\n", roundTrip.stderr);
    const regions = await flotilla(["get", "regions"]);
    assert.match(regions.stdout, new RegExp(`^NAME +AGENT +HEAD +APPLIED +LAG +LAST-REPORT +LEADER +AGE +LABELS\\n${REGION} +connected.* <none>$`, "m"));
    const described = await flotilla(["describe", "deployment", "web"]);
    assert.equal(described.code, 0, described.stderr);
    // The spec and revision (golden: labels aligned to the widest, env as NAME=value), times masked.
    const head = described.stdout
      .slice(0, described.stdout.indexOf("Regions:\n"))
      .replace(/\b\d+[smhd] ago\b/g, "<age> ago")
      .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, "<time>");
    const golden = join(GOLDEN, "describe-deployment.txt");
    if (process.env.FLOTILLA_UPDATE_GOLDEN) writeFileSync(golden, head);
    assert.equal(head, readFileSync(golden, "utf8"), "flotilla describe deployment web");
    assert.match(described.stdout, new RegExp(`^  ${REGION} +RUNNING +2/2 `, "m"));
    assert.match(described.stdout, new RegExp(`^  ${REGION} +Available +True `, "m"), "the Kubernetes conditions behind the phase");
    assert.match(
      described.stdout,
      new RegExp(`^Recent status transitions:\\n(  .*\\n)*  ${REGION} +\\S+ ago +PROGRESSING → RUNNING `, "m"),
      "the recent status transitions",
    );
  });

  test("apply --wait: an image that never becomes ready exits 1 naming the region and the reason; a timeout exits 2", async () => {
    const failing = `apiVersion: flotilla.dev/v1\nkind: Deployment\nmetadata:\n  name: broken\nspec:\n  namespace: demo\n  image: app:fail\n  regions:\n    - region: ${REGION}\n      replicas: 1\n`;
    const failed = await flotilla(["apply", "-f", "-", "--wait", "--timeout", "60s"], {}, failing);
    assert.equal(failed.code, 1, failed.stdout);
    assert.match(failed.stderr, new RegExp(`^error: deployment/broken FAILED in region ${REGION}: .+`, "m"));
    // Region west has no agent: the rollout never starts.
    const slow = failing.replace("broken", "slow").replace("app:fail", "app:1").replace(`region: ${REGION}`, "region: west");
    const timedOut = await flotilla(["apply", "-f", "-", "--wait", "--timeout=2s"], {}, slow);
    assert.equal(timedOut.code, 2, timedOut.stderr);
    assert.match(timedOut.stderr, /timed out after 2s waiting for deployment\/slow to be RUNNING/);
    assert.equal((await flotilla(["wait", "deployment", "slow", "--for=running", "--timeout=1s"])).code, 2);
    assert.equal((await flotilla(["delete", "deployment", "broken"])).code, 0);
    assert.equal((await flotilla(["delete", "deployment", "slow"])).stdout, "deployment/slow deleted\n");
  });

  test("history and rollback: three updates, back to the first, the spec and the cluster match it; the actors are shown", async () => {
    const { token } = await stack.t.client(OperatorService).createOperator({ name: "dan", role: Role.DEPLOYER });
    writeFileSync(join(dir, "dan.token"), token);
    const asDan = { FLOTILLA_TOKEN_FILE: join(dir, "dan.token") };
    const api = (image: string) =>
      `apiVersion: flotilla.dev/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  namespace: demo\n  image: ${image}\n  regions:\n    - region: ${REGION}\n      replicas: 1\n`;
    assert.equal((await flotilla(["apply", "-f", "-", "-m", "first"], asDan, api("api:1"))).code, 0);
    assert.equal((await flotilla(["apply", "-f", "-"], {}, api("api:2"))).code, 0);
    assert.equal((await flotilla(["apply", "-f", "-", "-m", "third"], asDan, api("api:3"))).code, 0);
    const history = await flotilla(["history", "deployment", "api"]);
    assert.match(
      history.stdout,
      /^REVISION +ACTOR +TIME +AGE +IMAGE +MESSAGE\n3 +dan +\S+ +\S+ +api:3 +third\n2 +admin +\S+ +\S+ +api:2 +-\n1 +dan +\S+ +\S+ +api:1 +first\n$/,
    );
    const rolled = await flotilla(["rollback", "deployment", "api", "--to-revision", "1", "-m", "api:3 is broken", "--wait", "--timeout", "60s"], asDan);
    assert.equal(rolled.code, 0, rolled.stderr);
    assert.match(rolled.stdout, /deployment\/api rolled back to revision 1's spec \(now revision 4\)/);
    assert.equal(parse((await flotilla(["get", "deploy", "api", "-o", "yaml"])).stdout).spec.image, "api:1");
    assert.equal(imageOf(deploymentOf(stack.emulator, "demo", "api")), "api:1");
    const audit = await flotilla(["audit", "--actor", "dan", "--since", "1h"]);
    assert.match(audit.stdout, /dan +RollbackDeployment +deployment\/api +4 +api:3 is broken/);
  });

  test("a viewer's apply fails with a clear message and writes nothing", async () => {
    const { token } = await stack.t.client(OperatorService).createOperator({ name: "vera", role: Role.VIEWER });
    writeFileSync(join(dir, "vera.token"), token);
    edit("web.yaml", "replicas: 2", "replicas: 3");
    const refused = await flotilla(["apply", "-f", manifests()], { FLOTILLA_TOKEN_FILE: join(dir, "vera.token") });
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      /^error: .*web\.yaml#1: deployment\/web: PERMISSION_DENIED: UpdateDeployment needs role deployer in a project; operator "vera" has role viewer and none in any project\n$/,
    );
    assert.equal(parse((await flotilla(["get", "deploy", "web", "-o", "yaml"])).stdout).metadata.revision, 2);
    edit("web.yaml", "replicas: 3", "replicas: 2");
  });

  test("invalid manifests are refused with the file, the document and the field, before anything is sent", async () => {
    const bad = `apiVersion: flotilla.dev/v1\nkind: Deployment\nmetadata:\n  name: ok\nspec:\n  namespace: demo\n  image: a:1\n---\napiVersion: flotilla.dev/v1\nkind: Deployment\nmetadata:\n  name: bad\nspec:\n  namespace: demo\n  imag: a:1\n`;
    writeFileSync(join(dir, "bad.yaml"), bad);
    const r = await flotilla(["apply", "-f", join(dir, "bad.yaml")]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /bad\.yaml#2: spec: key "imag" is unknown/);
    assert.equal((await flotilla(["get", "deploy", "ok"])).code, 1, "the valid document was not applied either");
    // The server's validation, checked for every document before the first write.
    const invalid = bad.replace("imag: a:1", "image: ''");
    writeFileSync(join(dir, "bad.yaml"), invalid);
    const refused = await flotilla(["apply", "-f", join(dir, "bad.yaml")]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /bad\.yaml#2: deployment\/bad: INVALID_ARGUMENT: deployment\.image/);
    assert.equal((await flotilla(["get", "deploy", "ok"])).code, 1, "nothing was written");
  });

  test("a new Region is checked with the rest before the first write: a refusal leaves no region behind", async () => {
    const north = "apiVersion: flotilla.dev/v1\nkind: Region\nmetadata:\n  name: north\n---\n";
    const polar = (image: string, regions = ["north"]) =>
      `${north}apiVersion: flotilla.dev/v1\nkind: Deployment\nmetadata:\n  name: polar\nspec:\n  namespace: demo\n  image: ${image}\n  regions:\n${regions.map((r) => `    - region: ${r}\n      replicas: 1\n`).join("")}`;
    const regionExists = async () => (await flotilla(["get", "regions", "north"])).code === 0;
    const invalid = await flotilla(["apply", "-f", "-"], {}, polar("''"));
    assert.equal(invalid.code, 1);
    assert.equal(invalid.stderr, "error: <stdin>#2: deployment/polar: INVALID_ARGUMENT: deployment.image: is required\n");
    assert.equal(invalid.stdout, "");
    assert.equal(await regionExists(), false, "the region was not created");
    // ctrl would name the new region first; the unknown one behind it is refused before anything is written.
    const unknown = await flotilla(["apply", "-f", "-"], {}, polar("polar:1", ["north", "nowhere"]));
    assert.equal(unknown.stderr, 'error: <stdin>#2: deployment/polar: NOT_FOUND: region "nowhere" not found, nor in these manifests\n');
    assert.equal(await regionExists(), false);
    const { token } = await stack.t.client(OperatorService).createOperator({ name: "rita", role: Role.DEPLOYER });
    writeFileSync(join(dir, "rita.token"), token);
    const deployer = await flotilla(["apply", "-f", "-"], { FLOTILLA_TOKEN_FILE: join(dir, "rita.token") }, polar("polar:1"));
    assert.equal(deployer.stderr, "error: <stdin>#1: region/north: PERMISSION_DENIED: CreateRegion needs role admin; rita has role deployer\n");
    assert.equal(await regionExists(), false);
    // What is placed in a region the same apply creates is checked all the same, by a dry run too.
    const dryRun = await flotilla(["apply", "-f", "-", "--dry-run"], {}, polar("polar:1"));
    assert.equal(dryRun.stdout, "region/north created (dry run)\ndeployment/polar created (dry run)\n", dryRun.stderr);
    assert.equal(await regionExists(), false);
    const applied = await flotilla(["apply", "-f", "-"], {}, polar("polar:1"));
    assert.equal(applied.stdout, "region/north created\ndeployment/polar created\n", applied.stderr);
    const deleted = await flotilla(["delete", "-f", "-"], {}, polar("polar:1"));
    assert.equal(deleted.stdout, "deployment/polar deleted\nregion/north deleted\n", deleted.stderr);
  });

  test("a Region's labels: created with it, a change configured (diff shows it), shown by get, selected by -l; bad ones refused before anything is sent", async () => {
    const region = (name: string, labels: string) => `apiVersion: flotilla.dev/v1\nkind: Region\nmetadata:\n  name: ${name}\n  labels: ${labels}\n`;
    const canary = region("lab-canary", "{tier: canary, example.com/geo: eu}");
    const created = await flotilla(["apply", "-f", "-"], {}, `${canary}---\n${region("lab-us", "{example.com/geo: us}")}`);
    assert.equal(created.stdout, "region/lab-canary created\nregion/lab-us created\n", created.stderr);
    assert.equal((await flotilla(["apply", "-f", "-"], {}, canary)).stdout, "region/lab-canary unchanged\n");
    const changed = region("lab-canary", "{tier: stable, example.com/geo: eu, gpu: ''}");
    const diff = await flotilla(["diff", "-f", "-"], {}, changed);
    assert.equal(diff.code, 1, "diff exits 1 when something would change");
    assert.equal(diff.stdout, '~ region/lab-canary\n    + labels.gpu: ""\n    ~ labels.tier: "canary" → "stable"\n');
    assert.equal((await flotilla(["apply", "-f", "-"], {}, changed)).stdout, "region/lab-canary configured\n");
    const listed = await flotilla(["get", "regions"]);
    assert.match(listed.stdout, /^lab-canary +none .* example\.com\/geo=eu,gpu=,tier=stable$/m);
    assert.match(listed.stdout, /^lab-us +none .* example\.com\/geo=us$/m);
    const selected = await flotilla(["get", "regions", "-l", "example.com/geo in (eu,asia),tier", "-o", "json"]);
    assert.deepEqual(
      JSON.parse(selected.stdout).items.map((r: { metadata: { name: string; labels: object } }) => [r.metadata.name, r.metadata.labels]),
      [["lab-canary", { "example.com/geo": "eu", gpu: "", tier: "stable" }]],
    );
    const badSelector = await flotilla(["get", "regions", "-l", "geo in eu"]);
    assert.equal(badSelector.code, 1);
    assert.match(badSelector.stderr, /INVALID_ARGUMENT: label_selector: unable to parse requirement: found 'eu', expected: '\('/);
    // Checked with every document before the first write: the new region is not created either.
    const bad = await flotilla(["apply", "-f", "-"], {}, `${region("lab-new", "{tier: x}")}---\n${region("lab-us", "{'bad key': x, n: 1}")}`);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /<stdin>#2: metadata\.labels\["bad key"\]: name part must consist of alphanumeric characters/);
    assert.equal((await flotilla(["get", "regions", "lab-new"])).code, 1, "nothing was sent");
    const number = await flotilla(["apply", "-f", "-"], {}, region("lab-us", "{n: 1}"));
    assert.match(number.stderr, /<stdin>#1: metadata\.labels\["n"\]: must be a string/);
    const removed = await flotilla(["delete", "-f", "-"], {}, `${canary}---\n${region("lab-us", "{}")}`);
    assert.equal(removed.stdout, "region/lab-us deleted\nregion/lab-canary deleted\n", removed.stderr);
  });

  test("a Region's spec.metrics.prometheus.address: applied, configured (diff shows it), refused when malformed or unknown", async () => {
    const region = (spec: string) => `apiVersion: flotilla.dev/v1\nkind: Region\nmetadata:\n  name: lab-metrics\nspec: ${spec}\n`;
    const created = await flotilla(["apply", "-f", "-"], {}, region("{metrics: {prometheus: {address: 'http://prometheus.lab:9090'}}}"));
    assert.equal(created.stdout, "region/lab-metrics created\n", created.stderr);
    const moved = region("{metrics: {prometheus: {address: 'http://prometheus.lab2:9090'}}}");
    const diff = await flotilla(["diff", "-f", "-"], {}, moved);
    assert.equal(diff.stdout, '~ region/lab-metrics\n    ~ metrics.prometheus.address: "http://prometheus.lab:9090" → "http://prometheus.lab2:9090"\n');
    assert.equal((await flotilla(["apply", "-f", "-"], {}, moved)).stdout, "region/lab-metrics configured\n");
    assert.equal((await flotilla(["apply", "-f", "-"], {}, moved)).stdout, "region/lab-metrics unchanged\n");
    const unknown = await flotilla(["apply", "-f", "-"], {}, region("{metrics: {graphite: {}}}"));
    assert.match(unknown.stderr, /<stdin>#1: spec\.metrics\.graphite: unknown field \(a Region's spec has metrics\.prometheus\.address only\)/);
    const malformed = await flotilla(["apply", "-f", "-"], {}, region("{metrics: {prometheus: {address: 'prometheus:9090'}}}"));
    assert.match(malformed.stderr, /INVALID_ARGUMENT: region\.metrics\.prometheus\.address: must be an http or https URL/);
    await flotilla(["delete", "-f", "-"], {}, moved);
  });

  test("delete -f removes what the manifests name, and the cluster follows", async () => {
    const r = await flotilla(["delete", "-f", manifests()]);
    assert.equal(r.stdout, "deployment/web deleted\nnetworkpolicy/web-from-gateway deleted\nsentinel/gateway deleted\n", r.stderr);
    await waitFor(() => !managedNames(stack.emulator, "apps/v1", "Deployment").includes("demo/web"), "web pruned from the cluster");
    const again = await flotilla(["delete", "-f", manifests()]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /NOT_FOUND/);
    assert.equal((await flotilla(["delete", "-f", manifests(), "--ignore-not-found"])).code, 0);
  });

  test("version, contexts, completion, and a server that is down", async () => {
    const version = await flotilla(["version"]);
    assert.match(version.stdout, /^client: \d+\.\d+\.\d+\nserver: \d+\.\d+\.\d+ \(http:\/\/.+, as admin, role admin\)\n$/);
    const contexts = await flotilla(["context", "list"]);
    assert.match(contexts.stdout, /^\* +test +http:\/\//m);
    const down = await flotilla(["get", "deployments", "--server", "http://127.0.0.1:1"]);
    assert.equal(down.code, 1);
    assert.match(down.stderr, /^error: cannot reach ctrl at http:\/\/127\.0\.0\.1:1: ECONNREFUSED\n$/);
    const noServer = await flotilla(["get", "deployments"], { FLOTILLA_CONFIG: join(dir, "none.yaml") });
    assert.match(noServer.stderr, /^error: no server: give --server URL/);
    for (const shell of ["bash", "zsh"]) {
      const script = await flotilla(["completion", shell]);
      assert.equal(script.code, 0);
      assert.match(script.stdout, /rollback/);
    }
    const help = await flotilla(["apply", "--help"]);
    assert.match(help.stdout, /Examples:\n {2}flotilla apply -f web\.yaml/);
  });
});
