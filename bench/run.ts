// Flotilla ctrl benchmarks on MySQL/MariaDB. Usage:
//   node bench/run.ts [--only B1,B2] [--quick] [--database-url mysql://user@host:port]
//                     [--poll-interval-ms 200] [--write-docs | --no-docs] [--cpu-prof-dir DIR]
//                     [--heap-snapshot-dir DIR] [--b7-runs N] [--b7-service-mix F]
// Each benchmark gets a fresh database (flotilla_bench_<pid>_<bN>), dropped at the end.
// A full run of all benchmarks, or --write-docs, puts its rows into the results table of
// docs/benchmarks.md, each replacing the earlier figure of its benchmark (bench/lib/report.ts).
import { execFileSync } from "node:child_process";
import { cpus, loadavg, totalmem } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { DEFAULT_POLL_INTERVAL_MS } from "@flotilla/ctrl";
import { runB1 } from "./b1-sync.ts";
import { runB2 } from "./b2-latency.ts";
import { runB3 } from "./b3-queries.ts";
import { runB4 } from "./b4-memory.ts";
import { runB6 } from "./b6-coalescing.ts";
import { runB7 } from "./b7-agent-memory.ts";
import { runB8 } from "./b8-hostile.ts";
import { runB10 } from "./b10-cli.ts";
import { runB11 } from "./b11-console.ts";
import { runB12 } from "./b12-rollouts.ts";
import { runB12A } from "./b12-analysis.ts";
import { runB13 } from "./b13-real-kube.ts";
import { runB15 } from "./b15-notifications.ts";
import { dropAll, serverVersion } from "./lib/db.ts";
import { markdownTable, writeResults, type BenchContext, type BenchResult, type Row, type RunInfo } from "./lib/report.ts";
import { log } from "./lib/util.ts";

const BENCHMARKS: Record<string, (ctx: BenchContext) => Promise<BenchResult>> = {
  B1: runB1,
  B2: runB2,
  B3: runB3,
  B4: runB4,
  B6: runB6,
  B7: runB7,
  B8: runB8,
  B10: runB10,
  B11: runB11,
  B12: runB12,
  B12A: runB12A,
  B13: runB13,
  B15: runB15,
};

