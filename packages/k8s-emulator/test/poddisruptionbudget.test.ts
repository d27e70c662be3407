// policy/v1 PodDisruptionBudget through the real kubectl: the API server's validation (at most
// one bound, IntOrString percentages, the selector), the status the disruption controller
// computes from the matching pods as they become ready and as the budget changes, and the
// columns of `kubectl get pdb`.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { KubernetesEmulator } from "../src/index.ts";

const KUBECTL = (process.env.PATH ?? "")
  .split(delimiter)
  .map((dir) => join(dir, "kubectl"))
  .find((candidate) => existsSync(candidate));
const skip = KUBECTL === undefined && process.env.CI !== "true" ? "kubectl not found on PATH (required when CI=true)" : false;

describe("PodDisruptionBudget", { skip }, () => {
  let emu: KubernetesEmulator;
  let dir: string;

  function kubectl(args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
    assert.ok(KUBECTL, "kubectl is required when CI=true");
    return new Promise((resolve) => {
      const child = execFile(
        KUBECTL,
        ["--kubeconfig", join(dir, "kubeconfig"), "--cache-dir", join(dir, "cache"), ...args],
        { env: { PATH: process.env.PATH, HOME: dir }, timeout: 60_000 },
        (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout, stderr }),
      );
      if (input !== undefined) child.stdin?.end(input);
    });
  }
  async function ok(args: string[], input?: string): Promise<string> {
    const r = await kubectl(args, input);
    assert.equal(r.code, 0, `kubectl ${args.join(" ")} failed: ${r.stderr}`);
    return r.stdout;
  }
  async function statusOf(name: string): Promise<Record<string, unknown>> {
    return JSON.parse(await ok(["get", "pdb", name, "-n", "demo", "-o", "json"])).status;
  }
  async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
    for (let i = 0; i < 200; i++) {
      if (await check()) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail(`timed out waiting for ${what}`);
  }
  const budget = (name: string, bound: string) => `
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: ${name}, namespace: demo}
spec:
  ${bound}
  selector: {matchLabels: {app: web}}
`;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "pdb-emu-"));
    emu = await KubernetesEmulator.start({ rolloutDelayMs: 100 });
    await emu.writeKubeconfig(join(dir, "kubeconfig"));
    await ok(["create", "namespace", "demo"]);
  });
  after(async () => {
    await emu?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("refuses what the API server refuses, with its messages", async () => {
    const both = await kubectl(["apply", "-f", "-"], budget("both", "minAvailable: 1\n  maxUnavailable: 1"));
    assert.notEqual(both.code, 0);
    assert.match(both.stderr, /spec: Invalid value: .*minAvailable and maxUnavailable cannot be both set/);
    const percent = await kubectl(["apply", "-f", "-"], budget("percent", 'minAvailable: "150%"'));
    assert.match(percent.stderr, /spec\.minAvailable: Invalid value: "150%": must not be greater than 100%/);
    const notPercent = await kubectl(["apply", "-f", "-"], budget("text", 'maxUnavailable: "half"'));
    assert.match(notPercent.stderr, /spec\.maxUnavailable: Invalid value: "half": a valid percent string must be a numeric string followed by an ending '%'/);
    const operator = await kubectl(
      ["apply", "-f", "-"],
      budget("op", "minAvailable: 1").replace("{matchLabels: {app: web}}", "{matchExpressions: [{key: app, operator: Near, values: [web]}]}"),
    );
    assert.match(operator.stderr, /spec\.selector\.matchExpressions\[0\]\.operator: Invalid value: "Near": not a valid selector operator/);
  });

  it("computes its status from the matching pods, and kubectl get pdb shows it", async () => {
    await ok(["apply", "-f", "-"], budget("web", "minAvailable: 2"));
    // Before any pod: the zero counts, no disruption allowed.
    assert.deepEqual(
      { ...(await statusOf("web")), conditions: undefined },
      { observedGeneration: 1, disruptionsAllowed: 0, currentHealthy: 0, desiredHealthy: 2, expectedPods: 0, conditions: undefined },
    );
    await ok(["create", "deployment", "web", "-n", "demo", "--image", "nginx:1.27", "--replicas", "3"]);
    await eventually(async () => (await statusOf("web")).currentHealthy === 3, "three healthy pods");
    const status = await statusOf("web");
    assert.deepEqual(
      { ...status, conditions: undefined },
      {
        observedGeneration: 1,
        disruptionsAllowed: 1,
        currentHealthy: 3,
        desiredHealthy: 2,
        expectedPods: 3,
        conditions: undefined,
      },
    );
    const [condition] = status.conditions as Record<string, unknown>[];
    assert.deepEqual(
      { ...condition, lastTransitionTime: undefined },
      {
        type: "DisruptionAllowed",
        status: "True",
        lastTransitionTime: undefined,
        reason: "SufficientPods",
        message: "",
      },
    );

    // A percentage of unavailable pods counts the Deployment's scale, rounded up: 3 - ceil(1.5).
    await ok(["apply", "-f", "-"], budget("web", 'maxUnavailable: "50%"'));
    await eventually(async () => (await statusOf("web")).observedGeneration === 2, "the changed budget observed");
    assert.deepEqual(
      { ...(await statusOf("web")), conditions: undefined },
      {
        observedGeneration: 2,
        disruptionsAllowed: 2,
        currentHealthy: 3,
        desiredHealthy: 1,
        expectedPods: 3,
        conditions: undefined,
      },
    );

    await ok(["apply", "-f", "-"], budget("all", 'minAvailable: "100%"'));
    await eventually(async () => (await statusOf("all")).expectedPods === 3, "the second budget computed");
    const table = await ok(["get", "pdb", "-n", "demo"]);
    const lines = table.trim().split("\n");
    assert.match(lines[0]!, /^NAME\s+MIN AVAILABLE\s+MAX UNAVAILABLE\s+ALLOWED DISRUPTIONS\s+AGE$/);
    assert.match(lines[1]!, /^all\s+100%\s+N\/A\s+0\s+\d+s$/);
    assert.match(lines[2]!, /^web\s+N\/A\s+50%\s+2\s+\d+s$/);
    const [allCondition] = (await statusOf("all")).conditions as Record<string, unknown>[];
    assert.equal(allCondition?.reason, "InsufficientPods");
  });
});
