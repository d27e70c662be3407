// The fixed memory an import costs: run with `node --expose-gc bench/diag/import-memory.ts
// <module>...` (e.g. @flotilla/agent @flotilla/agent/kubernetes); prints RSS (anonymous and
// file-backed) and heap after memory-reducing GCs, as the agent's memory release leaves them.
import { readFileSync } from "node:fs";

const gc = (globalThis as { gc?: (options: { flavor: string }) => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");
for (const specifier of process.argv.slice(2)) await import(specifier);
for (let i = 0; i < 4; i++) gc({ flavor: "last-resort" });
const status = readFileSync("/proc/self/status", "utf8");
const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN);
const { rss, heapUsed, heapTotal } = process.memoryUsage();
const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
console.log(
  JSON.stringify({
    imports: process.argv.slice(2),
    rssMB: mb(rss),
    rssAnonMB: mb(kb("RssAnon") * 1024),
    rssFileMB: mb(kb("RssFile") * 1024),
    heapUsedMB: mb(heapUsed),
    heapTotalMB: mb(heapTotal),
  }),
);
