// `pnpm start`: the whole thing locally on the embedded defaults — the Kubernetes API
// emulator, ctrl on SQLite, and one agent for region `local` — with prefixed logs.
// `pnpm start --tls`: the same over mTLS, with getting-started certificates in .flotilla/pki.
// `pnpm start --regions canary,eu,us`: per region an emulator and an agent (kubeconfig at
// .flotilla/kubeconfig-<region>); the first region is labelled tier=canary, the others
// tier=prod, and each geo=<name>, so that a staged strategy can select them.
// `pnpm start --prometheus` (with --regions too): Debian's `prometheus` scraping every emulator's
// pod metrics every 2 s, each target labelled with its region, set as every region's
// metrics.prometheus.address, so that a strategy's analyses run (docs/rollout-analysis.md).
// `pnpm start --sso`: also a local OpenID provider (packages/dev-idp, a development tool) at
// http://127.0.0.1:7075 with users alice and bob (groups team-a, team-b), ctrl accepting its
// tokens and signing the console in with it, and projects team-a and team-b
// (examples/sso/projects.yaml) granting each group the deployer role (docs/guides/sso.md).
// `pnpm start --kube real`: flotilla-kube (a real API server, controllers and kwok, built by
// `pnpm kube:build`) in place of each emulator; the emulator stays the default (no Go needed).
// Ctrl-C stops everything.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { KubeClient, kubeconfigConnectionFromString, type ApiObject } from "@flotilla/agent/kubernetes";
import { ciliumNetworkPolicyCrd } from "@flotilla/k8s-emulator";
import { AGENT_ENVIRONMENT, AGENT_NODE_FLAGS } from "@flotilla/agent/node-flags";
import { agentFiles, initPki, issueAgent, pkiFiles } from "@flotilla/ctrl/pki";
import { CTRL_ENVIRONMENT, CTRL_NODE_FLAGS } from "@flotilla/ctrl/node-flags";
import { writeSecretsKeyFile } from "@flotilla/ctrl/secrets-key-file";
import { configPath, setContext } from "@flotilla/cli/config";
import { resolve } from "node:path";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    tls: { type: "boolean", default: false },
    regions: { type: "string" },
    kube: { type: "string", default: "emulator" },
    prometheus: { type: "boolean", default: false },
    sso: { type: "boolean", default: false },
  },
});
const FLOTILLA_KUBE = "packages/kube-real/bin/flotilla-kube";
if (args.kube !== "emulator" && args.kube !== "real") {
  console.error(`pnpm start: --kube ${JSON.stringify(args.kube)}: want emulator (the default) or real`);
  process.exit(2);
}
const REAL_KUBE = args.kube === "real";
if (REAL_KUBE && !existsSync(FLOTILLA_KUBE)) {
  console.error(`pnpm start: --kube real needs ${FLOTILLA_KUBE}: build it with \`pnpm kube:build\` (Go 1.26 or newer; the first build takes minutes)`);
  process.exit(2);
}
const PROMETHEUS = args.prometheus;
if (PROMETHEUS && REAL_KUBE) {
  console.error("pnpm start: --prometheus scrapes the emulators' pod metrics; flotilla-kube (--kube real) serves none");
  process.exit(2);
}
if (PROMETHEUS && spawnSync("prometheus", ["--version"]).status !== 0) {
  console.error("pnpm start: --prometheus needs Prometheus on PATH: `apt-get install prometheus` (Debian's package)");
  process.exit(2);
}
/** The local Prometheus: its address (beside ctrl's ports, not 9090: a packaged Prometheus may run there), its scrape interval. */
const PROMETHEUS_ADDRESS = "127.0.0.1:7079";
const SCRAPE_INTERVAL = "2s";
const TLS = args.tls;
const CTRL = TLS ? "https://127.0.0.1:7070" : "http://127.0.0.1:7070";
const PKI_DIR = ".flotilla/pki";
const SECRETS_KEY_FILE = ".flotilla/secrets-key.json";
const SSO = args.sso;
/** The local OpenID provider of --sso, and the console client's secret (made once, mode 0600; never on a command line). */
const IDP_LISTEN = "127.0.0.1:7075";
const IDP_ISSUER = `http://${IDP_LISTEN}`;
const OIDC_SECRET_FILE = ".flotilla/oidc-client-secret";

/** A region of the local stack: its Kubernetes (the emulator or flotilla-kube), its agent's health port and its labels. */
interface LocalRegion {
  name: string;
  /** host:port of the region's Kubernetes API. */
  kube: string;
  agentHealth: string;
  kubeconfig: string;
  labels: Record<string, string>;
}

