// The Kubernetes a test runs against, written once and run on both targets:
// - `emulator`: packages/k8s-emulator in this process;
// - `real`: flotilla-kube (packages/kube-real): etcd, kube-apiserver, kube-controller-manager,
//   kube-scheduler and kwok, started from its built binary.
// On both, the agent's credential is a ServiceAccount token of
// system:serviceaccount:flotilla-system:flotilla-agent, bound by the RBAC of deploy/kubernetes
// applied with `kubectl apply -k`: never an admin credential. Tests act as a person with
// the admin kubeconfig.
import { execFile, execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { initPki } from "@flotilla/ctrl/pki";
import { ciliumNetworkPolicyCrd, KubernetesEmulator } from "@flotilla/k8s-emulator";
import { KubeClient, kubeconfigConnectionFromString, resourcePath, statusCodeOf, type ApiObject } from "@flotilla/agent/kubernetes";

const REPO = fileURLToPath(new URL("../../../", import.meta.url));
/** Where `pnpm kube:build` puts flotilla-kube. */
export const FLOTILLA_KUBE_BINARY = join(REPO, "packages/kube-real/bin/flotilla-kube");
/** The overlay whose ServiceAccount and RBAC the agent runs under. */
const AGENT_OVERLAY = join(REPO, "deploy/kubernetes/overlays/agent");
export const AGENT_SERVICE_ACCOUNT = "system:serviceaccount:flotilla-system:flotilla-agent";

export type KubeTargetName = "emulator" | "real";

export interface KubeCluster {
  readonly target: KubeTargetName;
  /** The server's URL. */
  readonly server: string;
  /** An admin kubeconfig (YAML): the test acting as a person. */
  readonly adminKubeconfig: string;
  readonly admin: KubeClient;
  readonly adminConfig: KubeConfig;
  /** The agent's kubeconfig (YAML): a ServiceAccount token bound by deploy/kubernetes' RBAC. */
  readonly agentKubeconfig: string;
  /** The interval at which the server sends watch bookmarks (an upper bound on the real one). */
  readonly bookmarkIntervalMs: number;
  /** The emulator itself, on that target only (fault injection, the request log). */
  readonly emulator?: KubernetesEmulator;
  /**
   * Restarts the API server (real: flotilla-kube on its data directory; the emulator: what a
   * restart does to watches, restartApiServer()). Objects stay; every watch is closed, and one
   * resumed from before the restart gets 410 Gone.
   */
  restartApiServer(): Promise<void>;
  /** Runs kubectl against the cluster as the admin (never synchronously: the emulator answers in this process). */
  kubectl(args: readonly string[], input?: string): Promise<string>;
  /** The object, or undefined when it does not exist. */
  get(apiVersion: string, kind: string, namespace: string | undefined, name: string): Promise<ApiObject | undefined>;
  stop(): Promise<void>;
}

export interface KubeTarget {
  name: KubeTargetName;
  /** false when the target can run here; otherwise why the tests skip (never under CI=true). */
  skip: string | false;
  start(options?: { failingImagePattern?: string }): Promise<KubeCluster>;
}

/** false when flotilla-kube is built; otherwise why its tests skip. Throws under CI=true. */
export function flotillaKubeMissing(): string | false {
  if (existsSync(FLOTILLA_KUBE_BINARY)) return false;
  const why = hasGo()
    ? "flotilla-kube is not built: run `pnpm kube:build`"
    : "Go is not installed, so flotilla-kube (the real Kubernetes target) cannot be built";
  if (process.env.CI === "true") throw new Error(`${why} (CI=true runs the real target, never skips it)`);
  return why;
}

function hasGo(): boolean {
  try {
    execFileSync("go", ["version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

export const kubeTargets: KubeTarget[] = [
  { name: "emulator", skip: false, start: startEmulatorCluster },
  { name: "real", skip: flotillaKubeMissing(), start: startRealCluster },
];

const EMULATOR_BOOKMARK_MS = 200;

async function startEmulatorCluster(options: { failingImagePattern?: string } = {}): Promise<KubeCluster> {
  // TLS, as kubectl sends no bearer token over plain HTTP.
  const dir = mkdtempSync(join(tmpdir(), "flotilla-emulator-"));
  const pki = initPki(join(dir, "pki"));
  const emulator = await KubernetesEmulator.start({
    rolloutDelayMs: 20,
    bookmarkIntervalMs: EMULATOR_BOOKMARK_MS,
    // A real API server's watch cache keeps 100 events of a resource by default.
    watchHistory: 100,
    rbac: true,
    tls: { cert: readFileSync(pki.serverCert), key: readFileSync(pki.serverKey) },
    // A second of progressDeadlineSeconds lasts what it does on a real server.
    progressDeadlineSecondMs: 1000,
    ...(options.failingImagePattern ? { failingImagePattern: new RegExp(options.failingImagePattern) } : {}),
  });
  const stop = async () => {
    await emulator.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  const restart = async () => emulator.restartApiServer();
  return clusterOf("emulator", emulator.kubeconfigYaml(), EMULATOR_BOOKMARK_MS, { stop, restart }, emulator);
}

/** How long flotilla-kube may take from start to its ready line (a cold machine, a busy CI). */
const REAL_READY_TIMEOUT_MS = 180_000;

async function startRealCluster(options: { failingImagePattern?: string } = {}): Promise<KubeCluster> {
  const dir = mkdtempSync(join(tmpdir(), "flotilla-kube-"));
  const port = await freePort();
  const kubeconfigPath = join(dir, "admin.kubeconfig");
  const args = [
    "--listen",
    `127.0.0.1:${port}`,
    "--data-dir",
    join(dir, "data"),
    "--kubeconfig-out",
    kubeconfigPath,
    "--etcd-unsafe-no-fsync",
    ...(options.failingImagePattern ? ["--failing-image-pattern", options.failingImagePattern] : []),
  ];
  let child = spawn(FLOTILLA_KUBE_BINARY, args, { stdio: ["ignore", "pipe", "pipe"] });
  const stop = async () => {
    await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
  };
  // Every part stops and starts again on the same data directory: etcd keeps the objects, and the
  // keys that signed the agent's token are the same.
  const restart = async () => {
    await stopChild(child);
    child = spawn(FLOTILLA_KUBE_BINARY, args, { stdio: ["ignore", "pipe", "pipe"] });
    await readyLine(child, REAL_READY_TIMEOUT_MS);
  };
  try {
    await readyLine(child, REAL_READY_TIMEOUT_MS);
  } catch (err) {
    await stop();
    throw err;
  }
  // The real server sends a bookmark about once a minute; tests wait no longer than that.
  return clusterOf("real", readFileSync(kubeconfigPath, "utf8"), 60_000, { stop, restart });
}

async function clusterOf(
  target: KubeTargetName,
  adminKubeconfig: string,
  bookmarkIntervalMs: number,
  { stop, restart }: { stop: () => Promise<void>; restart: () => Promise<void> },
  emulator?: KubernetesEmulator,
): Promise<KubeCluster> {
  const dir = mkdtempSync(join(tmpdir(), "flotilla-kubectl-"));
  const kubeconfigFile = join(dir, "admin.kubeconfig");
  writeFileSync(kubeconfigFile, adminKubeconfig, { mode: 0o600 });
  const kubectl = (args: readonly string[], input?: string) =>
    new Promise<string>((resolve, reject) => {
      const child = execFile("kubectl", ["--kubeconfig", kubeconfigFile, ...args], { encoding: "utf8" }, (err, stdout, stderr) =>
        err ? reject(new Error(`kubectl ${args.join(" ")}: ${stderr || err.message}`)) : resolve(stdout),
      );
      child.stdin!.end(input ?? "");
    });
  const admin = new KubeClient(await kubeconfigConnectionFromString(adminKubeconfig));
  const adminConfig = new KubeConfig();
  adminConfig.loadFromString(adminKubeconfig);
  const server = adminConfig.getCurrentCluster()!.server;
  try {
    if (target === "real") {
      // The emulator serves the kind built in; a real server learns it from its CRD.
      await kubectl(["apply", "--server-side", "-f", "-"], JSON.stringify(ciliumNetworkPolicyCrd()));
      // Polled rather than `kubectl wait`, which fails at once while the CRD has no conditions yet.
      await until(async () => {
        const crd = await admin.get<{ status?: { conditions?: { type: string; status: string }[] } }>(
          "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/ciliumnetworkpolicies.cilium.io",
        );
        return crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True") ?? false;
      }, "the CiliumNetworkPolicy CRD Established");
    }
    await kubectl(["apply", "-k", AGENT_OVERLAY]);
    if (target === "real") {
      // A new ValidatingAdmissionPolicy takes the API server a moment to load: until it refuses
      // the agent a Secret in kube-system (a server-side dry run as the agent; RBAC allows it),
      // no test starts.
      await until(
        () =>
          kubectl([
            "create",
            "secret",
            "generic",
            "probe",
            "--from-literal=k=v",
            "-n",
            "kube-system",
            "--dry-run=server",
            `--as=${AGENT_SERVICE_ACCOUNT}`,
          ]).then(
            () => false,
            (err: Error) => err.message.includes("flotilla-agent-managed-namespaces"),
          ),
        "the agent's admission policy in force",
      );
    }
    const token = (await kubectl(["create", "token", "flotilla-agent", "-n", "flotilla-system", "--duration=2h"])).trim();
    const agentKubeconfig = tokenKubeconfig(adminConfig, token);
    const get = async (apiVersion: string, kind: string, namespace: string | undefined, name: string) => {
      try {
        return await admin.get<ApiObject>(resourcePath({ apiVersion, kind, namespace, name }));
      } catch (err) {
        if (statusCodeOf(err) === 404) return undefined;
        throw err;
      }
    };
    return {
      target,
      server,
      adminKubeconfig,
      admin,
      adminConfig,
      agentKubeconfig,
      bookmarkIntervalMs,
      emulator,
      kubectl,
      get,
      restartApiServer: restart,
      async stop() {
        rmSync(dir, { recursive: true, force: true });
        await stop();
      },
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    await stop();
    throw err;
  }
}

/** A kubeconfig that authenticates with a bearer token to the admin kubeconfig's cluster. */
function tokenKubeconfig(admin: KubeConfig, token: string): string {
  const cluster = admin.getCurrentCluster()!;
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [cluster],
    users: [{ name: "flotilla-agent", token }],
    contexts: [{ name: "agent", cluster: cluster.name, user: "flotilla-agent" }],
    currentContext: "agent",
  });
  return config.exportConfig();
}

function readyLine(child: ChildProcess, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    const timer = setTimeout(() => reject(new Error(`flotilla-kube not ready in ${timeoutMs} ms: ${stderr}`)), timeoutMs);
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      if (line.startsWith("flotilla-kube ready")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`flotilla-kube exited (${code ?? signal}) before it was ready: ${stderr}`));
    });
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  await exited;
  clearTimeout(timer);
}

/** Polls `check` every 200 ms until it holds, failing after 60 s. */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (const deadline = Date.now() + 60_000; !(await check()); await new Promise((r) => setTimeout(r, 200))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
  }
}

async function freePort(): Promise<number> {
  const { createServer } = await import("node:net");
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
