// A placement's autoscaler and env values: every mistake is INVALID_ARGUMENT naming the field,
// with nothing written.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { rowCounts, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

const [{ db: sqlite }] = await testDatabases();

describe("autoscaling and per-region env validation", () => {
  let t: TestCtrl;
  before(async () => {
    t = await startTestCtrl(sqlite);
    await t.store.regions.create("local");
  });
  after(() => t.close());

  const deployment = (placement: object, fields: object = {}) => ({
    deployment: { id: "api", namespace: "demo", image: "api:1", regions: [{ region: "local", replicas: 1, ...placement }], ...fields },
  });
  const scaling = (fields: object) => ({ autoscaling: { minReplicas: 2, maxReplicas: 5, targetCpuUtilizationPercent: 70, ...fields } });

  test("a mistake names its field and writes nothing", async () => {
    const bad: [object, RegExp, object?][] = [
      [scaling({ minReplicas: 0 }), /deployment\.regions\[0\]\.autoscaling\.min_replicas: must be at least 1, got 0/],
      [scaling({ maxReplicas: 1 }), /deployment\.regions\[0\]\.autoscaling\.max_replicas: must be at least min_replicas \(2\), got 1/],
      [scaling({ maxReplicas: 1001 }), /deployment\.regions\[0\]\.autoscaling\.max_replicas: must be at most 1000, got 1001/],
      [
        scaling({ targetCpuUtilizationPercent: 0 }),
        /deployment\.regions\[0\]\.autoscaling: needs target_cpu_utilization_percent or target_memory_utilization_percent/,
      ],
      [
        scaling({ targetMemoryUtilizationPercent: 1001 }),
        /deployment\.regions\[0\]\.autoscaling\.target_memory_utilization_percent: must be from 1 to 1000 percent, got 1001/,
      ],
      [{ env: [{ name: "1BAD", value: "x" }] }, /deployment\.regions\[0\]\.env\[0\]\.name: "1BAD" is not a valid variable name/],
      [
        {
          env: [
            { name: "A", value: "x" },
            { name: "A", value: "y" },
          ],
        },
        /deployment\.regions\[0\]\.env\[1\]\.name: "A" is set twice/,
      ],
    ];
    const before = await rowCounts(t.store);
    for (const [placement, message] of bad) {
      await assert.rejects(
        t.client(DeploymentService).createDeployment(deployment(placement) as never),
        (e) => ConnectError.from(e).code === Code.InvalidArgument && message.test(ConnectError.from(e).message),
        JSON.stringify(placement),
      );
    }
    assert.deepEqual(await rowCounts(t.store), before);
  });

  test("valid settings are stored as given", async () => {
    const created = await t
      .client(DeploymentService)
      .createDeployment(deployment({ ...scaling({ targetMemoryUtilizationPercent: 80 }), env: [{ name: "MODE", value: "local" }] }));
    const placement = created.deployment!.regions[0]!;
    assert.equal(placement.autoscaling?.targetMemoryUtilizationPercent, 80);
    assert.equal(placement.env[0]?.value, "local");
  });
});