/** Plain `pnpm start`: region `local` on the default ports; `--regions`: one of each per region. */
function localRegions(): LocalRegion[] {
  if (args.regions === undefined) {
    return [
      { name: "local", kube: REAL_KUBE ? "127.0.0.1:6443" : "127.0.0.1:7072", agentHealth: "127.0.0.1:7071", kubeconfig: ".flotilla/kubeconfig", labels: {} },
    ];
  }
  const names = args.regions.split(",").map((name) => name.trim());
  const invalid = names.find((name) => !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name));
  if (invalid !== undefined) throw new Error(`--regions: ${JSON.stringify(invalid)} is not a DNS-1123 label (lower-case letters, digits and '-')`);
  if (new Set(names).size !== names.length) throw new Error("--regions: a region is named twice");
  if (names.length > 10) throw new Error("--regions: at most 10 regions locally");
  return names.map((name, i) => ({
    name,
    kube: REAL_KUBE ? `127.0.0.1:${6443 + i}` : `127.0.0.1:${7080 + i}`,
    agentHealth: `127.0.0.1:${7090 + i}`,
    kubeconfig: `.flotilla/kubeconfig-${name}`,
    labels: { tier: i === 0 ? "canary" : "prod", geo: name },
  }));
}

let REGIONS: LocalRegion[];
try {
  REGIONS = localRegions();
} catch (error) {
  console.error(`pnpm start: ${(error as Error).message}`);
  process.exit(2);
}
const children: { name: string; child: ChildProcess }[] = [];
let stopping = false;

/** Starts `node ...script` (Node flags, then the script) with `args`; resolves once a line matches `ready`. */
function run(name: string, script: readonly string[], args: string[], env: Record<string, string> = {}, ready?: RegExp): Promise<void> {
  return runCommand(name, process.execPath, [...script, ...args], env, ready);
}

/** Starts `command` with `args`, its output prefixed with `name`; resolves once a line matches `ready`. */
function runCommand(name: string, command: string, args: string[], env: Record<string, string> = {}, ready?: RegExp): Promise<void> {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  children.push({ name, child });
  let resolveReady: () => void = () => {};
  const started = new Promise<void>((resolve) => (resolveReady = resolve));
  for (const stream of [child.stdout!, child.stderr!]) {
    createInterface({ input: stream }).on("line", (line) => {
      console.log(`${`[${name}]`.padEnd(8)} ${line}`);
      if (ready?.test(line)) resolveReady();
    });
  }
  child.once("exit", (code, signal) => {
    if (!stopping) {
      console.error(`${name} exited (${signal ?? code}); stopping the stack`);
      void stop(1);
    }
  });
  if (!ready) resolveReady();
  return started;
}

async function stop(code: number): Promise<never> {
  stopping = true;
  for (const { child } of [...children].reverse()) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    await new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), 5000).unref();
    });
  }
  process.exit(code);
}

/** A real API server learns the CiliumNetworkPolicy kind from its CRD (the emulator serves it built in). */
async function installCiliumCrd(kubeconfig: string): Promise<void> {
  const admin = new KubeClient(await kubeconfigConnectionFromString(readFileSync(kubeconfig, "utf8")));
  const crd = ciliumNetworkPolicyCrd();
  await admin.apply("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/ciliumnetworkpolicies.cilium.io", crd as ApiObject, {
    fieldManager: "flotilla-start",
    force: true,
  });
}

/**
 * Prometheus scraping each emulator's pod metrics (/_emulator/metrics), its samples labelled
 * with the region; a fresh database each start (the pods it saw are gone).
 */
