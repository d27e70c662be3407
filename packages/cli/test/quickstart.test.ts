// The README's quick start, run as written: `pnpm start` (the real script, its processes and
// fixed ports) in a scratch directory that mirrors the repository, then each line of the
// README's CLI block in a shell there. diff is the one line that exits 1 (changes found). Then,
// on the same stack, the README's real service: probes, a budget, an autoscaler, a secret value.
// Then `pnpm start --regions`: a stack of several regions, each with its own cluster, where a
// staged deployment as a user types it rolls out wave by wave (apply --wait, rollout status).
// Then every other block of docs/ marked `sh runnable stack=local|regions|tls`, on that stack.
// Then `pnpm start --kube real`: the same stack on flotilla-kube, the CLI quick start's apply
// running there; and what --kube says when it is wrong or the binary is not built.
// Then `pnpm start --regions … --prometheus`: a real Prometheus scraping the emulators, where a
// canary that passes its probes and answers 20% with 500 fails its analysis and is rolled back.
// Then `pnpm start --sso`: the README's single sign-on as written, each `login` signed in at the
// real local provider's pages (as the user its context names) while the CLI waits.
// (One file: the stacks use the same fixed ports, so they run one after the other.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { spawn, spawnSync } from "node:child_process";
import { signInHeadless } from "@flotilla/dev-idp/headless";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { runnableBlock, runnableBlocks } from "@flotilla/testkit/docs";
import { flotillaKubeMissing } from "@flotilla/testkit/kube-target";
import { ROOT, shell, skip, startStack } from "./local-stack.ts";

/** The commands of the README's runnable block under `heading`; "(exits 1)" in a comment says what one exits with. */
const readmeCommands = (heading: string) => runnableBlock(ROOT, "README.md", heading).commands;

// The two stacks use the same fixed ports: one after the other.
test("the README's quick start with the CLI, then its real service, line by line", { skip, timeout: 240_000 }, async (t) => {
  const stack = await startStack();
  t.after(stack.stop);
  assert.match(stack.output(), /pnpm flotilla apply -f examples\/local\/ --wait/, "pnpm start points at the CLI");
  for (const { command, exit } of readmeCommands("## Quick start with the CLI")) {
    const result = shell(stack.dir, command);
    assert.equal(result.status, exit, `${command}\n${result.stdout}${result.stderr}`);
    if (command.includes("apply -f my-fleet/ --wait")) assert.match(result.stdout, /deployment\/web created\n[\s\S]*deployment\/web is RUNNING/);
    if (command.includes("get deployments")) assert.match(result.stdout, /^web +demo +nginx:1\.27 +1 +local:RUNNING 2\/2 /m);
    if (command.includes("history")) assert.match(result.stdout, /^2 +admin .* nginx:1\.28 +nginx 1\.28$/m);
    if (command.includes("describe")) assert.match(result.stdout, /^Image: +nginx:1\.27$/m);
  }
  // The service with its fixed names: probes, a budget, an autoscaler, a secret value.
  const outputs: string[] = [];
  for (const { command, exit } of readmeCommands("## A real service, locally")) {
    const result = shell(stack.dir, command);
    assert.equal(result.status, exit, `${command}\n${result.stdout}${result.stderr}`);
    outputs.push(result.stdout + result.stderr);
    if (command.includes("apply -f examples/service/api.yaml --wait"))
      assert.match(result.stdout, /deployment\/api created\n[\s\S]*deployment\/api is RUNNING/);
    if (command.includes("secret set")) assert.match(result.stdout, /deployment\/api: secret DB_PASSWORD set \(fingerprint [0-9a-f]{16}\)/);
    if (command.includes("get secrets")) assert.match(result.stdout, /^NAME +SET +FINGERPRINT\nDB_PASSWORD +true +[0-9a-f]{16}\n$/m);
    if (command.includes("describe")) {
      assert.match(result.stdout, /^ +readiness +http-get http:\/\/:80\/healthz .*period=5s/m);
      assert.match(result.stdout, /^ +liveness +tcp-socket :80 /m);
      assert.match(result.stdout, /^Disruption budget: +min available 1$/m);
      assert.match(result.stdout, /^ +local +2–5 replicas, cpu 70% +current \d+, desired \d+$/m);
      assert.match(result.stdout, /^ +DB_PASSWORD: set, fingerprint [0-9a-f]{16}$/m);
    }
    if (command.includes("get hpa,pdb,secrets")) {
      // kubectl's columns as the API server's Table gives them, one table per kind.
      assert.match(
        result.stdout,
        /^NAME +REFERENCE +TARGETS +MINPODS +MAXPODS +REPLICAS +AGE\nhorizontalpodautoscaler\.autoscaling\/api +Deployment\/api +cpu: <unknown>\/70% +2 +5 +\d+ +\S+$/m,
      );
      assert.match(result.stdout, /^NAME +MIN AVAILABLE +MAX UNAVAILABLE +ALLOWED DISRUPTIONS +AGE\npoddisruptionbudget\.policy\/api +1 +N\/A +\d+ +\S+$/m);
      assert.match(result.stdout, /^NAME +TYPE +DATA +AGE\nsecret\/api-env +Opaque +1 +\S+$/m);
    }
  }
  // The value reached the region's Secret, and no output and no log line of the stack.
  const secret = shell(stack.dir, "kubectl --kubeconfig .flotilla/kubeconfig get secret api-env -n demo -o jsonpath='{.data.DB_PASSWORD}'");
  const value = Buffer.from(secret.stdout, "base64").toString();
  assert.match(value, /^[0-9a-f]{32}$/, "the value the README's line set");
  for (const output of [...outputs, stack.output()]) assert.ok(!output.includes(value), "the value in an output or the stack's log");
});

