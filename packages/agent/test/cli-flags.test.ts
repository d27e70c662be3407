// The agent's flags for namespaces and ownership: listed in --help with their environment
// variables and defaults, and bad values rejected before anything starts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AGENT_OPTIONS } from "../src/flags.ts";
import { agentConfig } from "../src/main.ts";
import type { KubernetesTarget } from "../src/targets/kubernetes.ts";
import { kubeconfigYaml } from "@flotilla/k8s-emulator";

const agentMain = new URL("../src/main.ts", import.meta.url).pathname;
const agent = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [agentMain, ...args], { encoding: "utf8", env: { ...process.env, ...env }, timeout: 30_000 });

test("agent --help lists every flag with its variable and default", () => {
  const { stdout, status } = agent(["--help"]);
  assert.equal(status, 0);
  assert.match(stdout, /--allowed-namespaces <value>\n.*\n\s+env FLOTILLA_AGENT_ALLOWED_NAMESPACES, default \*\n/);
  assert.match(stdout, /--denied-namespaces <value>\n.*\n\s+env FLOTILLA_AGENT_DENIED_NAMESPACES, default kube-system,kube-public,kube-node-lease,default\n/);
  assert.match(stdout, /--ownership-recheck-interval <value>\n.*\n\s+env FLOTILLA_AGENT_OWNERSHIP_RECHECK_INTERVAL, default 30s\n/);
  for (const { flag, default: fallback } of AGENT_OPTIONS) {
    const env = `FLOTILLA_AGENT_${flag.toUpperCase().replaceAll("-", "_")}`;
    assert.ok(stdout.includes(`  --${flag}`) && stdout.includes(`env ${env}${fallback ? `, default ${fallback}` : ""}\n`), `--${flag} in --help`);
  }
});

test("agent: a zero or malformed ownership recheck interval is refused (flag or environment)", () => {
  for (const [args, env] of [
    [["--ownership-recheck-interval", "0"], {}],
    [[], { FLOTILLA_AGENT_OWNERSHIP_RECHECK_INTERVAL: "soon" }],
  ] as const) {
    const { stderr, status } = agent(["--region", "east", "--token", "t", "--target", "render", "--render-dir", "/nonexistent", ...args], env);
    assert.equal(status, 2, stderr);
    assert.match(stderr, /ownership-recheck-interval/);
  }
});

test("agent: namespace lists, the recheck interval and ctrl's call deadline reach the config (flags, else environment, else defaults); a zero deadline is refused", async () => {
  const dir = await mkdtemp(join(tmpdir(), "flotilla-cli-"));
  try {
    const base = ["--region", "east", "--token", "t", "--target", "render", "--render-dir", dir];
    const defaults = await agentConfig(base, {});
    assert.ok(defaults !== "help");
    assert.deepEqual(defaults.namespaces, { allowed: ["*"], denied: ["kube-system", "kube-public", "kube-node-lease", "default"] });
    assert.equal(defaults.ownershipRecheckMs, 30_000);
    const given = await agentConfig([...base, "--allowed-namespaces", "team-*, shared", "--ownership-recheck-interval", "5s"], {
      FLOTILLA_AGENT_DENIED_NAMESPACES: "team-secret*",
    });
    assert.ok(given !== "help");
    assert.deepEqual(given.namespaces, { allowed: ["team-*", "shared"], denied: ["team-secret*"] });
    assert.equal(given.ownershipRecheckMs, 5000);
    assert.equal(defaults.ctrlCallTimeoutMs, 10_000);
    const timeout = await agentConfig(base, { FLOTILLA_AGENT_CTRL_CALL_TIMEOUT: "3s" });
    assert.ok(timeout !== "help");
    assert.equal(timeout.ctrlCallTimeoutMs, 3000);
    await assert.rejects(agentConfig([...base, "--ctrl-call-timeout", "0s"], {}), /--ctrl-call-timeout must be positive/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("agent: the Kubernetes client's connection bound and idle timeout reach the client; bad values are refused", async () => {
  const dir = await mkdtemp(join(tmpdir(), "flotilla-cli-"));
  try {
    const kubeconfig = join(dir, "kubeconfig");
    await writeFile(kubeconfig, kubeconfigYaml("http://127.0.0.1:1"));
    const base = ["--region", "east", "--token", "t", "--target", "kubernetes", "--kubeconfig", kubeconfig];
    const clientOf = async (args: string[], env: Record<string, string> = {}) => {
      const config = await agentConfig([...base, ...args], env);
      assert.ok(config !== "help");
      return (config.target as KubernetesTarget).kubeClient;
    };
    const defaults = await clientOf([]);
    assert.equal(defaults.connection.maxConnections, 32);
    assert.equal(defaults.idleTimeoutMs, 300_000);
    const given = await clientOf(["--kube-max-connections", "4"], { FLOTILLA_AGENT_KUBE_IDLE_TIMEOUT: "30s" });
    assert.equal(given.connection.maxConnections, 4);
    assert.equal(given.idleTimeoutMs, 30_000);
    await assert.rejects(clientOf(["--kube-max-connections", "0"]), /--kube-max-connections must be a positive integer/);
    await assert.rejects(clientOf(["--kube-idle-timeout", "0s"]), /--kube-idle-timeout must be positive/);
    await assert.rejects(agentConfig([...base.slice(0, -1), join(dir, "none")], {}), /cannot read kubeconfig .*none: ENOENT/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