async function startPrometheus(): Promise<void> {
  const dir = ".flotilla/prometheus";
  rmSync(`${dir}/data`, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const targets = REGIONS.map((r) => `      - targets: ["${r.kube}"]\n        labels: {region: ${r.name}}`).join("\n");
  writeFileSync(
    `${dir}/prometheus.yml`,
    `global: {scrape_interval: ${SCRAPE_INTERVAL}, evaluation_interval: ${SCRAPE_INTERVAL}}\nscrape_configs:\n  - job_name: pods\n    metrics_path: /_emulator/metrics\n    static_configs:\n${targets}\n`,
  );
  await runCommand(
    "prom",
    "prometheus",
    [`--config.file=${dir}/prometheus.yml`, `--storage.tsdb.path=${dir}/data`, `--web.listen-address=${PROMETHEUS_ADDRESS}`, "--log.level=warn"],
    {},
  );
  for (const deadline = Date.now() + 30_000; ; await new Promise((r) => setTimeout(r, 200))) {
    const ready = await fetch(`http://${PROMETHEUS_ADDRESS}/-/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) return;
    if (Date.now() > deadline) throw new Error(`Prometheus not ready on ${PROMETHEUS_ADDRESS} within 30 s`);
  }
}

process.on("SIGINT", () => void stop(0));
process.on("SIGTERM", () => void stop(0));

/** The prefix of a region's processes in the log. */
const logName = (kind: string, region: LocalRegion) => (REGIONS.length === 1 ? kind : `${kind}/${region.name}`);

mkdirSync(".flotilla", { recursive: true });
for (const region of REGIONS) {
  if (REAL_KUBE) {
    // One control plane per region, its data kept across restarts like ctrl's database.
    const dataDir = `.flotilla/kube-real/${region.name}`;
    await runCommand(
      logName("k8s", region),
      FLOTILLA_KUBE,
      ["--listen", region.kube, "--data-dir", dataDir, "--kubeconfig-out", region.kubeconfig],
      {},
      /^flotilla-kube ready/,
    );
    await installCiliumCrd(region.kubeconfig);
  } else {
    await run(
      logName("k8s", region),
      ["packages/k8s-emulator/src/main.ts"],
      ["--listen", region.kube, "--kubeconfig-out", region.kubeconfig],
      {},
      /listening|ready|serving/i,
    );
  }
}
if (PROMETHEUS) await startPrometheus();
const pki = pkiFiles(PKI_DIR);
if (TLS) {
  if (!existsSync(pki.caKey)) initPki(PKI_DIR);
  for (const region of REGIONS) if (!existsSync(agentFiles(PKI_DIR, region.name).cert)) issueAgent(PKI_DIR, region.name);
}
const ctrlTls = TLS ? ["--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--client-ca", pki.caCert] : [];
// The data key of secret env values, made once and kept (the values sealed under it stay readable).
if (!existsSync(SECRETS_KEY_FILE)) writeSecretsKeyFile(SECRETS_KEY_FILE, false);
let ctrlSso: string[] = [];
if (SSO) {
  if (!existsSync(OIDC_SECRET_FILE)) writeFileSync(OIDC_SECRET_FILE, `${randomBytes(32).toString("base64url")}\n`, { mode: 0o600 });
  await run(
    "idp",
    ["packages/dev-idp/src/main.ts"],
    ["--listen", IDP_LISTEN, "--client-secret-file", OIDC_SECRET_FILE, "--redirect-uri", `${CTRL}/auth/callback`],
    {},
    /dev-idp ready/,
  );
  ctrlSso = ["--oidc-issuer", IDP_ISSUER, "--oidc-client-secret-file", OIDC_SECRET_FILE, "--oidc-redirect-url", `${CTRL}/auth/callback`];
}
await run(
  "ctrl",
  [...CTRL_NODE_FLAGS, "packages/ctrl/src/main.ts"],
  [...ctrlTls, "--secrets-key-file", SECRETS_KEY_FILE, ...ctrlSso],
  CTRL_ENVIRONMENT,
  /serving on/,
);
const tokenVariable = ["FLOTILLA_CTRL_ADMIN_TOKEN", "FLOTILLA_ADMIN_TOKEN"].find((name) => process.env[name]);
const adminToken = tokenVariable ? process.env[tokenVariable]! : readFileSync(".flotilla/admin-token", "utf8").trim();
// The lines below say where the token is, never the token: a terminal's scrollback or a copied log keeps no secret.
const adminTokenShell = tokenVariable ? `$${tokenVariable}` : "$(cat .flotilla/admin-token)";
const regions = createClient(
  RegionService,
  createConnectTransport({
    baseUrl: CTRL,
    httpVersion: "1.1",
    nodeOptions: TLS ? { ca: readFileSync(pki.caCert) } : {},
    interceptors: [
      (next) => (req) => {
        req.header.set("authorization", `Bearer ${adminToken}`);
        return next(req);
      },
    ],
  }),
);
const metrics = PROMETHEUS ? { prometheus: { address: `http://${PROMETHEUS_ADDRESS}` } } : undefined;
for (const region of REGIONS) {
  await regions.createRegion({ region: { name: region.name, labels: region.labels, metrics } });
  // CreateRegion leaves an existing region's labels and address: a stack started before keeps its database.
  await regions.updateRegion({ region: { name: region.name, labels: region.labels, metrics } });
}
// The CLI's context for this stack, made current: `pnpm flotilla …` works with no flags.
setContext(
  { name: "local", server: CTRL, tokenFile: tokenVariable ? undefined : resolve(".flotilla/admin-token"), caCert: TLS ? pki.caCert : undefined },
  configPath(),
  true,
);
if (SSO) {
  // The projects, applied with the admin token as a person would (idempotent: apply again on a restart).
  const applied = spawnSync(process.execPath, ["packages/cli/src/main.ts", "--context", "local", "apply", "-f", "examples/sso/projects.yaml"], {
    encoding: "utf8",
  });
  if (applied.status !== 0) {
    console.error(`pnpm start --sso: applying examples/sso/projects.yaml failed: ${applied.stderr}`);
    await stop(1);
  }
}
for (const region of REGIONS) {
  const { token } = await regions.createAgentToken({ region: region.name });
  const agentCert = agentFiles(PKI_DIR, region.name);
  const agentTls = TLS ? ["--ca-cert", pki.caCert, "--client-cert", agentCert.cert, "--client-key", agentCert.key] : [];
  await run(
    logName("agent", region),
    [...AGENT_NODE_FLAGS, "packages/agent/src/main.ts"],
    ["--ctrl-url", CTRL, "--region", region.name, "--target", "kubernetes", "--kubeconfig", region.kubeconfig, "--listen", region.agentHealth, ...agentTls],
    {
      ...AGENT_ENVIRONMENT,
      FLOTILLA_AGENT_TOKEN: token,
    },
  );
}

// The admin token is shown here, on the terminal of the person who started the stack (it is
// read from its file); ctrl itself never logs it.
const BUF = TLS ? `pnpm exec buf curl --cacert ${pki.caCert}` : "pnpm exec buf curl --http2-prior-knowledge";
const first = REGIONS[0]!;
const firstCert = agentFiles(PKI_DIR, first.name);
const mtlsLines = TLS
  ? `  # ClusterService needs a region certificate (mTLS):
  ${BUF} --cert ${firstCert.cert} --key ${firstCert.key} -H "$AUTH" $CTRL/ctrl.v1.ClusterService/SyncDesiredState -d '{"region":"${first.name}"}'
`
  : "";
const KUBE_NAME = REAL_KUBE ? "Kubernetes (flotilla-kube)" : "Kubernetes emulator";
const kubeUrl = (region: LocalRegion) => `${REAL_KUBE ? "https" : "http"}://${region.kube}`;
const labelText = (labels: Record<string, string>) =>
  Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
const multiRegion = args.regions !== undefined;
const prometheusLine = PROMETHEUS
  ? `\nPrometheus http://${PROMETHEUS_ADDRESS} scrapes every emulator's pods every ${SCRAPE_INTERVAL}; every region's analyses query it
(try: pnpm flotilla apply -f examples/staged/shop-analysis.yaml --wait).`
  : "";
const ssoLines = SSO
  ? `\nSingle sign-on: the identity provider ${IDP_ISSUER} (alice/alice in group team-a, bob/bob in group team-b);
projects team-a (namespaces a-*) and team-b (namespaces b-*) give each group the deployer role.
Sign in to the console with "Sign in with single sign-on", or the CLI with
  pnpm flotilla context set alice --server ${CTRL} && pnpm flotilla --context alice login
(docs/guides/sso.md walks through it).`
  : "";
const stackLines = !multiRegion
  ? `Flotilla is running${TLS ? " over mTLS" : ""}: ctrl ${CTRL}, agent health http://${first.agentHealth}, ${KUBE_NAME} ${kubeUrl(first)}
Region \`${first.name}\` and an agent token for it are created; the agent above uses them.`
  : `Flotilla is running${TLS ? " over mTLS" : ""}: ctrl ${CTRL}, and per region ${REAL_KUBE ? "a flotilla-kube" : "an emulator"} and an agent with its own token:
${REGIONS.map((r) => `  ${r.name.padEnd(12)} ${labelText(r.labels).padEnd(28)} ${REAL_KUBE ? "kube-apiserver" : "emulator"} ${kubeUrl(r)}  agent health http://${r.agentHealth}  kubeconfig ${r.kubeconfig}`).join("\n")}`;
console.log(`
${stackLines}${prometheusLine}${ssoLines}
The web console: ${CTRL}/ (sign in with the admin token: ${tokenVariable ? `$${tokenVariable}` : "cat .flotilla/admin-token"}).
The CLI's context \`local\` (in ${configPath()}) points at this stack${tokenVariable ? ` (export FLOTILLA_TOKEN=$${tokenVariable})` : ""}. Try:

${
  multiRegion
    ? `  pnpm flotilla get regions
  pnpm flotilla apply -f examples/staged/shop.yaml --wait
  pnpm flotilla rollout status shop
  kubectl --kubeconfig ${first.kubeconfig} get deploy -A`
    : `  pnpm flotilla apply -f examples/local/ --wait
  pnpm flotilla get deployments
  pnpm flotilla describe deployment web
  kubectl --kubeconfig ${first.kubeconfig} get deploy -n demo`
}

The raw protocol, with buf curl:

  export ADMIN_TOKEN=${adminTokenShell}
  CTRL=${CTRL}; AUTH="Authorization: Bearer $ADMIN_TOKEN"
  ${BUF} $CTRL --list-services
  ${BUF} -H "$AUTH" $CTRL/ctrl.v1.DeploymentService/GetDeployment -d '{"id":"web"}'
${mtlsLines}
Ctrl-C stops everything.
`);
