// Request buffers given back once connect has its copy: RequestGarbage frees whole buffers only
// (never a slice of Buffer's shared pool) and asks for a GC once per --collect-after-request-bytes
// freed (0: never); boundedConnectRequest hands it only buffers its read allocated (a body joined
// from chunks, an inflated message, its new envelope), never a chunk the socket gave.
import { test } from "node:test";
import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import { setImmediate as nextTurn } from "node:timers/promises";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { compressionGzip } from "@connectrpc/connect-node";
import { encodeEnvelope, type UniversalServerRequest } from "@connectrpc/connect/protocol";
import { CreateRegionRequestSchema, RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { DecodeBudget } from "../src/decode-budget.ts";
import { DEFAULT_MESSAGE_LIMITS } from "../src/message-limits.ts";
import { boundedConnectRequest, type RequestBounds } from "../src/request-body.ts";
import { RequestGarbage } from "../src/request-garbage.ts";
import { DEFAULT_SHAPE_LIMITS } from "../src/request-shape.ts";

test("whole buffers are freed, pool slices and views left alone; a GC is asked for once per collectAfterBytes freed", () => {
  let collections = 0;
  const garbage = new RequestGarbage(100_000, () => collections++);
  const whole = Buffer.alloc(60_000, 1);
  const pooled = Buffer.from("a small buffer comes from the shared pool");
  const larger = new Uint8Array(70_000);
  const view = larger.subarray(10);
  garbage.free([whole, pooled, view]);
  assert.equal(whole.byteLength, 0);
  assert.equal(pooled.toString(), "a small buffer comes from the shared pool");
  assert.equal(view.byteLength, 69_990);
  assert.equal(collections, 0, "60,000 bytes freed");
  garbage.free([larger]);
  assert.equal(collections, 1, "130,000 bytes freed");
  garbage.free([new Uint8Array(60_000)]);
  assert.equal(collections, 1, "the count starts again after a collection");
});

test("collectAfterBytes 0: no GC is asked for", () => {
  let collections = 0;
  new RequestGarbage(0, () => collections++).free([new Uint8Array(10_000_000)]);
  assert.equal(collections, 0);
});

const message = create(CreateRegionRequestSchema, { region: { name: "eu", labels: { tier: "x".repeat(100_000) } } });
const binary = toBinary(CreateRegionRequestSchema, message);

/** Reads the body of `chunks` as connect does (a copy of what the first next() gives); returns the copy and what was handed over, a turn later. */
async function read(chunks: Uint8Array[], header: Record<string, string>, collectAfterBytes = 0) {
  const bounds: RequestBounds = {
    messages: DEFAULT_MESSAGE_LIMITS,
    shape: DEFAULT_SHAPE_LIMITS,
    budget: new DecodeBudget(16 * 1024 * 1024, 1000),
    garbage: new RequestGarbage(collectAfterBytes),
  };
  const request: UniversalServerRequest = {
    httpVersion: "2.0",
    method: "POST",
    url: "http://localhost/ctrl.v1.RegionService/CreateRegion",
    header: new Headers(header),
    body: (async function* () {
      yield* chunks;
    })(),
    signal: new AbortController().signal,
  };
  const bounded = boundedConnectRequest(RegionService.method.createRegion, request, bounds, [compressionGzip]);
  const handed = (await (bounded.body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]().next()).value as Uint8Array;
  const copy = new Uint8Array(handed); // a copy, as connect makes (a Buffer's slice() is a view)
  await nextTurn();
  return { copy, handed };
}

test("a body joined from chunks is freed once connect has its copy; a chunk the socket gave is not", async () => {
  const envelope = encodeEnvelope(0, binary);
  const split = await read([envelope.slice(0, 1000), envelope.slice(1000)], { "content-type": "application/grpc" });
  assert.equal(split.handed.byteLength, 0, "the joined body was freed");
  assert.deepEqual(fromBinary(CreateRegionRequestSchema, split.copy.subarray(5)), message);
  const whole = await read([envelope], { "content-type": "application/grpc" });
  assert.equal(whole.handed, envelope, "one chunk is handed over as it came");
  assert.equal(envelope.byteLength, binary.byteLength + 5, "and not freed");
});

test("an inflated message and its new envelope are freed; the compressed chunk is not", async () => {
  const compressed = gzipSync(binary);
  const chunk = encodeEnvelope(1, compressed);
  const inflated = await read([chunk], { "content-type": "application/grpc", "grpc-encoding": "gzip" });
  assert.equal(inflated.handed.byteLength, 0);
  assert.deepEqual(fromBinary(CreateRegionRequestSchema, inflated.copy.subarray(5)), message);
  assert.equal(chunk.byteLength, compressed.byteLength + 5);
  const unary = await read([compressed], { "content-type": "application/proto", "content-encoding": "gzip" });
  assert.equal(unary.handed.byteLength, 0);
  assert.deepEqual(fromBinary(CreateRegionRequestSchema, unary.copy), message);
});
