// Protocol conformance as an independent gRPC implementation (@grpc/grpc-js, and bare
// HTTP/2 where the wire itself is the point) sees it.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { execFile, execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { Health, HealthCheckResponse_ServingStatus as Status } from "@flotilla/proto/grpc/health/v1/health_pb.js";
import {
  ServerReflection,
  ServerReflectionRequestSchema,
  ServerReflectionResponseSchema,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from "@flotilla/proto/grpc/reflection/v1/reflection_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { grpcJsServerStream } from "@flotilla/testkit/interop";

/** One reflection request and its answer, over a grpc-js bidi stream. */
function reflect(url: string, request: ServerReflectionRequest["messageRequest"]): Promise<ServerReflectionResponse> {
  const client = new grpc.Client(new URL(url).host, grpc.credentials.createInsecure());
  const method = ServerReflection.method.serverReflectionInfo;
  const call = client.makeBidiStreamRequest(
    `/${ServerReflection.typeName}/${method.name}`,
    (m: ServerReflectionRequest) => Buffer.from(toBinary(ServerReflectionRequestSchema, m)),
    (b: Buffer) => fromBinary(ServerReflectionResponseSchema, b),
  );
  return new Promise<ServerReflectionResponse>((resolve, reject) => {
    call.once("data", resolve);
    call.once("error", reject);
    call.write(create(ServerReflectionRequestSchema, { messageRequest: request }));
    call.end();
  }).finally(() => client.close());
}

/** A bare gRPC request on HTTP/2: every header and trailer it gets, in order. */
function rawGrpc(url: string, path: string, headers: Record<string, string>, body: Buffer): Promise<http2.IncomingHttpHeaders[]> {
  const session = http2.connect(url);
  session.on("error", () => {});
  return new Promise<http2.IncomingHttpHeaders[]>((resolve, reject) => {
    const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
    const seen: http2.IncomingHttpHeaders[] = [];
    stream.on("response", (h) => seen.push(h));
    stream.on("trailers", (h) => seen.push(h));
    stream.on("data", () => {});
    stream.on("end", () => resolve(seen));
    stream.on("error", reject);
    stream.end(body);
  }).finally(() => session.destroy());
}

/** The Python with grpcio (FLOTILLA_TEST_PYTHON, else python3). */
const PYTHON = process.env.FLOTILLA_TEST_PYTHON ?? "python3";

/** Why Python grpcio cannot run here, or false. */
function grpcioMissing(): string | false {
  try {
    execFileSync(PYTHON, ["-c", "import grpc"], { stdio: "ignore" });
    return false;
  } catch {
    return `Python grpcio is not installed (${PYTHON} -c 'import grpc'; set FLOTILLA_TEST_PYTHON to another Python)`;
  }
}

for (const { db, skip } of await testDatabases()) {
  describe(`gRPC conformance (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    before(async () => {
      // A long bookmark interval: an idle watch sends no message for a long time.
      t = await startTestCtrl(db, { stream: { bookmarkIntervalMs: 60_000 } });
      await t.store.regions.create("local");
    });
    after(() => t.close());

    test("Health/Watch for an unknown service sends SERVICE_UNKNOWN and keeps the call open", async () => {
      const watch = grpcJsServerStream(t.url, Health.method.watch, { service: "no.such.Service" });
      try {
        const first = await new Promise<{ status: Status }>((resolve, reject) => {
          watch.stream.once("data", resolve);
          watch.stream.once("error", reject);
        });
        assert.equal(first.status, Status.SERVICE_UNKNOWN);
        const ended = await Promise.race([
          new Promise((resolve) => watch.stream.once("status", (s: grpc.StatusObject) => resolve(s.code))),
          new Promise((resolve) => setTimeout(() => resolve("open"), 500)),
        ]);
        assert.equal(ended, "open");
      } finally {
        watch.close();
      }
    });

    test("reflection answers file_by_filename for ctrl/v1/region.proto, and file_containing_symbol", async () => {
      for (const request of [
        { case: "fileByFilename", value: "ctrl/v1/region.proto" },
        { case: "fileContainingSymbol", value: "ctrl.v1.RegionService" },
        { case: "fileContainingSymbol", value: "ctrl.v1.RegionService.CreateRegion" },
      ] as const) {
        const res = await reflect(t.url, request);
        assert.equal(res.messageResponse.case, "fileDescriptorResponse", `${request.case} ${request.value}`);
        const files = (res.messageResponse.value as { fileDescriptorProto: Uint8Array[] }).fileDescriptorProto.map(
          (b) => fromBinary(FileDescriptorProtoSchema, b).name,
        );
        assert.equal(files[0], "ctrl/v1/region.proto");
      }
      const missing = await reflect(t.url, { case: "fileByFilename", value: "ctrl/v1/nope.proto" });
      assert.equal(missing.messageResponse.case, "errorResponse");
    });

    test("an unknown method is HTTP 200 with grpc-status 12, which grpc-js reports as UNIMPLEMENTED", async () => {
      for (const path of ["/ctrl.v1.Nope/Call", "/ctrl.v1.DeploymentService/Nope"]) {
        const [headers] = await rawGrpc(t.url, path, {}, Buffer.from([0, 0, 0, 0, 0]));
        assert.equal(headers![":status"], 200, path);
        assert.equal(headers!["grpc-status"], "12", path);
      }
      const client = new grpc.Client(new URL(t.url).host, grpc.credentials.createInsecure());
      const code = await new Promise<number>((resolve) =>
        client.makeUnaryRequest(
          "/ctrl.v1.Nope/Call",
          (b: Buffer) => b,
          (b: Buffer) => b,
          Buffer.alloc(0),
          (error) => resolve(error?.code ?? 0),
        ),
      );
      client.close();
      assert.equal(code, grpc.status.UNIMPLEMENTED);
    });

    test("watch and sync streams send their response headers at once, before any message", async () => {
      const headersFirst = async (call: ReturnType<typeof grpcJsServerStream>) => {
        let messages = 0;
        call.stream.on("data", () => messages++);
        call.stream.on("error", () => {});
        try {
          await new Promise((resolve) => call.stream.once("metadata", resolve));
          return messages;
        } finally {
          call.close();
        }
      };
      // An idle watch sends no message for a bookmark interval (a minute here): its headers come now.
      assert.equal(await headersFirst(grpcJsServerStream(t.url, ClusterService.method.watchDeploymentChanges, { region: "local" }, ADMIN_TOKEN)), 0);
      assert.equal(await headersFirst(grpcJsServerStream(t.url, ClusterService.method.syncDesiredState, { region: "local" }, ADMIN_TOKEN)), 0);
    });

    test("an unsupported grpc-encoding is UNIMPLEMENTED with grpc-accept-encoding, on connect's path and the direct one", async () => {
      for (const method of ["DeploymentService/GetDeployment", "ClusterService/WatchDeploymentChanges", "ClusterService/SyncDesiredState"]) {
        const seen = await rawGrpc(
          t.url,
          `/ctrl.v1.${method}`,
          { authorization: `Bearer ${ADMIN_TOKEN}`, "grpc-encoding": "snappy" },
          Buffer.from([1, 0, 0, 0, 1, 0]),
        );
        const all = Object.assign({}, ...seen) as http2.IncomingHttpHeaders;
        assert.equal(all["grpc-status"], "12", method);
        assert.match(String(all["grpc-accept-encoding"]), /gzip/, method);
      }
    });

    test("as Python grpcio sees it: health watch, reflection by file name, unknown method, headers at once", { skip: grpcioMissing() }, async () => {
      const script = fileURLToPath(new URL("./grpcio-conformance.py", import.meta.url));
      const { stdout } = await promisify(execFile)(PYTHON, [script, new URL(t.url).host, ADMIN_TOKEN], { timeout: 30_000 });
      assert.deepEqual(JSON.parse(stdout), {
        health_first: [0x08, Status.SERVICE_UNKNOWN],
        health_open_after_500ms: true,
        reflection_by_filename_has_descriptor: true,
        reflection_unknown_file_is_error: true,
        unknown_method: "UNIMPLEMENTED",
        watch_headers_at_once: true,
      });
    });
  });
}
