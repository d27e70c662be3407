// Before a body is read: a request without valid credentials is refused from its headers
// alone, a request larger than --read-max-bytes is refused from its declared size; a body
// that does not parse is INVALID_ARGUMENT on every protocol and path. Before it is decoded:
// each RPC's message limit (--write-max-bytes, --query-max-bytes), the shape limits
// (--max-repeated-elements, --max-nesting-depth: INVALID_ARGUMENT naming the field, nothing
// written) and the decode budget (--decode-budget-bytes, --decode-wait), at the limit and one
// byte, element or level past it.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import http from "node:http";
import http2 from "node:http2";
import { randomBytes } from "node:crypto";
import { gzipSync, zstdCompressSync } from "node:zlib";
import { create, fromBinary, toBinary, type JsonObject } from "@bufbuild/protobuf";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { GetDeploymentRequestSchema } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { ReportObservedStateRequestSchema, WatchDeploymentChangesRequestSchema, SyncDesiredStateRequestSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { CreateNetworkPolicyRequestSchema } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, rowCounts, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

const READ_MAX_BYTES = 64 * 1024;

/** Bodies that are not protobuf of any of the request types used here. */
function malformedBodies(): Buffer[] {
  const fixed = [
    [0xff, 0xff, 0xff, 0xff], // wire type 7
    [0x0a, 0x05, 0x61], // a length past the end
    [0x08], // a truncated varint
    [0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f], // a huge length
    [0x0b], // a group start with no end
  ].map((b) => Buffer.from(b));
  const random: Buffer[] = [];
  while (random.length < 15) {
    const body = randomBytes(1 + random.length * 3);
    const fails = [GetDeploymentRequestSchema, WatchDeploymentChangesRequestSchema, SyncDesiredStateRequestSchema].every((schema) => {
      try {
        fromBinary(schema, body);
        return false;
      } catch {
        return true;
      }
    });
    if (fails) random.push(body);
  }
  return [...fixed, ...random];
}

interface Answer {
  httpStatus: number;
  /** The RPC code as the protocol states it (gRPC status number, or Connect's code name). */
  code: string;
}

/** One gRPC call over HTTP/2; `body` undefined leaves the request body open (never sent). */
function grpcCall(url: string, path: string, headers: Record<string, string>, body: Buffer | undefined): Promise<Answer> {
  const session = http2.connect(url);
  session.on("error", () => {});
  return new Promise<Answer>((resolve, reject) => {
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
    let httpStatus = 0;
    let code = "";
    const read = (h: http2.IncomingHttpHeaders) => {
      if (h[":status"]) httpStatus = Number(h[":status"]);
      if (h["grpc-status"] !== undefined) code = String(h["grpc-status"]);
      if (code !== "" && body === undefined) resolve({ httpStatus, code });
    };
    stream.on("response", read);
    stream.on("trailers", read);
    stream.on("data", () => {});
    stream.on("end", () => resolve({ httpStatus, code }));
    stream.on("error", reject);
    if (body !== undefined) stream.end(body);
  }).finally(() => session.destroy());
}

/** One HTTP/1.1 request; `declaredLength` without `body` sends headers only (the body never comes). */
function h1Call(
  url: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer | undefined,
  declaredLength?: number,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}${path}`,
      { method: "POST", headers: { ...headers, "content-length": String(declaredLength ?? body?.length ?? 0) }, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
          req.destroy();
        });
      },
    );
    req.on("error", reject);
    if (body) req.end(body);
    else req.flushHeaders();
  });
}

/** The grpc-status in a gRPC-Web response: its headers, or its trailer frame. */
function grpcWebStatus(res: { headers: http.IncomingHttpHeaders; body: Buffer }): string {
  if (res.headers["grpc-status"] !== undefined) return String(res.headers["grpc-status"]);
  let data = res.body;
  while (data.length >= 5) {
    const end = 5 + data.readUInt32BE(1);
    if (data[0]! & 0x80) return /grpc-status:\s*(\d+)/i.exec(data.subarray(5, end).toString())?.[1] ?? "";
    data = data.subarray(end);
  }
  return "";
}

for (const { db, skip } of await testDatabases()) {
  describe(`before the body (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
    before(async () => {
      t = await startTestCtrl(db, { readMaxBytes: READ_MAX_BYTES, tokenLookupConcurrency: 2 });
      await t.store.regions.create("local");
    });
    after(() => t.close());

    test("malformed protobuf is invalid_argument on Connect, gRPC and gRPC-Web, unary and streaming, connect's path and the direct watch path", async () => {
      const before = await rowCounts(t.store);
      const seen = new Map<string, Set<string>>();
      const note = (path: string, code: string) => seen.set(path, (seen.get(path) ?? new Set()).add(code));
      for (const body of malformedBodies()) {
        const unary = await h1Call(t.url, "/ctrl.v1.DeploymentService/GetDeployment", { ...auth, "content-type": "application/proto" }, body);
        note("connect unary", `${unary.status} ${JSON.parse(unary.body.toString()).code}`);
        const stream = await h1Call(
          t.url,
          "/ctrl.v1.ClusterService/SyncDesiredState",
          { ...auth, "content-type": "application/connect+proto" },
          Buffer.from(encodeEnvelope(0, body)),
        );
        const end = stream.body.subarray(5, 5 + stream.body.readUInt32BE(1));
        note("connect streaming", `${stream.status} ${JSON.parse(end.toString()).error?.code}`);
        for (const method of ["DeploymentService/GetDeployment", "ClusterService/SyncDesiredState", "ClusterService/WatchDeploymentChanges"]) {
          const grpc = await grpcCall(t.url, `/ctrl.v1.${method}`, auth, Buffer.from(encodeEnvelope(0, body)));
          note(`grpc ${method}`, `${grpc.httpStatus} ${grpc.code}`);
        }
        const web = await h1Call(
          t.url,
          "/ctrl.v1.DeploymentService/GetDeployment",
          { ...auth, "content-type": "application/grpc-web+proto" },
          Buffer.from(encodeEnvelope(0, body)),
        );
        note("grpc-web unary", `${web.status} ${grpcWebStatus(web)}`);
      }
      assert.deepEqual(Object.fromEntries([...seen].map(([path, codes]) => [path, [...codes]])), {
        "connect unary": ["400 invalid_argument"],
        "connect streaming": ["200 invalid_argument"],
        "grpc DeploymentService/GetDeployment": ["200 3"],
        "grpc ClusterService/SyncDesiredState": ["200 3"],
        "grpc ClusterService/WatchDeploymentChanges": ["200 3"],
        "grpc-web unary": ["200 3"],
      });
      assert.deepEqual(await rowCounts(t.store), before);
    });

    test("without valid credentials a request is refused from its headers; its body is never awaited", async () => {
      // Each request declares a body it never sends: an answer proves ctrl did not wait for it.
      for (const token of [undefined, `not-a-token-${randomBytes(8).toString("hex")}`]) {
        const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
        for (const method of ["DeploymentService/GetDeployment", "ClusterService/WatchDeploymentChanges"]) {
          assert.deepEqual(await grpcCall(t.url, `/ctrl.v1.${method}`, headers, undefined), { httpStatus: 200, code: "16" });
        }
        const unary = await h1Call(t.url, "/ctrl.v1.DeploymentService/GetDeployment", { ...headers, "content-type": "application/json" }, undefined, 1000);
        assert.deepEqual([unary.status, JSON.parse(unary.body.toString()).code], [401, "unauthenticated"]);
        const web = await h1Call(
          t.url,
          "/ctrl.v1.DeploymentService/GetDeployment",
          { ...headers, "content-type": "application/grpc-web+proto" },
          undefined,
          1000,
        );
        assert.equal(grpcWebStatus(web), "16");
      }
    });

    test("calls reset with their headers (rapid reset) before their refusal is written leave ctrl serving", async () => {
      // In ctrl's own process an uncaught exception ends it.
      const uncaught: unknown[] = [];
      const onUncaught = (error: unknown) => uncaught.push(error);
      process.on("uncaughtException", onUncaught);
      const session = http2.connect(t.url);
      session.on("error", () => {});
      try {
        await new Promise((resolve) => session.once("connect", resolve));
        // Headers and reset in one write: the stream is gone by the time ctrl would answer it.
        for (let i = 0; i < 50 && !session.closed && !session.destroyed; i++) {
          const stream = session.request({ ":method": "POST", ":path": "/ctrl.v1.DeploymentService/GetDeployment", "content-type": "application/grpc" });
          stream.on("error", () => {});
          stream.close(http2.constants.NGHTTP2_CANCEL);
        }
        await sleep(200);
      } finally {
        session.destroy();
        process.off("uncaughtException", onUncaught);
      }
      assert.deepEqual(uncaught, []);
      assert.deepEqual(await grpcCall(t.url, "/ctrl.v1.DeploymentService/GetDeployment", {}, undefined), { httpStatus: 200, code: "16" });
    });

    test("a spray of unknown tokens looks them up at most --token-lookup-concurrency at a time", async () => {
      let inFlight = 0;
      let most = 0;
      const authenticate = t.store.agentTokens.authenticate.bind(t.store.agentTokens);
      t.store.agentTokens.authenticate = async (token) => {
        most = Math.max(most, ++inFlight);
        try {
          // A slow database: lookups overlap, so only the bound keeps them from all running at once.
          await sleep(50);
          return await authenticate(token);
        } finally {
          inFlight--;
        }
      };
      // Revoked tokens: well formed, so each one is looked up (a forgery would not be).
      const revoked: string[] = [];
      for (let i = 0; i < 40; i++) {
        const { id, token } = await t.store.agentTokens.create("local");
        await t.store.agentTokens.revoke(id);
        revoked.push(token);
      }
      try {
        const answers = await Promise.all(
          revoked.map((token) =>
            grpcCall(t.url, "/ctrl.v1.DeploymentService/GetDeployment", { authorization: `Bearer ${token}` }, Buffer.from(encodeEnvelope(0, Buffer.alloc(0)))),
          ),
        );
        assert.deepEqual(new Set(answers.map((a) => a.code)), new Set(["16"]));
        // Unbounded, all 40 lookups would wait on the database at once.
        assert.equal(most, 2);
      } finally {
        t.store.agentTokens.authenticate = authenticate;
      }
    });

    test("a request above --read-max-bytes is refused from its declared size, before its body is read", async () => {
      // HTTP/1.1 Connect: content-length says too much; the body never comes.
      const unary = await h1Call(
        t.url,
        "/ctrl.v1.DeploymentService/GetDeployment",
        { ...auth, "content-type": "application/json" },
        undefined,
        READ_MAX_BYTES + 1,
      );
      assert.deepEqual([unary.status, JSON.parse(unary.body.toString()).code], [429, "resource_exhausted"]);
      // gRPC: the envelope says too much; only its 5-byte prefix is sent, on a stream left open.
      for (const method of ["DeploymentService/GetDeployment", "ClusterService/WatchDeploymentChanges"]) {
        const session = http2.connect(t.url);
        try {
          const stream = session.request({ ":method": "POST", ":path": `/ctrl.v1.${method}`, "content-type": "application/grpc", te: "trailers", ...auth });
          const prefix = Buffer.alloc(5);
          prefix.writeUInt32BE(READ_MAX_BYTES + 1, 1);
          stream.write(prefix);
          const status = await new Promise<string>((resolve) => {
            const read = (h: http2.IncomingHttpHeaders) => h["grpc-status"] !== undefined && resolve(String(h["grpc-status"]));
            stream.on("response", read);
            stream.on("trailers", read);
            stream.on("data", () => {});
            stream.on("error", () => {});
          });
          assert.equal(status, "8", method);
        } finally {
          session.destroy();
        }
      }
    });

    test("a too-large upload over HTTP/1.1 gets its answer, not a reset connection", async () => {
      const body = Buffer.alloc(READ_MAX_BYTES * 4, "x");
      for (const contentType of ["application/json", "application/grpc-web+proto"]) {
        const res = await h1Call(
          t.url,
          "/ctrl.v1.DeploymentService/GetDeployment",
          { ...auth, "content-type": contentType },
          contentType === "application/json" ? body : Buffer.from(encodeEnvelope(0, body)),
        );
        if (contentType === "application/json") assert.deepEqual([res.status, JSON.parse(res.body.toString()).code], [429, "resource_exhausted"]);
        else assert.equal(grpcWebStatus(res), "8");
      }
    });
  });
}

