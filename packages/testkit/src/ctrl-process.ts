// ctrl as a separate OS process (its main.ts, exported as @flotilla/ctrl/main), for
// multi-replica and kill tests.
import { fileURLToPath } from "node:url";
import { spawnNode, type NodeProcess } from "./node-process.ts";

const MAIN = fileURLToPath(import.meta.resolve("@flotilla/ctrl/main"));

/** ctrl's process; `url` is where it serves. */
export type CtrlProcess = NodeProcess;

export async function spawnCtrl(databaseUrl: string, adminToken: string, extraArgs: string[] = []): Promise<CtrlProcess> {
  // The token by environment, as documented: a flag would show it in the process list.
  return spawnNode(
    "ctrl",
    MAIN,
    ["--database-url", databaseUrl, "--listen", "127.0.0.1:0", ...extraArgs],
    { FLOTILLA_CTRL_ADMIN_TOKEN: adminToken },
    /serving on (http:\/\/\S+)/,
  );
}
