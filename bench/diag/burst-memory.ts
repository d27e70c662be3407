// Diagnosis for ctrl's peak during the authenticated fuzz (the whole burst, as
// packages/ctrl/test/memory-release.test.ts sends it), by what the memory is: sampled every
// 100 ms, ctrl's RSS split from /proc/<pid>/smaps_rollup (anonymous against file-backed) and,
// from its /metrics, V8's heap (committed, in use, its young generation) and external memory
// (ArrayBuffers and Buffers); what is anonymous but neither V8's heap nor external is malloc's
// (zlib, HTTP parsers, freed buffers malloc keeps). Reports, per round, the sample at the peak
// RSS and each figure's highest value, above its value at rest.
// With --after-stalls N, each round starts right after N stalled syncs of a 9 MB region were
// opened and released (memory-release.test.ts's order), and its peak is above the RSS it
// started from.
//   node bench/diag/burst-memory.ts [rounds] [--after-stalls N] [--node-flags "…"] [ctrl flags…]
//   e.g. node bench/diag/burst-memory.ts 2 --node-flags "--max-semi-space-size=4" --decode-budget-bytes 8388608
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { HistoryService } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { OperatorService } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import { StatusService } from "@flotilla/proto/ctrl/v1/status_pb.js";
import { CTRL_ENVIRONMENT, CTRL_NODE_FLAGS } from "@flotilla/ctrl/node-flags";
import { clientsOf, createBulkyDeployments } from "@flotilla/testkit/ctrl";
import { fuzzRequests, sendFuzz } from "@flotilla/testkit/fuzz";
import { stalledSyncs } from "@flotilla/testkit/interop";
import { spawnNode } from "@flotilla/testkit/node-process";
import { createBenchDatabase, migrate } from "../lib/db.ts";
import { sleep } from "../lib/util.ts";

const SERVICES = [ClusterService, DeploymentService, RegionService, NetworkPolicyService, SentinelService, OperatorService, HistoryService, StatusService];
const TOKEN = "burst-memory-admin-token-0123456789abcdef";
const MIB = 2 ** 20;

const args = process.argv.slice(2);
const rounds = /^\d+$/.test(args[0] ?? "") ? Number(args.shift()) : 1;
const stallsAt = args.indexOf("--after-stalls");
const stalls = stallsAt >= 0 ? Number(args.splice(stallsAt, 2)[1]) : 0;
const flagsAt = args.indexOf("--node-flags");
const nodeFlags = flagsAt >= 0 ? args.splice(flagsAt, 2)[1]!.split(/\s+/).filter(Boolean) : [...CTRL_NODE_FLAGS];

interface Sample {
  rss: number;
  anon: number;
  file: number;
  heapTotal: number;
  heapUsed: number;
  young: number;
  external: number;
  malloc: number;
}

function rollup(pid: number): { rss: number; anon: number; file: number } {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? 0) * 1024;
  return { rss: kb("Rss"), anon: kb("Anonymous"), file: kb("Rss") - kb("Anonymous") };
}

async function sample(pid: number, url: string): Promise<Sample> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const metric = (pattern: string) => Number(new RegExp(`^${pattern} (\\S+)`, "m").exec(text)?.[1] ?? 0);
  const memory = rollup(pid);
  const heapTotal = metric("nodejs_heap_size_total_bytes");
  const external = metric("nodejs_external_memory_bytes");
  return {
    ...memory,
    heapTotal,
    heapUsed: metric("nodejs_heap_size_used_bytes"),
    young: metric('nodejs_heap_space_size_total_bytes\\{space="new"\\}'),
    external,
    malloc: memory.anon - heapTotal - external,
  };
}

const hwm = (pid: number) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;
const f = (n: number) => `${n >= 0 ? "+" : ""}${(n / MIB).toFixed(1)}`;

const db = await createBenchDatabase(process.env.FLOTILLA_BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/", "burst");
try {
  await migrate(db.url);
  const main = fileURLToPath(import.meta.resolve("@flotilla/ctrl/main"));
  const ctrl = await spawnNode(
    "ctrl",
    main,
    ["--database-url", db.url, "--listen", "127.0.0.1:0", ...args],
    { ...CTRL_ENVIRONMENT, FLOTILLA_CTRL_ADMIN_TOKEN: TOKEN },
    /serving on (http:\/\/\S+)/,
    nodeFlags,
  );
  const pid = ctrl.child.pid!;
  try {
    if (stalls > 0) {
      const clients = clientsOf(ctrl.url, TOKEN);
      await clients.client(RegionService).createRegion({ region: { name: "big" } });
      await createBulkyDeployments(clients, "big", 150, 60_000);
    }
    await sleep(6000); // past ctrl's first memory release
    let rest = await sample(pid, ctrl.url);
    console.log(`node flags: ${nodeFlags.join(" ")}; environment: ${JSON.stringify(CTRL_ENVIRONMENT)}; ctrl flags: ${args.join(" ") || "(defaults)"}`);
    console.log(
      `rest: RSS ${f(rest.rss)} MiB (anon ${f(rest.anon)}, file ${f(rest.file)}; V8 heap ${f(rest.heapTotal)}, young ${f(rest.young)}, external ${f(rest.external)}, malloc ${f(rest.malloc)})`,
    );
    const keys: (keyof Sample)[] = ["rss", "anon", "file", "heapTotal", "heapUsed", "young", "external", "malloc"];
    for (let round = 1; round <= rounds; round++) {
      if (stalls > 0) {
        const stalled = await stalledSyncs(ctrl.url, "big", TOKEN, stalls);
        const held = await sample(pid, ctrl.url);
        stalled.close();
        await sleep(1000);
        const start = await sample(pid, ctrl.url);
        console.log(
          `round ${round}: ${stalls} stalled syncs held RSS ${f(held.rss - rest.rss)} MiB; released, burst starts at ${f(start.rss - rest.rss)} (${keys.map((k) => `${k} ${f(start[k] - rest[k])}`).join(", ")})`,
        );
        rest = start;
      }
      writeFileSync(`/proc/${pid}/clear_refs`, "5");
      const max = { ...rest };
      let atPeak = rest;
      let sending = true;
      const sampling = (async () => {
        while (sending) {
          const s = await sample(pid, ctrl.url).catch(() => undefined);
          if (s) {
            for (const k of keys) max[k] = Math.max(max[k], s[k]);
            if (s.rss >= atPeak.rss) atPeak = s;
          }
          await sleep(100);
        }
      })();
      const started = performance.now();
      const outcomes = await sendFuzz(ctrl.url, TOKEN, fuzzRequests(SERVICES, round), 16, 10_000);
      sending = false;
      await sampling;
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      const peak = hwm(pid) - rest.rss;
      console.log(
        `round ${round}: VmHWM ${f(peak)} MiB above ${stalls > 0 ? "its start" : "rest"}, ${seconds} s, statuses ${JSON.stringify(Object.fromEntries(outcomes))}`,
      );
      console.log(`  at the highest sampled RSS: ${keys.map((k) => `${k} ${f(atPeak[k] - rest[k])}`).join(", ")}`);
      console.log(`  highest of each:            ${keys.map((k) => `${k} ${f(max[k] - rest[k])}`).join(", ")}`);
      if (round < rounds) await sleep(15_000);
    }
  } finally {
    await ctrl.kill("SIGKILL");
  }
} finally {
  await db.drop();
}