test("pnpm start --regions: per region an emulator, an agent and a kubeconfig; regions labelled for a strategy; a staged rollout as the issue types it", {
  skip,
  timeout: 240_000,
}, async (t) => {
  const stack = await startStack(["--regions", "canary,eu,us"]);
  t.after(stack.stop);
  assert.match(stack.output(), /canary +tier=canary,geo=canary +emulator http:\/\/127\.0\.0\.1:7080 .* kubeconfig \.flotilla\/kubeconfig-canary/);
  const regions = shell(stack.dir, "pnpm flotilla get regions");
  assert.equal(regions.status, 0, regions.stderr);
  assert.match(regions.stdout, /^canary .*tier=canary/m);
  assert.match(regions.stdout, /^eu .*tier=prod/m);
  assert.doesNotMatch(regions.stdout, /^local /m, "plain pnpm start's region is not made");
  const canaries = shell(stack.dir, "pnpm -s flotilla get regions -l tier=canary -o json");
  const listed = JSON.parse(canaries.stdout) as { items: { metadata: { name: string } }[] };
  assert.deepEqual(
    listed.items.map((r) => r.metadata.name),
    ["canary"],
  );
  // The README's walkthrough as written: a good rollout, then a bad image stopped in the canary wave.
  const outputs = new Map<string, string>();
  for (const { command, exit } of readmeCommands("## A staged rollout, locally")) {
    const result = shell(stack.dir, command);
    assert.equal(result.status, exit, `${command}\n${result.stdout}${result.stderr}`);
    outputs.set(command, result.stdout + result.stderr);
  }
  const output = (part: string) => [...outputs].find(([command]) => command.includes(part))![1];
  assert.match(output("apply -f examples/staged/shop.yaml"), /rollout shop-1 SUCCEEDED/);
  assert.match(output("get rollouts"), /^shop-1 +shop +1 +SUCCEEDED +2\/2 rest /m);
  assert.match(output("apply -f bad-shop.yaml"), /ROLLED_BACK: canary: FAILED/);
  assert.match(output("rollout status"), /ROLLED_BACK/);
  assert.match(output("get deploy shop -n demo -o wide"), /nginx:1\.27/);
  for (const region of ["canary", "eu", "us"]) {
    const image = shell(
      stack.dir,
      `kubectl --kubeconfig .flotilla/kubeconfig-${region} get deploy shop -n demo -o jsonpath='{.spec.template.spec.containers[0].image}'`,
    );
    assert.equal(image.stdout, "nginx:1.27", `${region} runs the good image (the canary again, eu and us never left it)`);
  }
  const requests = shell(stack.dir, "pnpm -s flotilla describe deployment shop");
  assert.match(requests.stdout, /rollout/);
  // Each region's own cluster runs its own replicas.
  for (const [region, replicas] of [
    ["canary", 1],
    ["eu", 2],
    ["us", 2],
  ] as const) {
    const got = shell(stack.dir, `kubectl --kubeconfig .flotilla/kubeconfig-${region} get deploy shop -n demo -o jsonpath='{.spec.replicas}'`);
    assert.equal(got.status, 0, got.stderr);
    assert.equal(got.stdout, String(replicas), region);
  }
});

