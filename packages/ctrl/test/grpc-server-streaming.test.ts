// gRPC watch streams are served straight on HTTP/2 (application/grpc[+proto]); connect
// serves the same method for every other content type. Both must answer alike.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { connect as connectH2 } from "node:http2";
import { setTimeout as sleep } from "node:timers/promises";
import { gzipSync } from "node:zlib";
import { create, fromBinary, toBinary, toJsonString, type MessageInitShape } from "@bufbuild/protobuf";
import { ClusterService, WatchDeploymentChangesRequestSchema, WatchDeploymentChangesResponseSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { compressedFlag, encodeEnvelope } from "@connectrpc/connect/protocol";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { encodedChunks } from "../src/grpc-server-streaming.ts";
import { withVerbatimField } from "../src/services/cluster/verbatim.ts";

type WatchRequest = MessageInitShape<typeof WatchDeploymentChangesRequestSchema>;

const PATH = `/${ClusterService.typeName}/${ClusterService.method.watchDeploymentChanges.name}`;

interface RawResult {
  /** Response headers (with the status fields when the answer is trailers-only). */
  headers: Record<string, unknown>;
  trailers: Record<string, unknown>;
  messages: Buffer[];
  /** grpc-status / grpc-message, wherever they came. */
  status?: string;
  message?: string;
}

/** One gRPC call over a raw HTTP/2 stream; the client cancels once `enough(messages)`. */
function rawCall(url: string, headers: Record<string, string>, body: Uint8Array, enough: (messages: Buffer[]) => boolean = () => false): Promise<RawResult> {
  return new Promise((resolve, reject) => {
    const session = connectH2(url);
    session.on("error", reject);
    const stream = session.request({ ":method": "POST", ":path": PATH, te: "trailers", ...headers });
    const result: RawResult = { headers: {}, trailers: {}, messages: [] };
    let pending = Buffer.alloc(0);
    stream.on("response", (h) => (result.headers = h));
    stream.on("trailers", (t) => (result.trailers = t));
    stream.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
        result.messages.push(pending.subarray(5, 5 + pending.readUInt32BE(1)));
        pending = pending.subarray(5 + pending.readUInt32BE(1));
        if (enough(result.messages)) stream.close();
      }
    });
    stream.on("error", () => {});
    stream.on("close", () => {
      const fields = { ...result.headers, ...result.trailers };
      result.status = fields["grpc-status"] as string | undefined;
      const message = fields["grpc-message"] as string | undefined;
      result.message = message === undefined ? undefined : decodeURIComponent(message);
      session.destroy();
      resolve(result);
    });
    stream.end(body);
  });
}

function frame(payload: Uint8Array, compressed = false): Uint8Array {
  return encodeEnvelope(compressed ? compressedFlag : 0, payload);
}

const protoBody = (req: WatchRequest) => frame(toBinary(WatchDeploymentChangesRequestSchema, create(WatchDeploymentChangesRequestSchema, req)));
const jsonBody = (req: WatchRequest) => frame(Buffer.from(toJsonString(WatchDeploymentChangesRequestSchema, create(WatchDeploymentChangesRequestSchema, req))));

const [sqlite] = await testDatabases();

