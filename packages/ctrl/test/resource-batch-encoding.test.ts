// The hand-built batch encoding must decode to the resources with their versions (only the
// field order within a resource differs from protobuf-es's own encoding), including
// multi-byte lengths and versions beyond 32 bits, whether its chunks are written as they are
// (the direct gRPC path) or joined (any other codec).
import { test } from "node:test";
import assert from "node:assert/strict";
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { SyncDesiredStateResponseSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DesiredResourceSchema, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { encodedChunks } from "../src/grpc-server-streaming.ts";
import { resourceBatchFieldChunks } from "../src/services/cluster/resource-batch-encoding.ts";
import { messageWithVerbatimChunks } from "../src/services/cluster/verbatim.ts";

/** A stored body: a resource without its version. */
function storedBody(id: string, namespace: string): Uint8Array {
  return toBinary(
    DesiredResourceSchema,
    create(DesiredResourceSchema, { type: ResourceType.DEPLOYMENT, id, namespace, spec: { case: "deployment", value: { replicas: 2 } } }),
  );
}

test("resourceBatchFieldChunks decodes to the resources with their versions, large bodies by reference", () => {
  const rows = [
    { type: ResourceType.DEPLOYMENT, version: 1, body: storedBody("a", "x:1") },
    { type: ResourceType.DEPLOYMENT, version: 300, body: storedBody("b", "y".repeat(200)) },
    { type: ResourceType.DEPLOYMENT, version: 2 ** 40 + 5, body: storedBody("c", "z".repeat(20_000)) },
    { type: ResourceType.DEPLOYMENT, version: Number.MAX_SAFE_INTEGER, body: new Uint8Array(0) },
  ];
  const chunks = resourceBatchFieldChunks(rows);
  assert.ok(chunks.includes(rows[2]!.body), "the large body was copied");
  assert.ok(!chunks.includes(rows[1]!.body), "a small body is a chunk of its own");
  const sent = messageWithVerbatimChunks(SyncDesiredStateResponseSchema, {}, 1, chunks);
  const written = encodedChunks(SyncDesiredStateResponseSchema, sent);
  assert.ok(written.includes(rows[2]!.body), "the direct gRPC path copies the large body");
  const expected = create(SyncDesiredStateResponseSchema, {
    message: {
      case: "batch",
      value: {
        resources: rows.map((row) => {
          const resource = fromBinary(DesiredResourceSchema, row.body);
          resource.version = BigInt(row.version);
          return resource;
        }),
      },
    },
  });
  const bytes = toBinary(SyncDesiredStateResponseSchema, sent);
  const received = fromBinary(SyncDesiredStateResponseSchema, bytes);
  assert.ok(equals(SyncDesiredStateResponseSchema, received, expected), "decodes to the resources with their versions");
  assert.deepEqual(received.$unknown, undefined);
  assert.equal(bytes.length, toBinary(SyncDesiredStateResponseSchema, expected).length);
  assert.deepEqual(Buffer.concat(written), Buffer.from(bytes));
});

test("resourceBatchFieldChunks encodes an empty batch and refuses versions it cannot encode", () => {
  assert.deepEqual([...Buffer.concat(resourceBatchFieldChunks([]))], [0]);
  for (const version of [-1, 1.5, 2 ** 53]) {
    assert.throws(() => resourceBatchFieldChunks([{ type: ResourceType.DEPLOYMENT, version, body: new Uint8Array(0) }]), RangeError);
  }
});
