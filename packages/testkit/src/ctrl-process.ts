// ctrl as a separate OS process (its main.ts, exported as @flotilla/ctrl/main, with the Node
// flags and environment it ships with), for multi-replica, kill and memory tests.
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
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

/** The process has neither exited nor been killed. */
export function alive(replica: CtrlProcess | undefined): replica is CtrlProcess {
  return replica !== undefined && replica.child.exitCode === null && replica.child.signalCode === null;
}

/** What a call gets from a replica killed before or while it answered: the connection refused, reset or hung up. */
const CONNECTION_LOST = [Code.Unavailable, Code.Aborted, Code.Unknown, Code.Internal];

/**
 * Calls `call` with a client of a live replica among `replicas()` (`prefer` first, when it is
 * up): Connect over HTTP/1.1 with `token`. A lost connection moves it to the next live one;
 * any other error is thrown. Gives up after `giveUpMs` with no replica up or no answer.
 */
export async function onLiveReplica<S extends DescService, T>(
  replicas: () => readonly (CtrlProcess | undefined)[],
  service: S,
  call: (client: Client<S>) => Promise<T>,
  options: { token: string; prefer?: CtrlProcess; giveUpMs?: number },
): Promise<T> {
  const giveUpMs = options.giveUpMs ?? 30_000;
  const giveUp = Date.now() + giveUpMs;
  for (let attempt = 0; ; attempt++) {
    const candidates = [options.prefer, ...replicas()].filter(alive);
    const replica = candidates[attempt % Math.max(1, candidates.length)];
    if (!replica) {
      if (Date.now() > giveUp) throw new Error(`no ctrl replica up for ${giveUpMs / 1000} s`);
      await sleep(50);
      continue;
    }
    const transport = createConnectTransport({
      baseUrl: replica.url,
      httpVersion: "1.1",
      interceptors: [
        (next) => (req) => {
          req.header.set("authorization", `Bearer ${options.token}`);
          return next(req);
        },
      ],
    });
    try {
      return await call(createClient(service, transport));
    } catch (error) {
      if (!CONNECTION_LOST.includes(ConnectError.from(error).code) || Date.now() > giveUp) throw error;
      await sleep(50);
    }
  }
}
