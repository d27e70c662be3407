// ctrl as a separate OS process (its main.ts, exported as @flotilla/ctrl/main, with the Node
// flags and environment it ships with), for multi-replica, kill and memory tests.
import { fileURLToPath } from "node:url";
import { CTRL_ENVIRONMENT, CTRL_NODE_FLAGS } from "@flotilla/ctrl/node-flags";
import { spawnNode, type NodeProcess } from "./node-process.ts";

const MAIN = fileURLToPath(import.meta.resolve("@flotilla/ctrl/main"));

/** ctrl's process; `url` is where it serves. */
export type CtrlProcess = NodeProcess;

export async function spawnCtrl(databaseUrl: string, adminToken: string, extraArgs: string[] = [], nodeFlags: readonly string[] = []): Promise<CtrlProcess> {
  // The token by environment, as documented: a flag would show it in the process list.
  return spawnNode(
    "ctrl",
    MAIN,
    ["--database-url", databaseUrl, "--listen", "127.0.0.1:0", ...extraArgs],
    { ...CTRL_ENVIRONMENT, FLOTILLA_CTRL_ADMIN_TOKEN: adminToken },
    /serving on (http:\/\/\S+)/,
    [...CTRL_NODE_FLAGS, ...nodeFlags],
  );
}