/** `{"id":"web"}` padded with spaces to exactly `bytes`. */
const jsonOf = (bytes: number, text = '{"id":"web"}') => Buffer.from(text.padEnd(bytes, " "));
/** A policy whose spec nests `levels` objects, the innermost holding `leaf`. */
function nestedSpec(levels: number, leaf: JsonObject | number): JsonObject {
  let spec: JsonObject | number = leaf;
  for (let i = 0; i < levels; i++) spec = { a: spec };
  return spec as JsonObject;
}

for (const { db, skip } of await testDatabases()) {
  describe(`before decoding (${db.name})`, { skip }, () => {
    const LIMITS = {
      readMaxBytes: 64 * 1024,
      decoding: { writeMaxBytes: 8 * 1024, queryMaxBytes: 1024, maxElements: 100, maxDepth: 8, budgetBytes: 4096, waitMs: 200 },
    };
    let t: TestCtrl;
    const auth = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const json = { ...auth, "content-type": "application/json" };
    before(async () => {
      t = await startTestCtrl(db, LIMITS);
      await t.store.regions.create("local");
    });
    after(() => t.close());

    test("each RPC's message limit: a query at --query-max-bytes is served, one byte more is RESOURCE_EXHAUSTED; a write likewise at --write-max-bytes", async () => {
      const query = LIMITS.decoding.queryMaxBytes;
      const at = await h1Call(t.url, "/ctrl.v1.DeploymentService/GetDeployment", json, jsonOf(query));
      assert.deepEqual([at.status, JSON.parse(at.body.toString()).code], [404, "not_found"]);
      const past = await h1Call(t.url, "/ctrl.v1.DeploymentService/GetDeployment", json, jsonOf(query + 1));
      assert.deepEqual([past.status, JSON.parse(past.body.toString()).code], [429, "resource_exhausted"]);
      const before = await rowCounts(t.store);
      const write = LIMITS.decoding.writeMaxBytes;
      const create = '{"networkPolicy":{"id":"p","region":"nowhere","namespace":"web","spec":{}}}';
      const atWrite = await h1Call(t.url, "/ctrl.v1.NetworkPolicyService/CreateNetworkPolicy", json, jsonOf(write, create));
      assert.notEqual(atWrite.status, 429, atWrite.body.toString());
      const pastWrite = await h1Call(t.url, "/ctrl.v1.NetworkPolicyService/CreateNetworkPolicy", json, jsonOf(write + 1, create));
      assert.deepEqual([pastWrite.status, JSON.parse(pastWrite.body.toString()).code], [429, "resource_exhausted"]);
      // gRPC: the envelope declares the size (the direct path's requests are queries too).
      for (const method of ["DeploymentService/GetDeployment", "ClusterService/WatchDeploymentChanges"]) {
        const answer = await grpcCall(t.url, `/ctrl.v1.${method}`, auth, Buffer.from(encodeEnvelope(0, Buffer.alloc(query + 1))));
        assert.equal(answer.code, "8", method);
      }
      assert.deepEqual(await rowCounts(t.store), before);
    });

    test("a compressed body is bounded as it inflates: gzip or zstd, at --write-max-bytes it is decoded, one byte more is RESOURCE_EXHAUSTED; nothing written", async () => {
      const before = await rowCounts(t.store);
      const write = LIMITS.decoding.writeMaxBytes;
      const create = '{"networkPolicy":{"id":"p","region":"nowhere","namespace":"web","spec":{}}}';
      for (const [encoding, compress] of [
        ["gzip", gzipSync],
        ["zstd", zstdCompressSync],
      ] as const) {
        const call = (bytes: number) =>
          h1Call(t.url, "/ctrl.v1.NetworkPolicyService/CreateNetworkPolicy", { ...json, "content-encoding": encoding }, compress(jsonOf(bytes, create)));
        const at = await call(write);
        // Inflated, decoded and validated: the policy's own mistake is what comes back.
        assert.deepEqual(JSON.parse(at.body.toString()), { code: "invalid_argument", message: "network_policy.spec: must not be empty" }, encoding);
        const past = await call(write + 1);
        assert.deepEqual([past.status, JSON.parse(past.body.toString()).code], [429, "resource_exhausted"], encoding);
      }
      assert.deepEqual(await rowCounts(t.store), before);
    });

    test("--max-repeated-elements: 100 observations pass the check, 101 are INVALID_ARGUMENT naming the field, in protobuf and JSON; nothing written", async () => {
      const before = await rowCounts(t.store);
      const report = (n: number) =>
        create(ReportObservedStateRequestSchema, { region: "local", observations: Array.from({ length: n }, (_, i) => ({ id: `d${i}` })) });
      const path = "/ctrl.v1.ClusterService/ReportObservedState";
      const message = async (n: number) => {
        const res = await h1Call(
          t.url,
          path,
          { ...auth, "content-type": "application/proto" },
          Buffer.from(toBinary(ReportObservedStateRequestSchema, report(n))),
        );
        return JSON.parse(res.body.toString()) as { code?: string; message?: string };
      };
      assert.doesNotMatch((await message(100)).message ?? "", /more than/);
      assert.deepEqual(await message(101), { code: "invalid_argument", message: "observations: more than 100 elements" });
      const body = JSON.stringify({ region: "local", observations: Array.from({ length: 101 }, (_, i) => ({ id: `d${i}` })) });
      const res = await h1Call(t.url, path, json, Buffer.from(body));
      assert.deepEqual(JSON.parse(res.body.toString()), { code: "invalid_argument", message: "observations: more than 100 elements" });
      assert.deepEqual(await rowCounts(t.store), before);
    });

    test("--max-nesting-depth: JSON 8 levels deep passes the check, 9 are INVALID_ARGUMENT naming the field; so are nested messages; nothing written", async () => {
      const before = await rowCounts(t.store);
      const path = "/ctrl.v1.NetworkPolicyService/CreateNetworkPolicy";
      const policy = (spec: JsonObject) => ({ networkPolicy: { id: "p", region: "nowhere", namespace: "web", spec } });
      // The request and networkPolicy are 2 levels: a spec nesting 5 more objects makes 8.
      const answer = async (spec: JsonObject) => JSON.parse((await h1Call(t.url, path, json, Buffer.from(JSON.stringify(policy(spec))))).body.toString());
      assert.deepEqual(await answer(nestedSpec(5, {})), { code: "not_found", message: 'network_policy.region: region "nowhere" not found' });
      assert.deepEqual(await answer(nestedSpec(6, {})), { code: "invalid_argument", message: "networkPolicy.spec.a.a.a.a.a.a: nested deeper than 8 levels" });
      // Binary: request, policy and the spec's Struct are 3 messages, each level a Value and a Struct: a number 3 levels down is the 8th.
      const binary = async (spec: JsonObject) => {
        const request = create(CreateNetworkPolicyRequestSchema, policy(spec) as never);
        const res = await h1Call(
          t.url,
          path,
          { ...auth, "content-type": "application/proto" },
          Buffer.from(toBinary(CreateNetworkPolicyRequestSchema, request)),
        );
        return JSON.parse(res.body.toString()) as { code?: string; message?: string };
      };
      assert.deepEqual(await binary(nestedSpec(2, { a: 1 })), { code: "not_found", message: 'network_policy.region: region "nowhere" not found' });
      const deeper = await binary(nestedSpec(3, {}));
      assert.equal(deeper.code, "invalid_argument");
      assert.match(deeper.message ?? "", /^network_policy\.spec\.fields\.[a-z_.]+: nested deeper than 8 messages$/);
      assert.deepEqual(await rowCounts(t.store), before);
    });

    test("--decode-budget-bytes: a request waits for its share, --decode-wait later it is RESOURCE_EXHAUSTED with a RetryInfo; served once the budget is free", async () => {
      // A body that declares the whole budget and stops after its prefix holds it.
      const session = http2.connect(t.url);
      session.on("error", () => {});
      try {
        const holder = session.request({
          ":method": "POST",
          ":path": "/ctrl.v1.ClusterService/ReportObservedState",
          "content-type": "application/grpc",
          te: "trailers",
          ...auth,
        });
        holder.on("error", () => {});
        holder.on("data", () => {});
        const prefix = Buffer.alloc(5);
        prefix.writeUInt32BE(LIMITS.decoding.budgetBytes - 5, 1);
        holder.write(prefix);
        await sleep(100);
        const started = performance.now();
        const refused = await h1Call(t.url, "/ctrl.v1.DeploymentService/GetDeployment", json, jsonOf(20));
        const waited = performance.now() - started;
        const error = JSON.parse(refused.body.toString()) as { code: string; details?: { type: string }[] };
        assert.deepEqual([refused.status, error.code], [429, "resource_exhausted"]);
        assert.deepEqual(
          error.details?.map((d) => d.type),
          ["google.rpc.RetryInfo"],
        );
        assert.ok(waited >= LIMITS.decoding.waitMs - 10, `refused after ${waited} ms`);
        holder.close(http2.constants.NGHTTP2_CANCEL);
        await sleep(50);
        const served = await h1Call(t.url, "/ctrl.v1.DeploymentService/GetDeployment", json, jsonOf(20));
        assert.equal(served.status, 404);
      } finally {
        session.destroy();
      }
    });
  });
}
