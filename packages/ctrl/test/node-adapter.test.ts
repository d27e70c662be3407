// A connection that closes mid-response (the client went away, or ctrl ended it) ends the call's
// handler and leaves no trace in ctrl's log. connect's own adapter fails at least one of the
// two, as the control shows: depending on Node's version it printed a ConnectError dump for
// each, or, with the response destroyed without an error (no 'drain', no 'error'), it left the
// handler parked on its write for good, with all it holds (a watch's subscription, its gauge).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Http2Server, type Http2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { nodeAdapter } from "../src/node-adapter.ts";

/** How long the handler may take to end once its connection is gone. */
const ENDS_WITHIN_MS = 5000;

/** A sync that never ends (64 KiB batches for as long as the client reads); `ended` when its handler has. */
function neverEndingSync(): { routes: (router: ConnectRouter) => void; ended: Promise<boolean> } {
  let end: () => void = () => {};
  const ended = new Promise<boolean>((resolve) => (end = () => resolve(true)));
  const routes = (router: ConnectRouter) =>
    router.rpc(ClusterService.method.syncDesiredState, async function* () {
      try {
        for (;;)
          yield {
            message: {
              case: "batch" as const,
              value: {
                resources: [{ id: "x".repeat(63), namespace: "n", state: { case: "deployment" as const, value: { workload: { image: "i".repeat(65_000) } } } }],
              },
            },
          };
      } finally {
        end();
      }
    });
  return { routes, ended };
}

/**
 * Serves one sync whose client reads a message and stops reading (the server's writes wait on
 * flow control), then closes the connection; resolves whether the handler ended in time.
 */
async function closeMidResponse(handler: ReturnType<typeof nodeAdapter>, ended: Promise<boolean>): Promise<boolean> {
  const server: Http2Server = createServer(handler);
  const sessions = new Set<Http2Session>();
  server.on("session", (session) => sessions.add(session));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const client = createClient(ClusterService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
    for await (const response of client.syncDesiredState({ region: "r" })) {
      assert.equal(response.message.case, "batch");
      break;
    }
    await sleep(200); // the server's writes now wait for a window the client never opens
    for (const session of sessions) session.destroy();
    return await Promise.race([ended, sleep(ENDS_WITHIN_MS, false)]);
  } finally {
    await new Promise((resolve) => server.close(resolve));
    await sleep(200); // what the adapter does once the handler failed
  }
}

test("a connection closed mid-response ends the handler, and nothing is logged", async (t) => {
  const consoleError = t.mock.method(console, "error", () => {});
  const logged: string[] = [];
  const { routes, ended } = neverEndingSync();
  const handlerEnded = await closeMidResponse(nodeAdapter({ routes, fallback: (_req, res) => res.end(), logError: (line) => logged.push(line) }), ended);
  assert.ok(handlerEnded, `the handler did not end within ${ENDS_WITHIN_MS} ms of its connection closing`);
  assert.deepEqual(logged, []);
  assert.equal(consoleError.mock.callCount(), 0);
});

test("control: connect's own adapter leaves the handler running or prints the closed stream as a failure", async (t) => {
  const consoleError = t.mock.method(console, "error", () => {});
  const { routes, ended } = neverEndingSync();
  const handlerEnded = await closeMidResponse(connectNodeAdapter({ routes }), ended);
  assert.ok(!handlerEnded || consoleError.mock.callCount() > 0, "connect's adapter both ended the handler and printed nothing: the test above proves nothing");
});
