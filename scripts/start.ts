// `pnpm start`: the whole thing locally on the embedded defaults — the Kubernetes API
// emulator, ctrl on SQLite, and one agent for region `local` — with prefixed logs.
// `pnpm start --tls`: the same over mTLS, with getting-started certificates in .flotilla/pki.
// Ctrl-C stops everything.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { AGENT_ENVIRONMENT, AGENT_NODE_FLAGS } from "@flotilla/agent/node-flags";
import { agentFiles, initPki, issueAgent, pkiFiles } from "@flotilla/ctrl/pki";
import { CTRL_NODE_FLAGS } from "@flotilla/ctrl/node-flags";
import { configPath, setContext } from "@flotilla/cli/config";
import { resolve } from "node:path";

const TLS = process.argv.slice(2).includes("--tls");
const CTRL = TLS ? "https://127.0.0.1:7070" : "http://127.0.0.1:7070";
const PKI_DIR = ".flotilla/pki";
const KUBECONFIG = ".flotilla/kubeconfig";
const REGION = "local";
const children: { name: string; child: ChildProcess }[] = [];
let stopping = false;

/** Starts `node ...script` (Node flags, then the script) with `args`; resolves once a line matches `ready`. */
function run(name: string, script: readonly string[], args: string[], env: Record<string, string> = {}, ready?: RegExp): Promise<void> {
  const child = spawn(process.execPath, [...script, ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
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

process.on("SIGINT", () => void stop(0));
process.on("SIGTERM", () => void stop(0));

mkdirSync(".flotilla", { recursive: true });
await run("k8s", ["packages/k8s-emulator/src/main.ts"], ["--listen", "127.0.0.1:7072", "--kubeconfig-out", KUBECONFIG], {}, /listening|ready|serving/i);
const pki = pkiFiles(PKI_DIR);
const agentCert = agentFiles(PKI_DIR, REGION);
if (TLS) {
  if (!existsSync(pki.caKey)) initPki(PKI_DIR);
  if (!existsSync(agentCert.cert)) issueAgent(PKI_DIR, REGION);
}
const ctrlTls = TLS ? ["--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--client-ca", pki.caCert] : [];
await run("ctrl", [...CTRL_NODE_FLAGS, "packages/ctrl/src/main.ts"], ctrlTls, {}, /serving on/);
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
await regions.createRegion({ region: { name: REGION } });
// The CLI's context for this stack, made current: `pnpm flotilla …` works with no flags.
setContext(
  { name: "local", server: CTRL, tokenFile: tokenVariable ? undefined : resolve(".flotilla/admin-token"), caCert: TLS ? pki.caCert : undefined },
  configPath(),
  true,
);
const { token } = await regions.createAgentToken({ region: REGION });
const agentTls = TLS ? ["--ca-cert", pki.caCert, "--client-cert", agentCert.cert, "--client-key", agentCert.key] : [];
await run(
  "agent",
  [...AGENT_NODE_FLAGS, "packages/agent/src/main.ts"],
  ["--ctrl-url", CTRL, "--region", REGION, "--target", "kubernetes", "--kubeconfig", KUBECONFIG, ...agentTls],
  {
    ...AGENT_ENVIRONMENT,
    FLOTILLA_AGENT_TOKEN: token,
  },
);

// The admin token is shown here, on the terminal of the person who started the stack (it is
// read from its file); ctrl itself never logs it.
const BUF = TLS ? `pnpm exec buf curl --cacert ${pki.caCert}` : "pnpm exec buf curl --http2-prior-knowledge";
const mtlsLines = TLS
  ? `  # ClusterService needs a region certificate (mTLS):
  ${BUF} --cert ${agentCert.cert} --key ${agentCert.key} -H "$AUTH" $CTRL/ctrl.v1.ClusterService/SyncDesiredState -d '{"region":"local"}'
`
  : "";
console.log(`
Flotilla is running${TLS ? " over mTLS" : ""}: ctrl ${CTRL}, agent health http://127.0.0.1:7071, Kubernetes emulator http://127.0.0.1:7072
Region \`${REGION}\` and an agent token for it are created; the agent above uses them.
The web console: ${CTRL}/ (sign in with the admin token: ${tokenVariable ? `$${tokenVariable}` : "cat .flotilla/admin-token"}).
The CLI's context \`local\` (in ${configPath()}) points at this stack${tokenVariable ? ` (export FLOTILLA_TOKEN=$${tokenVariable})` : ""}. Try:

  pnpm flotilla apply -f examples/ --wait
  pnpm flotilla get deployments
  pnpm flotilla describe deployment web
  kubectl --kubeconfig ${KUBECONFIG} get deploy -n demo

The raw protocol, with buf curl:

  export ADMIN_TOKEN=${adminTokenShell}
  CTRL=${CTRL}; AUTH="Authorization: Bearer $ADMIN_TOKEN"
  ${BUF} $CTRL --list-services
  ${BUF} -H "$AUTH" $CTRL/ctrl.v1.DeploymentService/GetDeployment -d '{"id":"web"}'
${mtlsLines}
Ctrl-C stops everything.
`);
