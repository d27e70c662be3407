// Diagnosis for ctrl's decoding cost: the protocol fuzz (@flotilla/testkit/fuzz: every RPC ×
// Connect, gRPC, gRPC-Web × HTTP/1.1 and h2c) with a valid admin token, one mutation class at a
// time, 16 requests at a time, against a ctrl process on MySQL/MariaDB. Per class: ctrl's peak
// RSS (VmHWM, reset before the class) above its RSS before it, and the highest V8 heap in use
// sampled from /metrics every 50 ms, and how long the class took. One line per class as it ends.
//   node bench/diag/decode-cost.ts [ctrl flags…]     e.g. --read-max-bytes 4194304
import { readFileSync, writeFileSync } from "node:fs";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { HistoryService } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { OperatorService } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import { StatusService } from "@flotilla/proto/ctrl/v1/status_pb.js";
import { spawnCtrl } from "@flotilla/testkit/ctrl-process";
import { fuzzRequests, sendFuzz } from "@flotilla/testkit/fuzz";
import { createBenchDatabase, migrate } from "../lib/db.ts";
import { fmtBytes, sleep } from "../lib/util.ts";

const SERVICES = [ClusterService, DeploymentService, RegionService, NetworkPolicyService, SentinelService, OperatorService, HistoryService, StatusService];
const TOKEN = "decode-cost-admin-token-0123456789abcdef";

const status = (pid: number, field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024;
const kinds = [...new Set(Array.from(fuzzRequests(SERVICES), (r) => r.kind))];
/** The requests of one class, built as they are sent (all of them at once are 700 MB). */
function* requestsOf(kind: string, sent: { count: number }) {
  for (const request of fuzzRequests(SERVICES)) {
    if (request.kind !== kind) continue;
    sent.count++;
    yield request;
  }
}

const db = await createBenchDatabase(process.env.FLOTILLA_BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/", "decode");
try {
  await migrate(db.url);
  const ctrl = await spawnCtrl(db.url, TOKEN, process.argv.slice(2));
  const pid = ctrl.child.pid!;
  const heapUsed = async () => Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(await (await fetch(`${ctrl.url}/metrics`)).text())?.[1]);
  try {
    await sleep(6000); // past ctrl's first memory release
    console.log("| class | requests | RSS peak above before (peak) | V8 heap peak above before | seconds | HTTP statuses |\n|---|---|---|---|---|---|");
    for (const kind of kinds) {
      const started = performance.now();
      const sent = { count: 0 };
      writeFileSync(`/proc/${pid}/clear_refs`, "5");
      const before = status(pid, "VmRSS");
      const heapBefore = await heapUsed();
      let heapPeak = heapBefore;
      let sending = true;
      const sampling = (async () => {
        while (sending) {
          heapPeak = Math.max(heapPeak, await heapUsed().catch(() => 0));
          await sleep(50);
        }
      })();
      const outcomes = await sendFuzz(ctrl.url, TOKEN, requestsOf(kind, sent), 16, 10_000);
      sending = false;
      await sampling;
      const peak = status(pid, "VmHWM") - before;
      const statuses = [...outcomes].map(([s, n]) => `${s}: ${n}`).join(", ");
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      console.log(
        `| ${kind} | ${sent.count} | ${fmtBytes(peak)} (${fmtBytes(before + peak)}) | ${fmtBytes(heapPeak - heapBefore)} | ${seconds} | ${statuses} |`,
      );
    }
  } finally {
    await ctrl.kill("SIGKILL");
  }
} finally {
  await db.drop();
}
