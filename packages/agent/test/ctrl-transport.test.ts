// The agent's transport asks ctrl for zstd first, then gzip, and reads a zstd-compressed
// stream: a gRPC server that records the call's headers and answers a SyncDesiredState with
// a zstd-compressed batch.
import assert from "node:assert/strict";
import http2 from "node:http2";
import { after, test } from "node:test";
import { zstdCompressSync } from "node:zlib";
import { create, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { compressedFlag, encodeEnvelope } from "@connectrpc/connect/protocol";
import { ClusterService, SyncDesiredStateResponseSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { silentLogger } from "@flotilla/runtime";
import { ctrlTransport } from "../src/ctrl-transport.ts";

const asked: http2.IncomingHttpHeaders[] = [];
const server = http2.createServer((req, res) => {
  asked.push(req.headers);
  req.resume();
  req.on("end", () => {
    res.writeHead(200, { "content-type": "application/grpc", "grpc-encoding": "zstd" });
    const responses = [
      create(SyncDesiredStateResponseSchema, {
        message: { case: "batch", value: { resources: [{ type: ResourceType.DEPLOYMENT, id: "api", namespace: "demo", version: 7n }] } },
      }),
      create(SyncDesiredStateResponseSchema, { message: { case: "complete", value: { version: 7n, resourceCount: 1n } } }),
    ];
    for (const response of responses) res.write(encodeEnvelope(compressedFlag, zstdCompressSync(toBinary(SyncDesiredStateResponseSchema, response))));
    res.addTrailers({ "grpc-status": "0" });
    res.end();
  });
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
after(() => server.close());

test("asks for zstd, then gzip, and reads a zstd-compressed sync", async () => {
  const { port } = server.address() as { port: number };
  const client = createClient(ClusterService, ctrlTransport({ baseUrl: `http://127.0.0.1:${port}`, interceptors: [], log: silentLogger }));
  const got: string[] = [];
  for await (const response of client.syncDesiredState({ region: "local" })) {
    if (response.message.case === "batch") got.push(...response.message.value.resources.map((r) => `${r.id}@${r.version}`));
    if (response.message.case === "complete") got.push(`complete@${response.message.value.version}`);
  }
  assert.deepEqual(got, ["api@7", "complete@7"]);
  assert.equal(asked[0]?.["grpc-accept-encoding"], "zstd,gzip");
});
