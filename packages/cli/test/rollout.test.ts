// Staged rollouts through the CLI, against a real ctrl with two regions, each with its own
// Kubernetes emulator and agent (east in this process, west as a process of its own):
// manifests carry spec.strategy (round-tripped by get -o yaml, shown by diff and describe);
// apply --wait exits 0 once the rollout SUCCEEDED, 1 when it rolled back (naming the region
// and the reason, the second wave's region untouched), 2 on timeout; get rollouts and
// rollout status (golden); approve by a deployer (a viewer refused), pause, resume, promote,
// abort.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import { KubernetesEmulator } from "@flotilla/k8s-emulator";
import { OperatorService, Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { spawnAgent, type AgentProcess } from "@flotilla/testkit/agent-process";
import { ADMIN_TOKEN } from "@flotilla/testkit/ctrl";
import { testDatabases } from "@flotilla/testkit/databases";
import { deploymentOf, desiredVersion, imageOf, OTHER_REGION, REGION, startStack, waitFor, type Stack } from "@flotilla/testkit/stack";
import { maskedTable, runCli } from "./cli-harness.ts";

const GOLDEN = new URL("./golden/", import.meta.url).pathname;
const [{ db }] = await testDatabases();

/** Deployment shop: east in wave canary (`canary`: that wave's other fields), west in the last wave (`rest`: the whole wave). */
function shop(image: string, canary: string, rest = "{name: rest}"): string {
  return `apiVersion: flotilla.dev/v1
kind: Deployment
metadata: {name: shop}
spec:
  namespace: demo
  image: ${image}
  port: 80
  regions: [{region: ${REGION}, replicas: 1}, {region: ${OTHER_REGION}, replicas: 1}]
  strategy:
    waves:
      - {name: canary, regions: [${REGION}], ${canary}}
      - ${rest}
    onFailure: ROLLBACK
`;
}

/** A rollout status with the bake's countdown masked. */
const maskedStatus = (text: string) => text.replace(/\d+s left of/g, "<n>s left of");

describe("flotilla and staged rollouts, two regions in two waves", () => {
  let stack: Stack;
  let west: KubernetesEmulator;
  let westAgent: AgentProcess;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  const flotilla = (args: string[], input?: string, extraEnv: NodeJS.ProcessEnv = {}) => runCli({ ...env, ...extraEnv }, args, input);
  const westDeployment = () => deploymentOf(west, "demo", "shop");
  /** Polls `rollout status --watch=false` until its output matches `pattern`. */
  const statusUntil = (pattern: RegExp) =>
    waitFor(async () => pattern.test((await flotilla(["rollout", "status", "shop", "--watch=false"])).stdout), `rollout status matching ${pattern}`, 30_000);

  before(async () => {
    stack = await startStack(db, { emulator: { rolloutDelayMs: 100 } });
    await stack.agent();
    west = await KubernetesEmulator.start({ rolloutDelayMs: 100, bookmarkIntervalMs: 200 });
    dir = mkdtempSync(join(tmpdir(), "flotilla-cli-rollout-"));
    writeFileSync(join(dir, "west.kubeconfig"), west.kubeconfigYaml());
    const { token } = await stack.t.client(RegionService).createAgentToken({ region: OTHER_REGION });
    westAgent = await spawnAgent(token, [
      ...["--ctrl-url", stack.t.url, "--region", OTHER_REGION, "--kubeconfig", join(dir, "west.kubeconfig")],
      ...["--bookmark-interval", "200ms", "--report-interval", "50ms", "--heartbeat-interval", "300ms", "--settle", "0"],
    ]);
    writeFileSync(join(dir, "admin.token"), `${ADMIN_TOKEN}\n`);
    env = { PATH: process.env.PATH, FLOTILLA_CONFIG: join(dir, "config.yaml") };
    assert.equal((await flotilla(["context", "set", "test", "--server", stack.t.url, "--token-file", join(dir, "admin.token")])).code, 0);
    const operators = stack.t.client(OperatorService);
    writeFileSync(join(dir, "dan.token"), (await operators.createOperator({ name: "dan", role: Role.DEPLOYER })).token);
    writeFileSync(join(dir, "vera.token"), (await operators.createOperator({ name: "vera", role: Role.VIEWER })).token);
  });
  after(async () => {
    await westAgent?.kill();
    await west?.stop();
    await stack?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("a malformed duration is refused naming the field, before anything is sent", async () => {
    const r = await flotilla(["apply", "-f", "-", "--server", "http://127.0.0.1:1"], shop("nginx:1.27", "bake: 5x"));
    assert.equal(r.code, 1);
    assert.equal(
      r.stderr,
      'error: invalid manifests, nothing was sent:\n  <stdin>#1: spec.strategy.waves[0].bake: "5x" is not a duration (such as 5s, 10m, 1h30m)\n',
    );
  });

  test("apply --wait exits 0 once both waves ran; get rollouts and rollout status show SUCCEEDED (golden); get -o yaml round-trips the strategy, diff and describe show it", async () => {
    const manifest = shop("nginx:1.27", "bake: 1s, maxParallel: 1", "{name: rest, maxParallel: '50%', progressDeadline: 1h30m}");
    const applied = await flotilla(["apply", "-f", "-", "--wait", "--timeout", "60s"], manifest);
    assert.equal(applied.code, 0, applied.stderr);
    assert.match(applied.stdout, /^deployment\/shop created\n/);
    assert.match(applied.stdout, /^deployment\/shop: rollout shop-1 PROGRESSING: wave canary: every region RUNNING, baking 1s$/m);
    assert.match(applied.stdout, /deployment\/shop: rollout shop-1 SUCCEEDED: every wave runs revision 1\n$/);
    assert.equal(imageOf(westDeployment()), "nginx:1.27");

    const golden = (name: string, text: string) => {
      const file = join(GOLDEN, name);
      if (process.env.FLOTILLA_UPDATE_GOLDEN) writeFileSync(file, text);
      assert.equal(text, readFileSync(file, "utf8"), name);
    };
    const listed = await flotilla(["get", "rollouts"]);
    assert.equal(listed.code, 0, listed.stderr);
    golden("get-rollouts.txt", maskedTable(listed.stdout));
    const status = await flotilla(["rollout", "status", "shop", "--watch=false"]);
    assert.equal(status.code, 0, status.stderr);
    golden("rollout-status.txt", maskedStatus(status.stdout));
    // Followed live, an ended rollout ends the command at once, with the same view.
    const live = await flotilla(["rollout", "status", "shop", "--timeout", "10s"]);
    assert.equal(live.code, 0, live.stderr);
    assert.equal(live.stdout, status.stdout);
    const yaml = parse((await flotilla(["get", "rollout", "shop", "-o", "yaml"])).stdout);
    assert.equal(yaml.kind, "Rollout");
    assert.equal(yaml.state, "SUCCEEDED");
    assert.deepEqual(
      yaml.waves.map((w: { name: string; regions: { region: string; revision: string; phase: string }[] }) => [
        w.name,
        w.regions.map((r) => [r.region, r.phase]),
      ]),
      [
        ["canary", [[REGION, "RUNNING"]]],
        ["rest", [[OTHER_REGION, "RUNNING"]]],
      ],
    );

    const got = await flotilla(["get", "deploy", "shop", "-o", "yaml"]);
    assert.deepEqual(parse(got.stdout).spec.strategy, {
      waves: [
        { name: "canary", regions: [REGION], maxParallel: "1", bake: "1s" },
        { name: "rest", maxParallel: "50%", progressDeadline: "90m" },
      ],
      onFailure: "ROLLBACK",
    });
    assert.equal((await flotilla(["apply", "-f", "-"], got.stdout)).stdout, "deployment/shop unchanged\n", "what get -o yaml prints applies unchanged");
    const diff = await flotilla(["diff", "-f", "-"], manifest.replace("bake: 1s", "bake: 2s").replace("onFailure: ROLLBACK", "onFailure: PAUSE"));
    assert.equal(diff.code, 1);
    assert.equal(diff.stdout, '~ deployment/shop (revision 1)\n    ~ strategy.onFailure: "ROLLBACK" → "PAUSE"\n    ~ strategy.waves[0].bake: "1s" → "2s"\n');

    const described = await flotilla(["describe", "deployment", "shop"]);
    assert.equal(described.code, 0, described.stderr);
    assert.match(
      described.stdout,
      new RegExp(
        `^Strategy:\\n  canary: regions ${REGION}, 1 at a time, bake 1s\\n  rest: every placement region not in a wave before, 50% at a time, progress deadline 90m\\n  on failure: ROLLBACK\\n`,
        "m",
      ),
    );
    assert.match(described.stdout, /^Rollout: +shop-1 \(deployment\/shop to revision 1\)\nState: +SUCCEEDED, wave 2\/2 rest\n/m);
    assert.match(described.stdout, /^Recent rollouts:\n {2}NAME .*\n {2}shop-1 +shop +1 +SUCCEEDED +2\/2 rest /m);
  });

  test("a failing image: apply --wait exits 1 naming the region and the reason; the canary gets its spec back, the second wave's region never ran it", async () => {
    const westVersion = desiredVersion(westDeployment());
    const failing = await flotilla(["apply", "-f", "-", "--wait", "--timeout", "60s"], shop("nginx:fail", "bake: 1s, progressDeadline: 3s"));
    assert.equal(failing.code, 1, failing.stdout);
    assert.match(failing.stdout, /^deployment\/shop configured\n/);
    assert.match(failing.stderr, new RegExp(`^error: deployment/shop: rollout shop-2 ROLLED_BACK: .*${REGION}: (FAILED|PROGRESSING).*\\n$`));
    assert.equal(imageOf(westDeployment()), "nginx:1.27");
    assert.equal(desiredVersion(westDeployment()), westVersion, "west was never written");
    await waitFor(() => imageOf(deploymentOf(stack.emulator, "demo", "shop")) === "nginx:1.27", "east back on nginx:1.27");
    const status = await flotilla(["rollout", "status", "shop"]);
    assert.equal(status.code, 1, "the rolled back rollout, followed, exits 1");
    assert.match(status.stdout, /^State: +ROLLED_BACK, wave 1\/2 canary$/m);
    assert.match(status.stdout, new RegExp(`^ {2}rest +pending +- +${OTHER_REGION} +1 +RUNNING$`, "m"), "west still runs revision 1");
    assert.match(status.stderr, /^error: deployment\/shop: rollout shop-2 ROLLED_BACK: /);
    assert.equal((await flotilla(["wait", "deployment", "shop", "--timeout", "10s"])).code, 1, "wait says the last change failed");
  });

  test("an approval wave: apply --wait times out (exit 2) while it waits; a viewer's approve is refused; a deployer's lets it finish", async () => {
    const manifest = shop("nginx:1.28", "bake: 0s", "{name: rest, approval: true}");
    const timedOut = await flotilla(["apply", "-f", "-", "--wait", "--timeout", "3s"], manifest);
    assert.equal(timedOut.code, 2, timedOut.stderr);
    assert.match(timedOut.stdout, /deployment\/shop: rollout shop-4 WAITING_APPROVAL: wave rest waits for approval \(flotilla rollout approve shop\)\n/);
    assert.match(timedOut.stderr, /^error: timed out after 3s waiting for deployment\/shop to be RUNNING\n$/);
    const once = await flotilla(["rollout", "status", "shop", "--watch=false"]);
    assert.equal(once.code, 2, "printed once, a rollout under way exits 2");
    assert.match(once.stdout, /^ {2}rest +waiting for approval +- +west +\d+ +RUNNING$/m);
    const refused = await flotilla(["rollout", "approve", "shop"], "", { FLOTILLA_TOKEN_FILE: join(dir, "vera.token") });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^error: PERMISSION_DENIED: .*deployer.*\n$/);
    const approved = await flotilla(["rollout", "approve", "shop", "-m", "canary looks fine"], "", { FLOTILLA_TOKEN_FILE: join(dir, "dan.token") });
    assert.equal(approved.code, 0, approved.stderr);
    assert.match(approved.stdout, /^rollout\/shop-4 PROGRESSING, wave 2\/2 rest: /);
    const waited = await flotilla(["wait", "deployment", "shop", "--timeout", "60s"]);
    assert.equal(waited.code, 0, waited.stderr);
    assert.equal(imageOf(westDeployment()), "nginx:1.28");
    const audit = await flotilla(["audit", "--actor", "dan"]);
    assert.match(audit.stdout, /dan +\S*[Aa]pprove\S* +rollout\/shop-4 .*canary looks fine/);
  });

  test("pause, resume and promote a bake; abort another rollout, which wait reports as failed", async () => {
    assert.equal((await flotilla(["apply", "-f", "-"], shop("nginx:1.29", "bake: 1h"))).code, 0);
    await statusUntil(/^ {2}canary +baking +\d+s left of 1h /m);
    const paused = await flotilla(["rollout", "pause", "shop"]);
    assert.match(paused.stdout, /^rollout\/shop-5 PAUSED, wave 1\/2 canary: paused at wave canary\n$/, paused.stderr);
    assert.match((await flotilla(["rollout", "status", "shop", "--watch=false"])).stdout, /^ {2}canary +paused +1h /m);
    const again = await flotilla(["rollout", "pause", "shop"]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /^error: FAILED_PRECONDITION: rollout shop-5 is PAUSED/);
    assert.match((await flotilla(["rollout", "resume", "shop"])).stdout, /^rollout\/shop-5 PROGRESSING, wave 1\/2 canary: /);
    await statusUntil(/^ {2}canary +baking /m);
    assert.match((await flotilla(["rollout", "promote", "shop"])).stdout, /^rollout\/shop-5 PROGRESSING, wave 2\/2 rest: /);
    assert.equal((await flotilla(["wait", "deployment", "shop", "--timeout", "60s"])).code, 0);
    assert.equal(imageOf(westDeployment()), "nginx:1.29");

    assert.equal((await flotilla(["apply", "-f", "-"], shop("nginx:1.30", "bake: 1h"))).code, 0);
    await statusUntil(/^ {2}canary +baking /m);
    const aborted = await flotilla(["rollout", "abort", "shop-6", "-m", "not today"]);
    assert.match(aborted.stdout, /^rollout\/shop-6 ABORTED, wave 1\/2 canary: aborted at wave canary\n$/, aborted.stderr);
    const waited = await flotilla(["wait", "deployment", "shop", "--timeout", "10s"]);
    assert.equal(waited.code, 1);
    assert.equal(waited.stderr, "error: deployment/shop: rollout shop-6 ABORTED: aborted at wave canary\n");
    await waitFor(() => imageOf(deploymentOf(stack.emulator, "demo", "shop")) === "nginx:1.29", "east back on nginx:1.29");
    assert.equal(imageOf(westDeployment()), "nginx:1.29");
    assert.match((await flotilla(["get", "rollouts"])).stdout, /^shop-6 +shop +6 +ABORTED /m);
  });
});
