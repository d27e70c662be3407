// Diagnosis for B8: ctrl's memory (after forced GC) before and after each attack alone,
// three times on the same ctrl: growth that does not repeat is the allocator keeping its
// high-water mark, growth that repeats is a leak; and each attack's peak RSS (VmHWM, reset
// when it starts) above the RSS before it. The stalled streams sync the region B8's do (150
// resources of about 60 KB). node bench/diag/b8-each.ts (FLOTILLA_B8_EACH=stalledStreams: that attack only)
import { fork } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { AttackPlan } from "../b8-attacker.ts";
import { ADMIN_TOKEN, CtrlProcess } from "../lib/ctrl-process.ts";
import { createBenchDatabase, migrate, seedRegion } from "../lib/db.ts";
import { fmtBytes } from "../lib/util.ts";

const db = await createBenchDatabase(process.env.FLOTILLA_BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/", "b8diag");
try {
  await migrate(db.url);
  const seeded = await seedRegion(db.url, "hostile", 2000);
  await seedRegion(db.url, "large", 150, { padBytes: 60_000, firstIndex: 2000 });
  console.log(`snapshot bodies: ${fmtBytes(seeded.bodyBytes)}`);
  const none = { malformed: 0, forgedTokens: 0, rapidResets: 0, stalledStreams: 0 };
  // FLOTILLA_B8_EACH=stalledStreams,… runs only those attacks.
  const chosen = process.env.FLOTILLA_B8_EACH?.split(",");
  const attacks = [{ stalledStreams: 50 }, { forgedTokens: 10_000 }, { malformed: 2000 }, { rapidResets: 1000 }];
  for (const only of attacks.filter((a) => !chosen || chosen.includes(Object.keys(a)[0]!))) {
    const ctrl = await CtrlProcess.start({ databaseUrl: db.url, pollIntervalMs: 200, streamSendTimeoutMs: 5000 });
    for (let round = 0; round < 3; round++) {
      const before = await ctrl.memory();
      writeFileSync(`/proc/${ctrl.pid}/clear_refs`, "5"); // VmHWM from here
      const plan: AttackPlan = { url: ctrl.url, adminToken: ADMIN_TOKEN, region: "hostile", stalledRegion: "large", ...none, ...only };
      const child = fork(fileURLToPath(new URL("../b8-attacker.ts", import.meta.url)), [], {
        env: { ...process.env, FLOTILLA_B8_ATTACK: JSON.stringify(plan) },
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      });
      await new Promise((resolve) => child.once("exit", resolve));
      const peak = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${ctrl.pid}/status`, "utf8"))![1]) * 1024;
      const after = await ctrl.memory();
      const reduced = await ctrl.memory({ reduce: true }); // returns V8's pooled pages (bench/lib/ctrl-process.ts)
      console.log(
        JSON.stringify((await ctrl.metrics()).boundsEnforced),
        JSON.stringify(only),
        `rss ${fmtBytes(before.rss)} → ${fmtBytes(after.rss)}, peak during it ${fmtBytes(peak)} (+${fmtBytes(peak - before.rss)}) (memory-reducing GC: ${fmtBytes(reduced.rss)}), heapTotal ${fmtBytes(before.heapTotal)} → ${fmtBytes(after.heapTotal)}, heapUsed ${fmtBytes(before.heapUsed)} → ${fmtBytes(after.heapUsed)}`,
      );
    }
    await ctrl.stop();
  }
} finally {
  await db.drop();
}
