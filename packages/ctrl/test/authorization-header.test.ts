// One rule for the Authorization header on every path (auth.ts bearerToken): the scheme in any
// case, whitespace around the token not part of it. What differs is the transport: HTTP/1.1
// trims optional whitespace around a field value before ctrl sees it, while HTTP/2 forbids it
// (RFC 9113 §8.2.1) and Node drops such a field, so the call arrives without the header and is
// refused as missing a token — on the Connect path and on the direct gRPC streams alike.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import { bearerToken } from "../src/auth.ts";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

const [{ db }] = await testDatabases();
let t: TestCtrl;
before(async () => {
  t = await startTestCtrl(db);
});
after(() => t?.close());

const PATH = "/ctrl.v1.RegionService/ListRegions";

function overHttp1(authorization: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request(`${t.url}${PATH}`, { method: "POST", headers: { "content-type": "application/json", authorization } }, (response) => {
      response.resume();
      response.on("end", () => resolve(response.statusCode!));
    });
    request.on("error", reject);
    request.end("{}");
  });
}

function overHttp2(authorization: string, path = PATH, contentType = "application/json"): Promise<{ status: number; grpcStatus?: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(t.url);
    session.on("error", reject);
    const request = session.request({ ":method": "POST", ":path": path, "content-type": contentType, te: "trailers", authorization });
    let status = 0;
    let grpcStatus: string | undefined;
    request.on("response", (headers) => {
      status = Number(headers[":status"]);
      grpcStatus = headers["grpc-status"] as string | undefined;
    });
    request.on("trailers", (trailers) => (grpcStatus ??= trailers["grpc-status"] as string | undefined));
    request.resume();
    request.on("end", () => {
      session.close();
      resolve({ status, grpcStatus });
    });
    // (An empty gRPC message: refused from the headers before it is read.)
    request.end(contentType === "application/grpc" ? Buffer.from([0, 0, 0, 0, 0]) : "{}");
  });
}

test("the parser: the scheme in any case, whitespace around the token ignored, nothing else", () => {
  for (const value of ["Bearer abc", "bearer abc", "BEARER abc", "Bearer  abc ", " Bearer abc"]) assert.equal(bearerToken(value), "abc", JSON.stringify(value));
  for (const value of ["Bearer", "Bearer a b", "Basic abc", "abc", ""]) assert.equal(bearerToken(value), undefined, JSON.stringify(value));
});

test("over HTTP/1.1 whitespace around the value is not part of it: accepted", async () => {
  assert.equal(await overHttp1(`Bearer ${ADMIN_TOKEN}`), 200);
  assert.equal(await overHttp1(`Bearer ${ADMIN_TOKEN} `), 200);
});

test("over HTTP/2 a value with whitespace around it is malformed and never reaches ctrl: refused, as missing, on every path", async () => {
  assert.equal((await overHttp2(`Bearer ${ADMIN_TOKEN}`)).status, 200);
  assert.equal((await overHttp2(`Bearer ${ADMIN_TOKEN} `)).status, 401, "Connect over HTTP/2");
  const grpc = await overHttp2(`Bearer ${ADMIN_TOKEN} `, "/ctrl.v1.ClusterService/WatchDeploymentChanges", "application/grpc");
  assert.equal(grpc.grpcStatus, "16", "the direct gRPC stream path: UNAUTHENTICATED");
});
