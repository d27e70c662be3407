// TLS on ctrl's one port: the real buf curl (h2, reflection, Connect and gRPC) and curl
// (HTTP/1.1) with --cacert; certificate rotation without restart; plaintext refused on a
// non-loopback address without --insecure.
import { after, before, describe, test } from "node:test";
import { createLogger, silentLogger } from "@flotilla/runtime";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { initPki, issueServer, type pkiFiles } from "../src/pki.ts";
import { isLoopback } from "../src/server.ts";
import { DEFAULT_CONNECTION_BOUNDS } from "../src/connection-bounds.ts";
import { listenDual } from "../src/listener.ts";
import { tlsTransport } from "../src/tls.ts";
import net from "node:net";
import { testDatabases } from "@flotilla/testkit/databases";
import { startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { AUTH, bufCurl, jsonDocuments } from "@flotilla/testkit/interop";

const [{ db: sqlite }] = await testDatabases();
const MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url));

/** The serial number of the certificate a new TLS connection to `url` is shown. */
function servedSerial(url: string, ca: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: hostname, servername: "localhost", port: Number(port), ca, ALPNProtocols: ["h2"] }, () => {
      resolve(socket.getPeerCertificate().serialNumber);
      socket.destroy();
    });
    socket.once("error", reject);
  });
}

describe("ctrl over TLS", () => {
  let dir: string;
  let pki: ReturnType<typeof pkiFiles>;
  let t: TestCtrl;
  const logs: string[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "flotilla-tls-"));
    pki = initPki(dir);
    t = await startTestCtrl(sqlite, { tls: { certFile: pki.serverCert, keyFile: pki.serverKey }, log: createLogger({ write: (line) => logs.push(line) }) });
  });
  after(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("serves https", () => assert.match(t.url, /^https:\/\/127\.0\.0\.1:\d+$/));

  test("buf curl --cacert lists the services by reflection and calls over h2 (Connect and gRPC)", async () => {
    const listed = await bufCurl(["--cacert", pki.caCert, t.url, "--list-services"]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /ctrl\.v1\.RegionService/);
    const created = await bufCurl(["--cacert", pki.caCert, "-H", AUTH, `${t.url}/ctrl.v1.RegionService/CreateRegion`, "-d", '{"region":{"name":"tls-h2"}}']);
    assert.equal(created.code, 0, created.stderr);
    assert.deepEqual((jsonDocuments(created.stdout)[0] as { region: { name: string } }).region.name, "tls-h2");
    // The gRPC protocol needs HTTP/2: this succeeding shows ALPN chose h2.
    const grpc = await bufCurl([
      "--cacert",
      pki.caCert,
      "--protocol",
      "grpc",
      "-H",
      AUTH,
      `${t.url}/ctrl.v1.RegionService/GetRegion`,
      "-d",
      '{"name":"tls-h2"}',
    ]);
    assert.equal(grpc.code, 0, grpc.stderr);
    assert.match(grpc.stdout, /"tls-h2"/);
  });

  test("without --cacert buf curl refuses ctrl's certificate", async () => {
    const refused = await bufCurl([t.url, "--list-services"]);
    assert.notEqual(refused.code, 0);
    assert.doesNotMatch(refused.stdout, /RegionService/);
  });

  test("HTTP/1.1 over TLS: curl with Connect JSON, connect-node with gRPC-Web", async () => {
    const { stdout } = await promisify(execFile)("curl", [
      "-sS",
      "--http1.1",
      "--cacert",
      pki.caCert,
      "-H",
      AUTH,
      "-H",
      "content-type: application/json",
      "-d",
      '{"region":{"name":"tls-h1"}}',
      "-w",
      "\n%{http_version} %{http_code}",
      `${t.url}/ctrl.v1.RegionService/CreateRegion`,
    ]);
    const [body, status] = stdout.split("\n");
    assert.equal(status, "1.1 200");
    assert.equal(JSON.parse(body!).region.name, "tls-h1");
    const grpcWeb = t.client(RegionService, { protocol: "grpcweb", ca: readFileSync(pki.caCert) });
    assert.equal((await grpcWeb.getRegion({ name: "tls-h1" })).region?.name, "tls-h1");
  });

  test("rotated certificate files are served to the next connection, without restart; a broken pair keeps the previous", async () => {
    const ca = readFileSync(pki.caCert, "utf8");
    const before = await servedSerial(t.url, ca);
    issueServer(dir);
    const rotated = await servedSerial(t.url, ca);
    assert.notEqual(rotated, before);
    assert.ok(logs.some((m) => /loaded the changed certificate/.test(m)));

    writeFileSync(pki.serverCert, "-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n");
    assert.equal(await servedSerial(t.url, ca), rotated);
    assert.ok(
      logs.some((m) => /keeping the previous certificate/.test(m)),
      logs.join("\n"),
    );
    // Repairing the files is picked up again.
    issueServer(dir);
    assert.notEqual(await servedSerial(t.url, ca), rotated);
  });
});

