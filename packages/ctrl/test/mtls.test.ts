// mTLS agent identity: ClusterService calls must present a client certificate chaining to
// --client-ca and naming the token's region (spiffe://flotilla/region/<region>); operator
// calls work with the admin token and no certificate. Client: @grpc/grpc-js.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import * as grpc from "@grpc/grpc-js";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { initPki, issueAgent } from "../src/pki.ts";
import { spiffeRegion } from "../src/tls.ts";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { grpcJsServerStream, grpcJsUnary } from "@flotilla/testkit/interop";

const [{ db: sqlite }] = await testDatabases();

describe("mTLS", () => {
  let dir: string;
  let t: TestCtrl;
  let ca: Buffer;
  let eastToken: string;
  const credentials = (files?: { cert: string; key: string }) =>
    grpc.credentials.createSsl(ca, files && readFileSync(files.key), files && readFileSync(files.cert));

  /** SyncDesiredState for east through grpc-js: the complete marker's version, or the error code. */
  function syncEast(creds: grpc.ChannelCredentials, token = eastToken): Promise<number | grpc.status> {
    const call = grpcJsServerStream(t.url, ClusterService.method.syncDesiredState, { region: "east" }, token, creds);
    return new Promise((resolve) => {
      call.stream.on("data", (m: { message: { case: string; value: { version: bigint } } }) => {
        if (m.message.case === "complete") resolve(Number(m.message.value.version));
      });
      call.stream.on("error", (e: grpc.ServiceError) => resolve(e.code));
      call.stream.on("end", () => call.close());
    });
  }

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "flotilla-mtls-"));
    const pki = initPki(dir);
    ca = readFileSync(pki.caCert);
    t = await startTestCtrl(sqlite, { tls: { certFile: pki.serverCert, keyFile: pki.serverKey, clientCaFile: pki.caCert } });
    await t.store.regions.create("east");
    await t.store.regions.create("west");
    eastToken = (await t.store.agentTokens.create("east")).token;
  });
  after(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("an agent with its region's certificate and token syncs", async () => {
    assert.equal(await syncEast(credentials(issueAgent(dir, "east"))), 0);
  });

  test("a certificate for another region than the token's → PERMISSION_DENIED", async () => {
    assert.equal(await syncEast(credentials(issueAgent(dir, "west"))), grpc.status.PERMISSION_DENIED);
  });

  test("no client certificate → UNAUTHENTICATED, with the agent token and with the admin token", async () => {
    assert.equal(await syncEast(credentials()), grpc.status.UNAUTHENTICATED);
    assert.equal(await syncEast(credentials(), ADMIN_TOKEN), grpc.status.UNAUTHENTICATED);
  });

  test("a certificate in another trust domain names no region → PERMISSION_DENIED", async () => {
    assert.equal(await syncEast(credentials(issueAgent(dir, "east", "elsewhere"))), grpc.status.PERMISSION_DENIED);
  });

  test("HTTP/1.1 (curl, Connect JSON): the certificate is checked the same way", async () => {
    const east = issueAgent(dir, "east");
    const call = async (certificate: string[]) => {
      const { stdout } = await promisify(execFile)("curl", [
        "-sS",
        "--http1.1",
        "--cacert",
        join(dir, "ca.pem"),
        ...certificate,
        "-H",
        `authorization: Bearer ${eastToken}`,
        "-H",
        "content-type: application/json",
        "-d",
        '{"region":"east"}',
        "-w",
        "\n%{http_version} %{http_code}",
        `${t.url}/ctrl.v1.ClusterService/ReportObservedState`,
      ]);
      return stdout;
    };
    assert.match(await call(["--cert", east.cert, "--key", east.key]), /\n1\.1 200$/);
    assert.match(await call([]), /"code":"unauthenticated"[\s\S]*\n1\.1 401$/);
  });

  test("operator calls with the admin token need no client certificate", async () => {
    const response = await grpcJsUnary(t.url, RegionService.method.getRegion, { name: "east" }, ADMIN_TOKEN, credentials());
    assert.equal(response.region?.name, "east");
  });

  for (const [what, issue] of [
    ["an expired certificate", () => issueAgent(dir, "east", "flotilla", { days: -1 })],
    ["a certificate from a foreign CA", () => issueAgent(initPkiIn(), "east")],
  ] as const) {
    test(`${what} is refused at the handshake: no request is read`, async () => {
      const files = issue();
      assert.equal(await syncEast(credentials(files)), grpc.status.UNAVAILABLE);
      // At the TLS level: the connection is closed right after the handshake, before any answer.
      const { hostname, port } = new URL(t.url);
      const socket = tls.connect({
        host: hostname,
        servername: "localhost",
        port: Number(port),
        ca,
        cert: readFileSync(files.cert),
        key: readFileSync(files.key),
        ALPNProtocols: ["http/1.1"],
      });
      socket.on("secureConnect", () => socket.write("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n"));
      let received = "";
      socket.on("data", (chunk) => (received += chunk));
      await new Promise((resolve) => socket.once("close", resolve));
      assert.equal(received, "");
    });
  }

  test("the same connection without the bad certificate is served (control)", async () => {
    const { hostname, port } = new URL(t.url);
    const socket = tls.connect({ host: hostname, servername: "localhost", port: Number(port), ca, ALPNProtocols: ["http/1.1"] });
    socket.on("secureConnect", () => socket.write("GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"));
    let received = "";
    socket.on("data", (chunk) => (received += chunk));
    await new Promise((resolve) => socket.once("close", resolve));
    assert.match(received, /^HTTP\/1\.1 200/);
  });

  function initPkiIn(): string {
    const foreign = join(dir, "foreign");
    initPki(foreign);
    return foreign;
  }
});

test("spiffeRegion accepts exactly one SPIFFE ID of the trust domain naming a DNS label", () => {
  assert.equal(spiffeRegion("URI:spiffe://flotilla/region/eu-1", "flotilla"), "eu-1");
  assert.equal(spiffeRegion("DNS:agent.local, URI:spiffe://flotilla/region/eu-1", "flotilla"), "eu-1");
  assert.equal(spiffeRegion("URI:spiffe://other/region/eu-1", "flotilla"), undefined);
  assert.equal(spiffeRegion("URI:spiffe://flotilla/region/eu-1, URI:spiffe://flotilla/region/us-1", "flotilla"), undefined);
  assert.equal(spiffeRegion("URI:spiffe://flotilla/region/EU_1", "flotilla"), undefined);
  assert.equal(spiffeRegion("URI:spiffe://flotilla/region/eu-1/x", "flotilla"), undefined);
  assert.equal(spiffeRegion(undefined, "flotilla"), undefined);
});