test("every runnable block of docs/ runs as written on the stack it names", { skip, timeout: 240_000 }, async () => {
  const blocks = runnableBlocks(ROOT).filter((block) => block.file !== "README.md" && block.stack !== "compose");
  assert.ok(blocks.length > 0, "the docs have runnable blocks");
  for (const [name, args] of [
    ["local", []],
    ["regions", ["--regions", "canary,eu,us"]],
    ["tls", ["--tls"]],
    ["prometheus", ["--regions", "canary,eu,us", "--prometheus"]],
  ] as const) {
    const blocksHere = blocks.filter((block) => block.stack === name);
    if (blocksHere.length === 0) continue;
    const stack = await startStack([...args]);
    try {
      // As Getting started has the reader export it.
      const env = { ADMIN_TOKEN: readFileSync(join(stack.dir, ".flotilla/admin-token"), "utf8").trim() };
      for (const block of blocksHere) {
        // A block's variables (CTRL=…; AUTH=…) hold for its later commands, as in one terminal.
        const assignments: string[] = [];
        for (const { command, exit } of block.commands) {
          const result = shell(stack.dir, [...assignments, command].join("\n"), env);
          assert.equal(result.status, exit, `${block.file}, ${block.heading}: ${command}\n${result.stdout}${result.stderr}`);
          if (/^(?:export\s+)?[A-Za-z_]\w*=/.test(command)) assignments.push(command);
        }
      }
    } finally {
      await stack.stop();
    }
  }
});

test("pnpm start --kube real: the same stack on flotilla-kube; the local quick start's apply runs there", {
  skip: skip || flotillaKubeMissing(),
  timeout: 300_000,
}, async (t) => {
  const stack = await startStack(["--kube", "real"], 180_000);
  t.after(stack.stop);
  assert.match(stack.output(), /Kubernetes \(flotilla-kube\) https:\/\/127\.0\.0\.1:6443/);
  const nodes = shell(stack.dir, "kubectl --kubeconfig .flotilla/kubeconfig get nodes -o name");
  assert.equal(nodes.status, 0, nodes.stderr);
  assert.match(nodes.stdout, /node\/kwok-node-0/);
  const apply = shell(stack.dir, "pnpm flotilla apply -f examples/local/ --wait");
  assert.equal(apply.status, 0, `${apply.stdout}${apply.stderr}`);
  assert.match(apply.stdout, /deployment\/web is RUNNING/);
  const pods = shell(stack.dir, "kubectl --kubeconfig .flotilla/kubeconfig get pods -n demo -o jsonpath='{.items[*].status.phase}'");
  assert.match(pods.stdout, /^Running( Running)*$/, pods.stdout);
});