test("a connection that does not complete its TLS handshake is closed after the handshake timeout", async () => {
  const dir = mkdtempSync(join(tmpdir(), "flotilla-tls-"));
  const pki = initPki(dir);
  const secure = tlsTransport({ certFile: pki.serverCert, keyFile: pki.serverKey, trustDomain: "flotilla", handshakeTimeoutMs: 300, log: silentLogger });
  const listener = await listenDual(
    "127.0.0.1",
    0,
    (_req, res) => res.end(),
    { ...DEFAULT_CONNECTION_BOUNDS, firstRequestTimeoutMs: 60_000 },
    undefined,
    secure,
  );
  try {
    const socket = net.connect(listener.address.port, "127.0.0.1");
    const started = Date.now();
    await new Promise((resolve) => socket.once("close", resolve));
    // Closed by the server (the client sent nothing, and the other timeout is 60 s).
    assert.ok(Date.now() - started < 30_000);
  } finally {
    listener.destroy();
    listener.drain();
    rmSync(dir, { recursive: true, force: true });
  }
});

describe("plaintext", () => {
  test("loopback addresses", () => {
    for (const host of ["127.0.0.1", "127.0.0.2", "::1", "localhost", "::ffff:127.0.0.1"]) assert.ok(isLoopback(host), host);
    for (const host of ["0.0.0.0", "::", "10.0.0.1", "192.168.1.1", "example.com"]) assert.ok(!isLoopback(host), host);
  });

  /** Runs `pnpm ctrl` with `args` until it prints its URL or exits; returns what it said. */
  function runCtrl(args: string[]): Promise<{ code: number | null; stderr: string }> {
    const dir = mkdtempSync(join(tmpdir(), "flotilla-plain-"));
    const child = spawn(process.execPath, [MAIN, "--database-url", `sqlite:${join(dir, "db")}`, ...args], {
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, FLOTILLA_CTRL_ADMIN_TOKEN: "x" },
    });
    let stderr = "";
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
      if (/serving on/.test(stderr)) child.kill("SIGTERM");
    });
    return new Promise((resolve) =>
      child.once("exit", (code) => {
        rmSync(dir, { recursive: true, force: true });
        resolve({ code, stderr });
      }),
    );
  }

  test("refused on a non-loopback address without --insecure, before listening", async () => {
    const { code, stderr } = await runCtrl(["--listen", "0.0.0.0:0"]);
    assert.equal(code, 1);
    assert.match(stderr, /refusing to serve plaintext on 0\.0\.0\.0.*--tls-cert.*--insecure/s);
    assert.doesNotMatch(stderr, /serving on/);
  });

  test("--insecure is accepted (bound here to a loopback alias, not exposed)", async () => {
    const { stderr } = await runCtrl(["--listen", "127.0.0.2:0", "--insecure"]);
    assert.match(stderr, /serving on http:\/\/127\.0\.0\.2:\d+/);
  });
});
