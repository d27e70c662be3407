// Diagnostic: SyncDesiredState over each protocol/HTTP version, with per-message gaps.
// Usage: node bench/diag/transport.ts [resources=10000]
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { adminAuth } from "../lib/clients.ts";
import { CtrlProcess } from "../lib/ctrl-process.ts";
import { createBenchDatabase, migrate, seedRegion } from "../lib/db.ts";
import { median, now } from "../lib/util.ts";

const count = Number(process.argv[2] ?? 10000);
const db = await createBenchDatabase(process.env.FLOTILLA_BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/", "diag");
try {
  await migrate(db.url);
  await seedRegion(db.url, "sync", count);
  const ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: 200 });
  const variants = {
    "grpc h2 gzip": createGrpcTransport({ baseUrl: ctrl.url, interceptors: [adminAuth] }),
    "grpc h2 identity": createGrpcTransport({ baseUrl: ctrl.url, interceptors: [adminAuth], acceptCompression: [] }),
    "connect h1 identity": createConnectTransport({ baseUrl: ctrl.url, interceptors: [adminAuth], httpVersion: "1.1", acceptCompression: [] }),
    "connect h2 identity": createConnectTransport({ baseUrl: ctrl.url, interceptors: [adminAuth], httpVersion: "2", acceptCompression: [] }),
  };
  for (let rep = 0; rep < 2; rep++) {
    for (const [name, transport] of Object.entries(variants)) {
      const client = createClient(ClusterService, transport);
      const t0 = now();
      let last = t0;
      const gaps: number[] = [];
      let n = 0;
      for await (const res of client.syncDesiredState({ region: "sync" })) {
        const t = now();
        gaps.push(t - last);
        last = t;
        if (res.message.case === "batch") n += res.message.value.resources.length;
      }
      console.log(
        `${name}: ${n} in ${(now() - t0).toFixed(0)} ms; first ${gaps[0]!.toFixed(1)} ms, median gap ${median(gaps.slice(1)).toFixed(1)} ms, max ${Math.max(...gaps).toFixed(1)}`,
      );
    }
  }
  await ctrl.stop();
} finally {
  await db.drop();
}