test("pnpm start --kube: a value other than emulator or real, or real without a built binary, exits 2 saying why", { skip, timeout: 60_000 }, () => {
  const bogus = spawnSync(process.execPath, ["scripts/start.ts", "--kube", "minikube"], { cwd: ROOT, encoding: "utf8" });
  assert.equal(bogus.status, 2);
  assert.match(bogus.stderr, /--kube "minikube": want emulator \(the default\) or real/);
  // A mirror of the repository without packages/kube-real: as on a machine that never built it.
  const dir = mkdtempSync(join(tmpdir(), "flotilla-no-kube-"));
  try {
    mkdirSync(join(dir, "packages"));
    for (const entry of readdirSync(join(ROOT, "packages")))
      if (entry !== "kube-real") symlinkSync(join(ROOT, "packages", entry), join(dir, "packages", entry));
    for (const entry of ["node_modules", "scripts"]) symlinkSync(join(ROOT, entry), join(dir, entry));
    const unbuilt = spawnSync(process.execPath, ["scripts/start.ts", "--kube", "real"], { cwd: dir, encoding: "utf8" });
    assert.equal(unbuilt.status, 2);
    assert.match(unbuilt.stderr, /--kube real needs packages\/kube-real\/bin\/flotilla-kube: build it with `pnpm kube:build`/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// Debian's prometheus: CI installs it (.ci/run) and must run this; elsewhere it may be missing.
const prometheusMissing = spawnSync("prometheus", ["--version"]).status !== 0;
const prometheusSkip = skip || (prometheusMissing && !process.env.CI ? "prometheus is not on PATH (apt-get install prometheus)" : false);

test("pnpm start --prometheus: the README's bake judged by metrics, as written, on a real Prometheus: nginx:err passes its probes in the canary, fails its analysis, is rolled back; eu and us never touched", {
  skip: prometheusSkip,
  timeout: 240_000,
}, async (t) => {
  assert.ok(!prometheusMissing, "prometheus is on PATH (CI installs it: .ci/run)");
  const stack = await startStack(["--regions", "canary,eu,us", "--prometheus"]);
  t.after(stack.stop);
  assert.match(stack.output(), /Prometheus http:\/\/127\.0\.0\.1:7079 scrapes every emulator's pods every 2s/);
  const regions = JSON.parse(shell(stack.dir, "pnpm -s flotilla get regions -o json").stdout) as { items: { metadata: { name: string } }[] };
  assert.equal(regions.items.length, 3);
  const outputs = new Map<string, string>();
  for (const { command, exit } of readmeCommands("### A bake judged by metrics")) {
    const result = shell(stack.dir, command);
    assert.equal(result.status, exit, `${command}\n${result.stdout}${result.stderr}`);
    outputs.set(command, result.stdout + result.stderr);
  }
  const output = (part: string) => [...outputs].find(([command]) => command.includes(part))![1];
  assert.match(output("apply -f examples/staged/shop-analysis.yaml"), /rollout shop-1 SUCCEEDED/);
  const failed = output("apply -f err-shop.yaml");
  assert.match(failed, /rollout shop-2 PROGRESSING: wave canary: every region RUNNING/, "the erroring canary passed its probes");
  assert.match(
    failed,
    /ROLLED_BACK: wave canary: analysis error-rate in canary failed: 1 failed measurement \(failureLimit 0\); last result 0\.(1[5-9]\d*|2|2[0-5]\d*) FAILED/,
  );
  assert.match(output("rollout status"), /ROLLED_BACK/);
  // The analysis as rollout status shows it: the canary's measurements, the failing one last, and the condition.
  assert.match(
    output("rollout status"),
    /^Analysis of wave canary:\n {2}ANALYSIS +REGION +PHASE +LAST MEASUREMENTS +CONDITION\n {2}error-rate +canary +FAILED +(?:.*, )?0\.\d+ FAILED +success when result < 0\.05, failure when result >= 0\.05$/m,
  );
  assert.match(
    output("rollout status"),
    /^ {2}canary +rolled back +5s +canary +3 +[A-Z]+ \(rolled back\)$/m,
    "the canary runs revision 3 (revision 1's spec), rolled back",
  );
  for (const region of ["canary", "eu", "us"]) {
    const image = shell(
      stack.dir,
      `kubectl --kubeconfig .flotilla/kubeconfig-${region} get deploy shop -n demo -o jsonpath='{.spec.template.spec.containers[0].image}'`,
    );
    assert.equal(image.stdout, "nginx:1.27", `${region} runs the good image (the canary again, eu and us never left it)`);
  }
  // eu and us were never written revision 2: their pods still carry revision 1.
  for (const region of ["eu", "us"]) {
    const revision = shell(
      stack.dir,
      `kubectl --kubeconfig .flotilla/kubeconfig-${region} get deploy shop -n demo -o jsonpath='{.spec.template.metadata.labels.flotilla\\.dev/revision}'`,
    );
    assert.equal(revision.stdout, "1", region);
  }
  // The measurements came from the real Prometheus: it holds the canary's revision-2 500s (of pods gone since).
  const query = encodeURIComponent('sum(max_over_time(http_requests_total{region="canary",deployment="shop",revision="2",code="500"}[5m]))');
  const answer = (await (await fetch(`http://127.0.0.1:7079/api/v1/query?query=${query}`)).json()) as { data: { result: { value: [number, string] }[] } };
  assert.ok(Number(answer.data.result[0]?.value[1]) > 0, "the canary's 500s are in Prometheus");
});

test("pnpm start --sso: the README's single sign-on as written: alice and bob sign in at the local provider; each deploys to its team's project only; the audit trail shows the denied attempt", {
  skip,
  timeout: 240_000,
}, async (t) => {
  const stack = await startStack(["--sso"]);
  t.after(stack.stop);
  assert.match(stack.output(), /Single sign-on: the identity provider http:\/\/127\.0\.0\.1:7075/);
  const outputs = new Map<string, string>();
  for (const { command, exit } of readmeCommands("## Single sign-on, locally")) {
    const user = / login\b/.test(command) ? /--context (\w+)/.exec(command)?.[1] : undefined;
    const result = user ? await loginAs(stack.dir, command, user) : shell(stack.dir, command);
    assert.equal(result.status, exit, `${command}\n${result.stdout}${result.stderr}`);
    outputs.set(command, result.stdout + result.stderr);
  }
  const output = (part: string) => [...outputs].find(([command]) => command.includes(part))![1];
  assert.match(output("alice login"), /To sign in, open http:\/\/127\.0\.0\.1:7075\/device and enter the code/);
  assert.match(output("alice whoami"), /subject: alice\ngroups: {2}team-a\n[\s\S]*team-a +deployer/);
  assert.match(output("alice apply -f examples/sso/a-web.yaml"), /deployment\/a-web created/);
  assert.match(output("alice apply -f examples/sso/b-web.yaml"), /PERMISSION_DENIED: .*project "team-b"/);
  assert.match(output("bob apply"), /deployment\/b-web created/);
  assert.match(output("bob get deployments"), /^b-web /m);
  assert.doesNotMatch(output("bob get deployments"), /^a-web /m);
  const audit = output("audit --project team-b");
  assert.match(audit, /allowed +team-b +oidc:bob\(team-b\) +CreateDeployment +deployment\/b-web /);
  assert.match(audit, /denied +team-b +oidc:alice\(team-a\) +\w+Deployment +deployment\/b-web /);
  // The console client's secret is in its file (mode 0600) only: not in the process list, not in the log.
  const secret = readFileSync(join(stack.dir, ".flotilla/oidc-client-secret"), "utf8").trim();
  assert.equal(statSync(join(stack.dir, ".flotilla/oidc-client-secret")).mode & 0o777, 0o600);
  assert.ok(!spawnSync("ps", ["-eo", "args"], { encoding: "utf8" }).stdout.includes(secret), "the client secret in the process list");
  assert.ok(!stack.output().includes(secret), "the client secret in the stack's log");
  // No token of theirs in the stack's log.
  const config = readFileSync(join(stack.dir, "config.yaml"), "utf8");
  for (const token of config.matchAll(/(?:id|refresh)-token: (\S+)/g)) assert.ok(!stack.output().includes(token[1]!), "a token in the stack's log");
});

/** Runs a `login` line in bash, and signs in as `user` at the URL and code it prints. */
function loginAs(dir: string, command: string, user: string): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", command], { cwd: dir, env: { ...process.env, FLOTILLA_CONFIG: join(dir, "config.yaml") } });
    let stdout = "";
    let stderr = "";
    let signing = false;
    child.stdout.on("data", (d) => {
      stdout += d;
      const printed = /open (\S+) and enter the code (\S+)/.exec(stdout);
      if (printed && !signing) {
        signing = true;
        signInHeadless(`${printed[1]}?user_code=${printed[2]}`, user, user).catch(reject);
      }
    });
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ status: code ?? -1, stdout, stderr }));
  });
}
