// SyncDesiredState: a gRPC client that accepts gzip (over a WAN) gets gzip-compressed
// batches that decode to the region's resources, one that offers zstd first (the agent) gets
// zstd, one that accepts none gets plain ones; and
// syncs cancelled mid-way (a query for the next page may be in flight) free their connection.
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { connect, constants as http2Constants, type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";
import { gunzipSync, zstdDecompressSync } from "node:zlib";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { SyncDesiredStateRequestSchema, SyncDesiredStateResponseSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, createBulkyDeployments, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

interface RawSync {
  encoding: string | undefined;
  compressedFlags: number[];
  resources: number;
  complete: boolean;
}

/** A SyncDesiredState call over raw gRPC on `session`, its request sent. */
function startSync(session: ClientHttp2Session, region: string, acceptEncoding: string | undefined): ClientHttp2Stream {
  const stream = session.request({
    ":method": "POST",
    ":path": "/ctrl.v1.ClusterService/SyncDesiredState",
    "content-type": "application/grpc",
    te: "trailers",
    authorization: `Bearer ${ADMIN_TOKEN}`,
    ...(acceptEncoding === undefined ? {} : { "grpc-accept-encoding": acceptEncoding }),
  });
  const body = toBinary(SyncDesiredStateRequestSchema, create(SyncDesiredStateRequestSchema, { region }));
  stream.end(encodeEnvelope(0, body));
  return stream;
}

/** One SyncDesiredState over raw gRPC, read frame by frame. */
async function rawSync(url: string, region: string, acceptEncoding: string | undefined): Promise<RawSync> {
  const session = connect(url);
  try {
    const stream = startSync(session, region, acceptEncoding);
    const result: RawSync = { encoding: undefined, compressedFlags: [], resources: 0, complete: false };
    stream.on("response", (headers) => (result.encoding = headers["grpc-encoding"] as string | undefined));
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    let data = Buffer.concat(chunks);
    while (data.length >= 5) {
      const end = 5 + data.readUInt32BE(1);
      const payload = data.subarray(5, end);
      result.compressedFlags.push(data[0]!);
      const inflate = result.encoding === "zstd" ? zstdDecompressSync : gunzipSync;
      const res = fromBinary(SyncDesiredStateResponseSchema, data[0] === 1 ? inflate(payload) : payload);
      if (res.message.case === "batch") result.resources += res.message.value.resources.length;
      else if (res.message.case === "complete") result.complete = true;
      data = data.subarray(end);
    }
    return result;
  } finally {
    session.close();
  }
}

for (const { db, skip } of await testDatabases()) {
  describe(`SyncDesiredState (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    before(async () => {
      t = await startTestCtrl(db, { stream: { snapshotBatchSize: 25 } });
      await t.store.regions.create("wan");
      // A sync's messages outgrow the client's HTTP/2 window, so a sync cancelled after its
      // first batch is mid-way on ctrl.
      await createBulkyDeployments(t, "wan", 50);
    });
    after(() => t.close());

    test("a client accepting gzip gets gzip-compressed batches", async () => {
      const sync = await rawSync(t.url, "wan", "gzip");
      assert.equal(sync.encoding, "gzip");
      assert.deepEqual({ resources: sync.resources, complete: sync.complete }, { resources: 50, complete: true });
      // Two batches of 25 resources, each past connect's 1 KiB threshold for compressing.
      assert.deepEqual(sync.compressedFlags.slice(0, 2), [1, 1]);
    });

    test("the client's order decides: the agent's list (zstd first) gets zstd, grpc-js's (no zstd) gets gzip", async () => {
      const agent = await rawSync(t.url, "wan", "zstd,gzip");
      assert.equal(agent.encoding, "zstd");
      assert.deepEqual({ resources: agent.resources, complete: agent.complete }, { resources: 50, complete: true });
      assert.deepEqual(agent.compressedFlags.slice(0, 2), [1, 1]);
      const grpcJs = await rawSync(t.url, "wan", "identity,deflate,gzip");
      assert.equal(grpcJs.encoding, "gzip");
      assert.deepEqual({ resources: grpcJs.resources, complete: grpcJs.complete }, { resources: 50, complete: true });
      assert.equal((await rawSync(t.url, "wan", "gzip,zstd")).encoding, "gzip");
    });

    test("a client accepting no compression gets plain batches", async () => {
      const sync = await rawSync(t.url, "wan", undefined);
      assert.notEqual(sync.encoding, "gzip");
      assert.deepEqual({ resources: sync.resources, complete: sync.complete }, { resources: 50, complete: true });
      assert.ok(sync.compressedFlags.every((flag) => flag === 0));
    });

    test("syncs cancelled after their first data leave ctrl serving full syncs", async () => {
      // More than the database pool's connections: a snapshot that kept its connection (with
      // the next page's query in flight when the client cancels) would leave the last syncs
      // waiting forever.
      for (let i = 0; i < 15; i++) {
        const session = connect(t.url);
        const stream = startSync(session, "wan", "gzip");
        await new Promise((resolve) => stream.once("data", resolve));
        stream.close(http2Constants.NGHTTP2_CANCEL);
        await new Promise((resolve) => stream.once("close", resolve));
        session.close();
      }
      const sync = await rawSync(t.url, "wan", "gzip");
      assert.deepEqual({ resources: sync.resources, complete: sync.complete }, { resources: 50, complete: true });
    });
  });
}