describe("gRPC watch streams served directly", () => {
  let t: TestCtrl;
  let agentToken: string;
  before(async () => {
    t = await startTestCtrl(sqlite!.db, { stream: { bookmarkIntervalMs: 200 } });
    await t.client(RegionService).createRegion({ region: { name: "east" } });
    await t.client(RegionService).createRegion({ region: { name: "west" } });
    agentToken = (await t.store.agentTokens.create("east")).token;
  });
  after(() => t.close());

  test("errors match connect's gRPC handler: code, message and details", async () => {
    const cases: { name: string; token?: string; req: WatchRequest }[] = [
      { name: "no token", req: { region: "east" } },
      { name: "bad token", token: "nope", req: { region: "east" } },
      { name: "agent token of another region", token: "agent", req: { region: "west" } },
      { name: "invalid region name", token: ADMIN_TOKEN, req: { region: "Not A Label" } },
      { name: "unknown region", token: ADMIN_TOKEN, req: { region: "north" } },
      { name: "cursor ahead of the head", token: ADMIN_TOKEN, req: { region: "east", versionLastSeen: 99n } },
    ];
    for (const c of cases) {
      const token = c.token === "agent" ? agentToken : c.token;
      const auth: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
      const direct = await rawCall(t.url, { "content-type": "application/grpc", ...auth }, protoBody(c.req));
      const viaConnect = await rawCall(t.url, { "content-type": "application/grpc+json", ...auth }, jsonBody(c.req));
      assert.notEqual(direct.status, undefined, c.name);
      assert.notEqual(direct.status, "0", c.name);
      assert.equal(direct.status, viaConnect.status, c.name);
      assert.equal(direct.message, viaConnect.message, c.name);
      const details = (r: RawResult) => ({ ...r.headers, ...r.trailers })["grpc-status-details-bin"];
      assert.equal(details(direct), details(viaConnect), c.name);
      assert.equal(direct.messages.length, 0, c.name);
    }
  });

  test("streams changes and bookmarks to an agent token of its own region", async () => {
    const head = (await t.store.regions.resolve("east")).headVersion;
    const call = rawCall(
      t.url,
      { "content-type": "application/grpc+proto", authorization: `Bearer ${agentToken}` },
      protoBody({ region: "east", versionLastSeen: BigInt(head) }),
      (m) => m.length >= 2,
    );
    await t
      .client(DeploymentService)
      .createDeployment({ deployment: { id: "web", namespace: "demo", image: "web:1", port: 8080, regions: [{ region: "east", replicas: 1 }] } });
    const result = await call;
    assert.equal(result.headers["content-type"], "application/grpc+proto");
    const responses = result.messages.map((m) => fromBinary(WatchDeploymentChangesResponseSchema, m));
    const events = responses.flatMap((r) => r.events);
    assert.equal(events.length, 1);
    assert.equal(events[0]!.version, BigInt(head + 1));
    assert.equal(events[0]!.change.case, "upsert");
    assert.ok(responses.every((r) => r.version >= BigInt(head)));
  });

  test("a live change fanned out to several streams is framed once: the same bytes on each, and the next change its own", async () => {
    const head = (await t.store.regions.resolve("east")).headVersion;
    const withEvents = (messages: Buffer[]) => messages.filter((m) => fromBinary(WatchDeploymentChangesResponseSchema, m).events.length > 0);
    const watch = () =>
      rawCall(
        t.url,
        { "content-type": "application/grpc", authorization: `Bearer ${agentToken}` },
        protoBody({ region: "east", versionLastSeen: BigInt(head) }),
        (m) => withEvents(m).length >= 2,
      );
    const calls = [watch(), watch(), watch()];
    await sleep(100); // subscribed: the changes arrive live, through the poller's fan-out
    for (const image of ["fan:1", "fan:2"]) {
      await t.client(DeploymentService).createDeployment({
        deployment: { id: `fan-${image.slice(-1)}`, namespace: "demo", image, port: 8080, regions: [{ region: "east", replicas: 1 }] },
      });
    }
    const received = (await Promise.all(calls)).map((r) => withEvents(r.messages));
    for (const messages of received) assert.deepEqual(messages, received[0], "every stream got the same bytes");
    const responses = received[0]!.map((m) => fromBinary(WatchDeploymentChangesResponseSchema, m));
    assert.deepEqual(
      responses.map((r) => [r.version, r.events.map((e) => e.version)]),
      [
        [BigInt(head + 1), [BigInt(head + 1)]],
        [BigInt(head + 2), [BigInt(head + 2)]],
      ],
    );
  });

  test("reads a gzip-compressed request", async () => {
    const payload = gzipSync(toBinary(WatchDeploymentChangesRequestSchema, create(WatchDeploymentChangesRequestSchema, { region: "east" })));
    const result = await rawCall(
      t.url,
      { "content-type": "application/grpc", "grpc-encoding": "gzip", authorization: `Bearer ${ADMIN_TOKEN}` },
      frame(payload, true),
      (m) => m.length >= 1,
    );
    assert.equal(result.messages.length, 1); // a bookmark
    assert.deepEqual(fromBinary(WatchDeploymentChangesResponseSchema, result.messages[0]!).events, []);
  });

  test("rejects what it cannot read with a clear code, and serves on", async () => {
    const headers = { "content-type": "application/grpc", authorization: `Bearer ${ADMIN_TOKEN}` };
    const garbage = await rawCall(t.url, headers, frame(Buffer.from([0xff, 0xff, 0xff, 0xff])));
    assert.equal(garbage.status, "3", JSON.stringify(garbage)); // INVALID_ARGUMENT
    assert.match(garbage.message ?? "", /not a valid ctrl\.v1\.WatchDeploymentChangesRequest/);
    const truncated = await rawCall(t.url, headers, protoBody({ region: "east" }).subarray(0, 6));
    assert.equal(truncated.status, "3");
    const unknownEncoding = await rawCall(t.url, { ...headers, "grpc-encoding": "snappy" }, frame(Buffer.from("x"), true));
    assert.equal(unknownEncoding.status, "12"); // UNIMPLEMENTED
    const ok = await rawCall(t.url, headers, protoBody({ region: "east" }), (m) => m.length >= 1);
    assert.equal(ok.messages.length, 1);
  });

  test("honours grpc-timeout with DEADLINE_EXCEEDED", async () => {
    const started = Date.now();
    const result = await rawCall(
      t.url,
      { "content-type": "application/grpc", "grpc-timeout": "300m", authorization: `Bearer ${ADMIN_TOKEN}` },
      protoBody({ region: "east" }),
    );
    assert.equal(result.status, "4", JSON.stringify(result));
    assert.ok(Date.now() - started < 5000);
  });

  test("a bookmark never runs ahead of a fan-out that has not reached its stream yet", async () => {
    // Bookmarks every 1 ms on 200 streams, and fat events: fan-outs span several event-loop
    // turns, each long enough for bookmark timers to fire in between.
    const env = Array.from({ length: 20 }, (_, i) => ({ name: `V${i}`, value: "x".repeat(2000) }));
    const fast = await startTestCtrl(sqlite!.db, { stream: { bookmarkIntervalMs: 1 } });
    try {
      await fast.client(RegionService).createRegion({ region: { name: "busy" } });
      const writes = 8;
      const headers = { "content-type": "application/grpc", authorization: `Bearer ${ADMIN_TOKEN}` };
      const reached = (messages: Buffer[]) => messages.some((m) => fromBinary(WatchDeploymentChangesResponseSchema, m).version >= BigInt(writes));
      const calls = Array.from({ length: 200 }, () => rawCall(fast.url, headers, protoBody({ region: "busy", versionLastSeen: 0n }), reached));
      const open = async () => (await fast.ctrl.metrics.watchStreams.get()).values.reduce((n, v) => n + v.value, 0);
      while ((await open()) < calls.length) await sleep(20);
      for (let i = 0; i < writes; i++) {
        await fast
          .client(DeploymentService)
          .createDeployment({ deployment: { id: `d${i}`, namespace: "demo", image: "web:1", port: 8080, env, regions: [{ region: "busy", replicas: 1 }] } });
      }
      for (const result of await Promise.all(calls)) {
        let cursor = 0n;
        const seen: bigint[] = [];
        for (const response of result.messages.map((m) => fromBinary(WatchDeploymentChangesResponseSchema, m))) {
          for (const event of response.events) {
            assert.ok(event.version > cursor, `event ${event.version} after the stream said it was at ${cursor}`);
            seen.push(event.version);
          }
          assert.ok(response.version >= cursor, `version went back from ${cursor} to ${response.version}`);
          cursor = response.version;
        }
        assert.deepEqual(
          seen,
          Array.from({ length: writes }, (_, i) => BigInt(i + 1)),
        );
      }
    } finally {
      await fast.close();
    }
  });

  test("is counted in the request metrics", async () => {
    await rawCall(t.url, { "content-type": "application/grpc" }, protoBody({ region: "east" }));
    const text = await (await fetch(`${t.url}/metrics`)).text();
    assert.match(text, /flotilla_ctrl_requests_total\{procedure="ctrl\.v1\.ClusterService\/WatchDeploymentChanges",code="unauthenticated"\} [1-9]/);
    assert.match(text, /flotilla_ctrl_requests_total\{procedure="ctrl\.v1\.ClusterService\/WatchDeploymentChanges",code="deadline_exceeded"\} [1-9]/);
  });
});

test("a message's verbatim fields are written by reference, and its chunks are its encoding", () => {
  const changes = [new Uint8Array([2, 8, 1]), new Uint8Array([2, 8, 2])]; // length-prefixed, as a change's bytes are
  const message = withVerbatimField(create(WatchDeploymentChangesResponseSchema, { version: 7n }), 1, changes);
  const chunks = encodedChunks(WatchDeploymentChangesResponseSchema, message);
  assert.deepEqual(Buffer.concat(chunks), Buffer.from(toBinary(WatchDeploymentChangesResponseSchema, message)));
  assert.ok(
    changes.every((change) => chunks.includes(change)),
    "a verbatim field was copied",
  );
  const plain = create(WatchDeploymentChangesResponseSchema, { version: 7n });
  assert.deepEqual(encodedChunks(WatchDeploymentChangesResponseSchema, plain), [toBinary(WatchDeploymentChangesResponseSchema, plain)]);
});