const { values: args } = parseArgs({
  options: {
    only: { type: "string" },
    quick: { type: "boolean", default: false },
    "database-url": { type: "string", default: process.env.FLOTILLA_BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306" },
    "poll-interval-ms": { type: "string", default: String(DEFAULT_POLL_INTERVAL_MS) },
    "write-docs": { type: "boolean", default: false },
    "no-docs": { type: "boolean", default: false },
    "cpu-prof-dir": { type: "string" },
    "heap-snapshot-dir": { type: "string" },
    "b7-runs": { type: "string", default: "3" },
    "b7-service-mix": { type: "string", default: "0" },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (args.help) {
  process.stdout.write(
    "node bench/run.ts [--only B1,B2,B3,B4,B6,B7,B8,B10,B11,B12,B12A,B13,B15] [--quick] [--database-url mysql://user:pass@host:port]\n" +
      "                  [--poll-interval-ms N] [--write-docs | --no-docs] [--cpu-prof-dir DIR]\n" +
      "                  [--heap-snapshot-dir DIR] [--b7-runs N] [--b7-service-mix F]\n",
  );
  process.exit(0);
}

const only = (args.only ?? Object.keys(BENCHMARKS).join(","))
  .split(",")
  .map((s) => s.trim().toUpperCase())
  .filter(Boolean);
for (const name of only) if (!BENCHMARKS[name]) throw new Error(`unknown benchmark ${name}; choose from ${Object.keys(BENCHMARKS).join(", ")}`);

const serverUrl = new URL(args["database-url"]!);
if (serverUrl.protocol !== "mysql:") throw new Error("--database-url must be mysql://… (the benchmarks measure MySQL/MariaDB)");
serverUrl.pathname = "/";
const ctx: BenchContext = {
  serverUrl: serverUrl.toString(),
  quick: args.quick!,
  pollIntervalMs: Number(args["poll-interval-ms"]),
  cpuProfileDir: args["cpu-prof-dir"],
  heapSnapshotDir: args["heap-snapshot-dir"],
  b7Runs: Number(args["b7-runs"]),
  b7ServiceMix: Number(args["b7-service-mix"]),
};
const fullRun = !ctx.quick && only.length === Object.keys(BENCHMARKS).length;
const writeDocs = !args["no-docs"] && (args["write-docs"] || fullRun);

let interrupted = false;
process.on("SIGINT", () => {
  if (interrupted) process.exit(130);
  interrupted = true;
  log("interrupted: dropping benchmark databases");
  void dropAll().finally(() => process.exit(130));
});

const started = Date.now();
// The machine may be shared: the load around the run says how much its figures can be trusted.
const loadAtStart = loadavg()[0]!;
const rows: Row[] = [];
const notes: string[] = [];
const failures: string[] = [];
try {
  for (const name of only) {
    log(`${name}: starting${ctx.quick ? " (quick)" : ""}`);
    const t = Date.now();
    try {
      const result = await BENCHMARKS[name]!(ctx);
      rows.push(...result.rows);
      notes.push(...result.notes);
    } catch (error) {
      const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
      failures.push(`${name} failed: ${message.split("\n")[0]}`);
      log(`${name} FAILED: ${message}`);
    }
    log(`${name}: done in ${((Date.now() - t) / 1000).toFixed(0)} s`);
  }
} finally {
  await dropAll();
}

/** The commit measured, marked when ctrl's or the store's (or, for B6/B7, the agent's) sources differ from it. */
function revision(): string {
  const git = (...a: string[]) => execFileSync("git", a, { cwd: fileURLToPath(new URL("..", import.meta.url)), encoding: "utf8" }).trim();
  try {
    const dirty = git("status", "--porcelain", "--", "packages/ctrl", "packages/store", "packages/proto") !== "";
    const agentBench = only.some((name) => name === "B6" || name === "B7");
    const agentDirty = agentBench && git("status", "--porcelain", "--", "packages/agent", "packages/k8s-emulator") !== "";
    const changed = [dirty ? "ctrl/store" : "", agentDirty ? "agent/emulator" : ""].filter(Boolean).join(" and ");
    return `${git("rev-parse", "--short", "HEAD")}${changed ? ` with uncommitted changes to ${changed}` : ""}`;
  } catch {
    return "unknown";
  }
}

const cpu = cpus();
const run: RunInfo = {
  date: `${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC`,
  commit: revision(),
  machine: `${cpu.length} cores (${cpu[0]?.model.trim() ?? "unknown"}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB; Node.js ${process.version}; ${await serverVersion(ctx.serverUrl).catch(() => "unknown database")}; load average ${loadAtStart.toFixed(1)} → ${loadavg()[0]!.toFixed(1)}`,
};
const heading = [
  `- ${run.date}; ${run.machine}; ctrl at commit ${run.commit}`,
  `- Mode: ${ctx.quick ? "--quick (smaller sizes; smoke check only)" : "full"}; poll interval ${ctx.pollIntervalMs} ms; benchmarks ${only.join(", ")}; took ${((Date.now() - started) / 1000).toFixed(0)} s`,
].join("\n");
const output = [
  heading,
  "",
  markdownTable(rows),
  "",
  ...(notes.length ? ["Details:", "", ...notes.map((n) => `- ${n}`), ""] : []),
  ...(failures.length ? ["Failures:", "", ...failures.map((f) => `- ${f}`), ""] : []),
].join("\n");
process.stdout.write(`\n${output}\n`);

if (writeDocs) {
  const doc = fileURLToPath(new URL("../docs/benchmarks.md", import.meta.url));
  writeResults(doc, rows, run);
  log(`${rows.length} rows written to docs/benchmarks.md's results table`);
}
process.exit(failures.length ? 1 : 0);
