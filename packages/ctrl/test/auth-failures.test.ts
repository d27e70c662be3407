// --max-auth-failures-per-connection: a connection that failed authentication N times is
// ended at its N+1st failure (still answered), so guessing tokens costs a new connection
// every N guesses; other connections and successful calls are not affected.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import { randomBytes } from "node:crypto";
import { create, toBinary } from "@bufbuild/protobuf";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { GetRegionRequestSchema } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

const MAX = 4;
const GET_REGION = "/ctrl.v1.RegionService/GetRegion";
const body = encodeEnvelope(0, toBinary(GetRegionRequestSchema, create(GetRegionRequestSchema, { name: "local" })));
const randomToken = () => ({ authorization: `Bearer flt_${randomBytes(24).toString("base64url")}` });
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/** One gRPC call on `session`; its grpc-status. */
function grpcCall(session: http2.ClientHttp2Session, headers: Record<string, string>, payload: Uint8Array = body): Promise<string> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ":method": "POST", ":path": GET_REGION, "content-type": "application/grpc", te: "trailers", ...headers });
    let status = "";
    const read = (h: http2.IncomingHttpHeaders) => {
      if (h["grpc-status"] !== undefined) status = String(h["grpc-status"]);
    };
    stream.on("response", read);
    stream.on("trailers", read);
    stream.on("data", () => {});
    stream.on("error", reject);
    stream.on("close", () => (status ? resolve(status) : reject(new Error(`stream closed without a status (rst ${stream.rstCode})`))));
    stream.end(payload);
  });
}

function connect(url: string): { session: http2.ClientHttp2Session; goaways: number[] } {
  const session = http2.connect(url);
  const goaways: number[] = [];
  session.on("error", () => {});
  session.on("goaway", (code) => goaways.push(code));
  return { session, goaways };
}

/** A Connect call over HTTP/1.1 through `agent`; its status, connection header and local port. */
function connectCall(url: string, agent: http.Agent, headers: Record<string, string>): Promise<{ status: number; connection: string; port: number }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${GET_REGION}`, { method: "POST", agent, headers: { "content-type": "application/json", ...headers } }, (res) => {
      const port = res.socket.localPort ?? 0;
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, connection: String(res.headers.connection), port }));
    });
    req.on("error", reject);
    req.end(JSON.stringify({ name: "local" }));
  });
}

const authFailuresEnforced = async (t: TestCtrl) =>
  (await t.ctrl.metrics.connectionBounds.get()).values.find((v) => v.labels.reason === "auth_failures")?.value ?? 0;

for (const { db, skip } of await testDatabases()) {
  describe(`failed authentications per connection (${db.name})`, { skip, timeout: 60_000 }, () => {
    let t: TestCtrl;
    before(async () => {
      t = await startTestCtrl(db, { bounds: { maxAuthFailuresPerConnection: MAX } });
      await t.store.regions.create("local");
    });
    after(() => t.close());

    test("HTTP/2: the N+1st failure is answered and ends the connection (GOAWAY ENHANCE_YOUR_CALM); successes do not count; another connection is unaffected", async () => {
      const before = await authFailuresEnforced(t);
      const good = connect(t.url);
      const hostile = connect(t.url);
      // Successes on the hostile connection, between its failures, do not count.
      for (let i = 0; i < MAX * 3; i++) assert.equal(await grpcCall(hostile.session, admin), "0");
      for (let i = 0; i < MAX; i++) {
        // No token and a body that does not parse: fails authentication before the body is read.
        const noToken = i % 2 === 0;
        assert.equal(await grpcCall(hostile.session, noToken ? {} : randomToken(), noToken ? encodeEnvelope(0, Buffer.from([0xff, 0xff])) : body), "16");
        assert.equal(await grpcCall(hostile.session, admin), "0");
        assert.equal(await grpcCall(good.session, admin), "0");
      }
      assert.deepEqual(hostile.goaways, []);
      assert.equal(hostile.session.closed, false);

      const closed = new Promise((resolve) => hostile.session.once("close", resolve));
      assert.equal(await grpcCall(hostile.session, randomToken()), "16");
      await closed;
      assert.equal(hostile.goaways[0], http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
      assert.equal(await authFailuresEnforced(t), before + 1);

      // The good client's connection lives on, and a new connection starts with a clean count.
      assert.deepEqual(good.goaways, []);
      assert.equal(await grpcCall(good.session, admin), "0");
      const again = connect(t.url);
      for (let i = 0; i < MAX; i++) assert.equal(await grpcCall(again.session, randomToken()), "16");
      assert.deepEqual(again.goaways, []);
      for (const c of [good, again]) c.session.close();
    });

    test("HTTP/1.1: the N+1st failure is answered with connection: close, and the next request needs a new connection", async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const first = await connectCall(t.url, agent, admin);
        assert.equal(first.status, 200);
        for (let i = 0; i < MAX; i++) {
          const answer = await connectCall(t.url, agent, i % 2 === 0 ? {} : randomToken());
          assert.deepEqual([answer.status, answer.connection, answer.port], [401, "keep-alive", first.port]);
        }
        const last = await connectCall(t.url, agent, randomToken());
        assert.deepEqual([last.status, last.connection, last.port], [401, "close", first.port]);
        const next = await connectCall(t.url, agent, admin);
        assert.equal(next.status, 200);
        assert.notEqual(next.port, first.port);
      } finally {
        agent.destroy();
      }
    });
  });
}
