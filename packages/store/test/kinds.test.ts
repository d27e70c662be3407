// What a deployment means per region: a placement's env values replace the deployment's of the
// same name or add to them in that region only; its autoscaler goes to that region only.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { DeploymentSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { deploymentKind } from "../src/kinds.ts";

test("per-region env values and autoscaling reach only their region's desired state", () => {
  const deployment = create(DeploymentSchema, {
    id: "api",
    namespace: "demo",
    image: "app:1",
    env: [
      { name: "LOG", value: "info" },
      { name: "MODE", value: "shared" },
    ],
    regions: [
      {
        region: "eu",
        replicas: 2,
        env: [
          { name: "MODE", value: "eu" },
          { name: "EXTRA", value: "1" },
        ],
        autoscaling: { minReplicas: 2, maxReplicas: 5, targetCpuUtilizationPercent: 70 },
      },
      { region: "us", replicas: 3 },
    ],
  });
  const desired = deploymentKind.desired(
    deployment,
    new Map([
      ["eu", 1],
      ["us", 2],
    ]),
  );
  const spec = (region: number) => {
    const value = desired.get(region)!.spec;
    assert.equal(value.case, "deployment");
    return value.value;
  };
  assert.deepEqual(
    spec(1).workload!.env.map((v) => [v.name, v.value]),
    [
      ["LOG", "info"],
      ["MODE", "eu"],
      ["EXTRA", "1"],
    ],
  );
  assert.equal(spec(1).autoscaling?.maxReplicas, 5);
  assert.deepEqual(
    spec(2).workload!.env.map((v) => [v.name, v.value]),
    [
      ["LOG", "info"],
      ["MODE", "shared"],
    ],
  );
  assert.equal(spec(2).autoscaling, undefined);
  assert.equal(spec(2).replicas, 3);
});
