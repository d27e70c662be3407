// The early refusal (calls with a missing or forged token, answered before connect builds
// anything) writes what connect's own request gate writes for them, on every protocol; what
// connect would refuse for another reason, or a token that needs a lookup, is left to connect.
// Two servers side by side: connect alone, and the early refusal in front of it.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import { Code } from "@connectrpc/connect";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { createAuthenticator } from "../src/auth.ts";
import { earlyRefusal } from "../src/early-refusal.ts";
import { listenDual, type DualListener } from "../src/listener.ts";
import { nodeAdapter } from "../src/node-adapter.ts";
import { requestGate } from "../src/request-gate.ts";

const POSSIBLE_AGENT_TOKEN = "flt_agent_looked-up";

let connectOnly: DualListener;
let withEarly: DualListener;
const early: { refused: number; rejected: string[] } = { refused: 0, rejected: [] };

before(async () => {
  const auth = createAuthenticator({
    adminToken: "admin",
    mayBeAgentToken: (token) => token === POSSIBLE_AGENT_TOKEN,
    authenticateAgent: async () => undefined,
    publicServices: new Set(),
    tokenCacheSize: 10,
    mayBeOperatorToken: () => false,
    authenticateOperator: async () => undefined,
    knownTokenCacheMs: 500,
  });
  const acceptCompression = [compressionGzip, compressionBrotli];
  const encodings = acceptCompression.map((c) => c.name);
  const connect = nodeAdapter({
    routes: (router) => {
      router.service(DeploymentService, {});
      router.service(ClusterService, {});
    },
    acceptCompression,
    requestGate: requestGate([auth.interceptor], () => {}, encodings),
    logError: () => {},
    fallback: (_, res) => {
      res.writeHead(404);
      res.end();
    },
  });
  const refused = earlyRefusal({
    services: [DeploymentService, ClusterService],
    refusal: auth.refusal,
    acceptEncodings: encodings,
    rejected: (service, method, error) => early.rejected.push(`${service}/${method} ${Code[error.code]}`),
    unauthenticated: () => early.refused++,
  });
  connectOnly = await listenDual("127.0.0.1", 0, connect as never);
  withEarly = await listenDual("127.0.0.1", 0, (req, res) => refused(req, res) || connect(req as never, res as never));
});

after(() => {
  for (const listener of [connectOnly, withEarly]) {
    listener.drain();
    listener.destroy();
  }
});

const url = (listener: DualListener) => `http://127.0.0.1:${listener.address.port}`;

/** What a client sees of an answer, without what varies per connection (date, keep-alive). */
interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const VARYING = new Set(["date", "connection", "keep-alive", "transfer-encoding"]);

function visible(status: number, headers: Record<string, unknown>, body: Buffer): Answer {
  const kept = Object.entries(headers).filter(([name]) => !name.startsWith(":") && !VARYING.has(name));
  return { status, headers: Object.fromEntries(kept.map(([k, v]) => [k, String(v)]).sort()), body: body.toString("hex") };
}

/** A request over HTTP/2 whose body is never sent; headers and trailers of the answer merged. */
function h2Call(base: string, path: string, headers: Record<string, string>): Promise<Answer> {
  const session = http2.connect(base);
  session.on("error", () => {});
  return new Promise<Answer>((resolve, reject) => {
    const stream = session.request({ ":method": "POST", ":path": path, te: "trailers", ...headers });
    let status = 0;
    const all: Record<string, unknown> = {};
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      Object.assign(all, h);
    });
    stream.on("trailers", (h) => Object.assign(all, h));
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("close", () => resolve(visible(status, all, Buffer.concat(chunks))));
    stream.on("error", reject);
  }).finally(() => session.destroy());
}

/** A request over HTTP/1.1 that declares a body it never sends. */
function h1Call(base: string, path: string, headers: Record<string, string>): Promise<Answer> {
  return new Promise<Answer>((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method: "POST", agent: false, headers: { ...headers, "content-length": "100" } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        resolve(visible(res.statusCode ?? 0, res.headers, Buffer.concat(chunks)));
        req.destroy();
      });
    });
    req.on("error", reject);
    req.flushHeaders();
  });
}

const UNARY = "/ctrl.v1.DeploymentService/GetDeployment";
const STREAMING = "/ctrl.v1.ClusterService/WatchDeploymentChanges";

const cases: { name: string; call: typeof h1Call; path: string; contentType: string; early: boolean }[] = [
  { name: "gRPC", call: h2Call, path: UNARY, contentType: "application/grpc", early: true },
  { name: "gRPC JSON, streaming", call: h2Call, path: STREAMING, contentType: "application/grpc+json", early: true },
  { name: "gRPC-Web", call: h1Call, path: UNARY, contentType: "application/grpc-web+proto", early: true },
  { name: "gRPC-Web JSON over HTTP/2, streaming", call: h2Call, path: STREAMING, contentType: "application/grpc-web+json", early: true },
  { name: "Connect unary JSON", call: h1Call, path: UNARY, contentType: "application/json", early: true },
  { name: "Connect unary proto over HTTP/2", call: h2Call, path: UNARY, contentType: "application/proto", early: true },
  { name: "Connect streaming", call: h1Call, path: STREAMING, contentType: "application/connect+json", early: true },
  // Refused by connect for their protocol first: left to it.
  { name: "gRPC over HTTP/1.1", call: h1Call, path: UNARY, contentType: "application/grpc", early: false },
  { name: "gRPC-Web text", call: h1Call, path: UNARY, contentType: "application/grpc-web-text", early: false },
  { name: "Connect streaming content type, unary method", call: h1Call, path: UNARY, contentType: "application/connect+json", early: false },
  { name: "Connect unary content type, streaming method", call: h1Call, path: STREAMING, contentType: "application/json", early: false },
  { name: "no content type", call: h1Call, path: UNARY, contentType: "", early: false },
];

for (const c of cases) {
  test(`${c.name}: ${c.early ? "answered early, as connect answers" : "left to connect"}`, async () => {
    for (const authorization of [undefined, "Bearer nope", "Basic YWRtaW46YWRtaW4=", `Bearer ${POSSIBLE_AGENT_TOKEN}`]) {
      const headers: Record<string, string> = c.contentType ? { "content-type": c.contentType } : {};
      if (authorization) headers.authorization = authorization;
      const refusedBefore = early.refused;
      const expected = await c.call(url(connectOnly), c.path, headers);
      const actual = await c.call(url(withEarly), c.path, headers);
      assert.deepEqual(actual, expected, `${c.name}, ${authorization ?? "no authorization"}`);
      // A possible agent token is looked up by the authenticator (under connect), never refused early.
      const answeredEarly = c.early && authorization !== `Bearer ${POSSIBLE_AGENT_TOKEN}`;
      assert.equal(early.refused - refusedBefore, answeredEarly ? 1 : 0, `${c.name}, ${authorization ?? "no authorization"}`);
    }
  });
}

test("refusals are reported with their method and code", () => {
  assert.ok(early.rejected.includes("ctrl.v1.DeploymentService/GetDeployment Unauthenticated"));
  assert.ok(early.rejected.includes("ctrl.v1.ClusterService/WatchDeploymentChanges Unauthenticated"));
});
