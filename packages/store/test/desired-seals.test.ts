// A stored body with its seal put back at the wire level (bodyWithSeal) decodes to the whole
// resource, whatever the lengths around it take to encode.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import { DesiredResourceSchema, ResourceType, type DesiredResource } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { bodyWithSeal, storedParts } from "@flotilla/store";

const resource = (envBytes: number, sealBytes: number): DesiredResource =>
  create(DesiredResourceSchema, {
    type: ResourceType.DEPLOYMENT,
    id: "api",
    namespace: "demo",
    spec: {
      case: "deployment",
      value: {
        replicas: 2,
        workload: {
          image: "api:1",
          env: envBytes > 0 ? [{ name: "PAD", value: "x".repeat(envBytes) }] : [],
          secretEnv: [{ name: "DB_PASSWORD" }],
          secretEnvSealed: new Uint8Array(sealBytes).map((_, i) => i * 7),
          secretEnvChecksum: "0123456789abcdef",
        },
      },
    },
  });

test("the body with its seal put back decodes to the whole resource, across every length prefix's size", () => {
  // Seals and workloads around 127 (one byte of length → two) and 16383 (two → three).
  for (const sealBytes of [1, 100, 127, 128, 200, 16_383, 16_384, 70_000]) {
    for (const envBytes of [0, 60, 90, 100, 16_300, 16_400]) {
      const whole = resource(envBytes, sealBytes);
      const { body, secret_env_sealed } = storedParts(whole);
      assert.ok(secret_env_sealed && secret_env_sealed.length === sealBytes);
      const put = bodyWithSeal(body, secret_env_sealed);
      assert.ok(equals(DesiredResourceSchema, fromBinary(DesiredResourceSchema, put), whole), `seal ${sealBytes} B, env ${envBytes} B`);
      assert.equal(put.length, toBinary(DesiredResourceSchema, whole).length, "as long as its own encoding");
    }
  }
});

test("fields after the deployment stay; a body without a workload is left as it is", () => {
  const whole = resource(10, 40);
  const { body, secret_env_sealed } = storedParts(whole);
  // DesiredResource.version (field 3) after the body, as a snapshot batch encodes it.
  const versioned = new Uint8Array([
    ...body,
    ...new BinaryWriter()
      .uint32((3 << 3) | 0)
      .uint64(300)
      .finish(),
  ]);
  const decoded = fromBinary(DesiredResourceSchema, bodyWithSeal(versioned, secret_env_sealed!));
  assert.equal(decoded.version, 300n);
  assert.ok(equals(DesiredResourceSchema, decoded, create(DesiredResourceSchema, { ...whole, version: 300n })));
  const withoutWorkload = toBinary(DesiredResourceSchema, create(DesiredResourceSchema, { id: "x", spec: { case: "deployment", value: { replicas: 1 } } }));
  assert.equal(bodyWithSeal(withoutWorkload, secret_env_sealed!), withoutWorkload);
});
