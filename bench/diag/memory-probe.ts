// Preloaded into a measured process (`--import`, as JavaScript: bench/diag/bundle-memory.ts bundles
// it): on the IPC message "measure" it runs memory-reducing GCs (V8's "last resort", which return
// freed pages to the system) and answers with process.memoryUsage() and whether Node's
// TypeScript stripper (amaro) was loaded.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as (options: object) => void;
setFlagsFromString("--no-expose-gc");

process.on("message", async (message: unknown) => {
  if (message !== "measure") return;
  for (let i = 0; i < 3; i++) {
    gc({ type: "major", execution: "sync", flavor: "last-resort" });
    await new Promise((resolve) => setImmediate(resolve));
  }
  const loaded = (process as unknown as { moduleLoadList: string[] }).moduleLoadList;
  process.send!({ memory: process.memoryUsage(), typeStripper: loaded.some((name) => name.includes("amaro")) });
});
process.channel?.unref();
