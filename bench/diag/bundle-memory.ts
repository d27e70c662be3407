// Diagnosis for finding 9 (the agent's fixed memory): the agent CLI started from the production
// bundle (deploy/build-bundle.sh: one JavaScript file) and from the sources (TypeScript, stripped at load),
// at 0 resources, render target and kubernetes target (against the emulator), `RUNS` runs each,
// interleaved. Measured once /readyz answers and 2 s later, after memory-reducing GCs.
//   node bench/diag/bundle-memory.ts [runs]
import { fork } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { AGENT_ENVIRONMENT, AGENT_NODE_FLAGS } from "@flotilla/agent/node-flags";
import { KubernetesEmulator } from "@flotilla/k8s-emulator";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { startTestCtrl } from "@flotilla/testkit/ctrl";
import { testDatabases } from "@flotilla/testkit/databases";
import { buildBundle } from "../lib/bundle.ts";

const RUNS = Number(process.argv[2] ?? 3);
const MB = 1024 * 1024;

interface Measured {
  memory: NodeJS.MemoryUsage;
  typeStripper: boolean;
}

const dir = mkdtempSync(join(tmpdir(), "flotilla-bundle-memory-"));
const bundle = buildBundle("agent", join(dir, "agent"), ["diag/memory-probe.ts"]);
const probe = join(bundle, "diag/memory-probe.mjs");
const mains = { bundle: join(bundle, "main.mjs"), sources: fileURLToPath(import.meta.resolve("@flotilla/agent/main")) };

const [{ db }] = await testDatabases();
const ctrl = await startTestCtrl(db!);
const regions = ctrl.client(RegionService);
await regions.createRegion({ region: { name: "empty" } });
const { token } = await regions.createAgentToken({ region: "empty" });
const emulator = await KubernetesEmulator.start({});
const kubeconfig = join(dir, "kubeconfig");
writeFileSync(kubeconfig, emulator.kubeconfigYaml());

async function measure(main: string, target: "render" | "kubernetes"): Promise<Measured> {
  const targetArgs =
    target === "render" ? ["--target", "render", "--render-dir", join(dir, `render-${Math.random()}`)] : ["--target", "kubernetes", "--kubeconfig", kubeconfig];
  const child = fork(main, ["--ctrl-url", ctrl.url, "--region", "empty", "--listen", "127.0.0.1:0", ...targetArgs], {
    execArgv: [...AGENT_NODE_FLAGS, "--import", pathToFileURL(probe).href],
    env: { ...process.env, ...AGENT_ENVIRONMENT, FLOTILLA_AGENT_TOKEN: token },
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk));
  try {
    for (const deadline = Date.now() + 60_000; ; ) {
      const url = /health and metrics on (http:\/\/[^\s,]+)/.exec(output)?.[1];
      if (url && (await fetch(`${url}/readyz`)).ok) break;
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${main} (${target}) not ready:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const answer = new Promise<Measured>((resolve) => child.once("message", (message) => resolve(message as Measured)));
    child.send("measure");
    return await answer;
  } finally {
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    await exited;
  }
}

const results = new Map<string, Measured[]>();
for (let run = 0; run < RUNS; run++) {
  for (const target of ["render", "kubernetes"] as const) {
    for (const [form, main] of Object.entries(mains)) {
      const key = `${target}, ${form}`;
      results.set(key, [...(results.get(key) ?? []), await measure(main, target)]);
    }
  }
}
const median = (values: number[]) => values.toSorted((a, b) => a - b)[Math.floor(values.length / 2)]!;
const mb = (bytes: number) => (bytes / MB).toFixed(1);
console.log("| agent at 0 resources | RSS (MB) | heap used (MB) | heap total (MB) | external (MB) | type stripper loaded |");
console.log("|---|---|---|---|---|---|");
for (const [key, runs] of results) {
  const of = (field: keyof NodeJS.MemoryUsage) => `${runs.map((r) => mb(r.memory[field])).join(", ")} (median ${mb(median(runs.map((r) => r.memory[field])))})`;
  console.log(
    `| ${key} | ${of("rss")} | ${of("heapUsed")} | ${of("heapTotal")} | ${of("external")} | ${runs.map((r) => (r.typeStripper ? "yes" : "no")).join(", ")} |`,
  );
}
await ctrl.close();
await emulator.stop();
rmSync(dir, { recursive: true, force: true });
