// The watch readers' hand-rolled summary of a response (B2–B4 read 1,000 streams with it)
// agrees with protobuf-es on responses as ctrl frames them: a bookmark, one live change, a batch.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create, toBinary } from "@bufbuild/protobuf";
import { WatchDeploymentChangesResponseSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { summarize } from "../lib/clients.ts";

test("summarize reads the version and counts the events of any response", () => {
  const image = "app:".padEnd(300, "x"); // an event longer than 127 bytes: a two-byte length
  for (const [version, events] of [
    [7n, 0],
    [2n ** 40n, 1],
    [300n, 5],
  ] as const) {
    const response = create(WatchDeploymentChangesResponseSchema, {
      version,
      events: Array.from({ length: events }, (_, i) => ({
        version: version - BigInt(i),
        change: { case: "upsert" as const, value: { id: `d-${i}`, namespace: "ns", spec: { case: "deployment" as const, value: { workload: { image } } } } },
      })),
    });
    const bytes = Buffer.concat([Buffer.from("garbage"), toBinary(WatchDeploymentChangesResponseSchema, response)]);
    assert.deepEqual(summarize(bytes, 7, bytes.length), { events, version: Number(version) });
  }
  assert.throws(() => summarize(Buffer.from([0x10, 0x80]), 0, 2), /inside a varint/);
});
