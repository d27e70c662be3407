// Diagnosis for B11: what the console's page does per status change, with B11's fleet loaded
// and the Deployments table filtered to the one row that changes. The page runs the console
// built without minifying (same code, readable names). Two passes of `changes` changes, each sent
// once the one before is on the page (as B11 sends them): one traced (Chromium's timeline: the
// browser's own work on the page's main thread, style, layout, paint, tasks, by event), one with
// Chromium's CPU profiler sampling the page every 100 µs. Prints the page's time per change by
// trace event, and by function: self time, and the inclusive time of the functions that take most.
// "all" as a third argument leaves the table unfiltered (all 30,000 rows; the row changed is in view).
//   node bench/diag/console-change.ts [deployments=10000] [changes=200] [all]
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { launchChromium } from "@flotilla/testkit/browser";
import { changeSeenInPage, seedFleet, showOnly, useToken } from "../b11-console.ts";
import { adminAuth } from "../lib/clients.ts";
import { ADMIN_TOKEN, CtrlProcess } from "../lib/ctrl-process.ts";
import { createBenchDatabase, migrate } from "../lib/db.ts";
import { fmtMs, median, now, percentile } from "../lib/util.ts";

const count = Number(process.argv[2] ?? 10_000);
const changes = Number(process.argv[3] ?? 200);
const unfiltered = process.argv[4] === "all";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface TraceEvent {
  name: string;
  ph: string;
  ts: number;
  dur?: number;
  pid: number;
  tid: number;
  args?: { name?: string };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const scratch = mkdtempSync(join(tmpdir(), "console-change-"));
execFileSync(process.execPath, ["packages/console/build.ts", "--unminified", join(scratch, "app.js")], {
  cwd: fileURLToPath(new URL("../../", import.meta.url)),
});
const appJs = readFileSync(join(scratch, "app.js"), "utf8");
rmSync(scratch, { recursive: true });

const db = await createBenchDatabase(process.env.FLOTILLA_BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/", "consolediag");
const browser = await launchChromium();
let ctrl: CtrlProcess | undefined;
try {
  await migrate(db.url);
  ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: 200 });
  const transport = createConnectTransport({ baseUrl: ctrl.url, httpVersion: "1.1", interceptors: [adminAuth] });
  await seedFleet(ctrl.url, transport, count);
  const cluster = createClient(ClusterService, transport);

  const page = await browser.newPage();
  await page.route("**/app.js", (route) => route.fulfill({ body: appJs, contentType: "text/javascript" }));
  await useToken(page, ADMIN_TOKEN);
  await page.goto(`${ctrl.url}/#/deployments`);
  await page.locator("tr[data-row]").first().waitFor({ timeout: 120_000 });
  const target = "app-00000";
  if (!unfiltered) await showOnly(page, target);

  /** `changes` changes, each sent once the one before is on the page; their send-to-frame times. */
  const run = async () => {
    const started = now();
    const latencies: number[] = [];
    for (let i = 0; i < changes; i++) {
      const ready = i % 2 === 0 ? 1 : 2;
      const { sent } = await changeSeenInPage(page, 0, cluster, target, ready);
      latencies.push(now() - sent);
    }
    return { latencies, wallMs: now() - started };
  };
  const cdp = await page.context().newCDPSession(page);

  // Second pass, without the profiler: the browser's own work on the page's main thread (style,
  // layout, paint, tasks) by trace event, self time (each event's time less its children's).
  const traceEvents: TraceEvent[] = [];
  cdp.on("Tracing.dataCollected", (e) => traceEvents.push(...(e.value as unknown as TraceEvent[])));
  const traced = new Promise((resolve) => cdp.once("Tracing.tracingComplete", resolve));
  await cdp.send("Tracing.start", { categories: "devtools.timeline,disabled-by-default-devtools.timeline,blink,cc,toplevel", transferMode: "ReportEvents" });
  const tracePass = await run();
  await cdp.send("Tracing.end");
  await traced;

  await cdp.send("Profiler.enable");
  await cdp.send("Profiler.setSamplingInterval", { interval: 100 });
  await cdp.send("Profiler.start");
  const { latencies, wallMs } = await run();
  const { profile } = (await cdp.send("Profiler.stop")) as unknown as { profile: Profile };

  // Self time per node from the samples, then per function (name, file, line).
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const selfUs = new Map<number, number>();
  for (const [i, id] of profile.samples.entries()) selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i + 1] ?? 0));
  const key = (n: ProfileNode) => {
    const file = n.callFrame.url.split("/").pop() || "";
    return `${n.callFrame.functionName || "(anonymous)"} ${file}${file ? `:${n.callFrame.lineNumber + 1}` : ""}`;
  };
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const node = byId.get(id)!;
    self.set(key(node), (self.get(key(node)) ?? 0) + us);
    // Each function on the stack once (recursion counted once).
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const k = key(byId.get(at)!);
      if (seen.has(k)) continue;
      seen.add(k);
      inclusive.set(k, (inclusive.get(k) ?? 0) + us);
    }
  }
  const perChange = (us: number) => fmtMs(us / 1000 / changes);
  const top = (m: Map<string, number>, n: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, us]) => `  ${perChange(us).padStart(9)}  ${k}`)
      .join("\n");
  const busy = [...self].filter(([k]) => !k.startsWith("(idle)") && !k.startsWith("(program)")).reduce((s, [, us]) => s + us, 0);
  console.log(
    `${changes} changes over ${fmtMs(wallMs)}; send to the frame that renders it (this process's clock): p50 ${fmtMs(median(latencies))}, p99 ${fmtMs(percentile(latencies, 99))}`,
  );
  console.log(
    `page main thread, JavaScript per change: ${perChange(busy)} (idle ${perChange(self.get("(idle)") ?? 0)}, program ${perChange(self.get("(program)") ?? 0)})`,
  );
  // The trace: complete events on the renderers' main threads, self time by name.
  const mains = new Set(
    traceEvents.filter((e) => e.ph === "M" && e.name === "thread_name" && e.args?.name === "CrRendererMain").map((e) => `${e.pid}:${e.tid}`),
  );
  const traceSelf = new Map<string, number>();
  const complete = traceEvents
    .filter((e) => e.ph === "X" && e.dur !== undefined && mains.has(`${e.pid}:${e.tid}`))
    .sort((a, b) => a.ts - b.ts || b.dur! - a.dur!);
  const open: TraceEvent[] = [];
  for (const e of complete) {
    while (open.length > 0 && open.at(-1)!.ts + open.at(-1)!.dur! <= e.ts) open.pop();
    const parent = open.at(-1);
    if (parent) traceSelf.set(parent.name, (traceSelf.get(parent.name) ?? 0) - e.dur!);
    traceSelf.set(e.name, (traceSelf.get(e.name) ?? 0) + e.dur!);
    open.push(e);
  }
  console.log(
    `traced pass (no profiler): p50 ${fmtMs(median(tracePass.latencies))}, p99 ${fmtMs(percentile(tracePass.latencies, 99))}; the page's main thread per change by trace event, self time:\n${top(traceSelf, 20)}`,
  );
  console.log(`self time per change:\n${top(self, 25)}`);
  console.log(`inclusive time per change:\n${top(inclusive, 40)}`);
} finally {
  await browser.close();
  await ctrl?.stop();
  await db.drop();
}
