// A client that cancels a stream mid-response leaves no trace in ctrl's log (connect's own
// adapter prints a ConnectError dump for each, as the control shows).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Http2Server, type Http2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { createClient, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { nodeAdapter } from "../src/node-adapter.ts";

/** A sync that never ends: 64 KiB batches for as long as the client reads. */
const routes = (router: ConnectRouter) =>
  router.rpc(ClusterService.method.syncDesiredState, async function* () {
    for (;;)
      yield {
        message: {
          case: "batch" as const,
          value: {
            resources: [{ id: "x".repeat(63), namespace: "n", state: { case: "deployment" as const, value: { workload: { image: "i".repeat(65_000) } } } }],
          },
        },
      };
  });

async function cancelMidStream(handler: ReturnType<typeof nodeAdapter>): Promise<void> {
  const server: Http2Server = createServer(handler);
  const sessions = new Set<Http2Session>();
  server.on("session", (session) => sessions.add(session));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const client = createClient(ClusterService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
    for await (const response of client.syncDesiredState({ region: "r" })) {
      assert.equal(response.message.case, "batch");
      break; // cancels the call while the server is writing
    }
    await sleep(500);
  } finally {
    for (const session of sessions) session.destroy();
    await new Promise((resolve) => server.close(resolve));
  }
}

test("a stream cancelled by its client is not logged", async (t) => {
  const consoleError = t.mock.method(console, "error", () => {});
  const logged: string[] = [];
  await cancelMidStream(nodeAdapter({ routes, fallback: (_req, res) => res.end(), logError: (line) => logged.push(line) }));
  assert.deepEqual(logged, []);
  assert.equal(consoleError.mock.callCount(), 0);
});

test("control: connect's own adapter prints the cancelled stream as a failure", async (t) => {
  const consoleError = t.mock.method(console, "error", () => {});
  await cancelMidStream(connectNodeAdapter({ routes }));
  assert.ok(consoleError.mock.callCount() > 0);
});
