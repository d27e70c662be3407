// Probes on deployments and sentinels: every mistake is INVALID_ARGUMENT
// naming the field, with nothing written; a valid probe travels in the desired state to the
// agent, as the workload of each region carries it.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { fromBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { DesiredResourceSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { rowCounts, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

const [{ db: sqlite }] = await testDatabases();

describe("probes", () => {
  let t: TestCtrl;
  before(async () => {
    t = await startTestCtrl(sqlite);
    await t.store.regions.create("local");
  });
  after(() => t.close());

  const deployment = (probes: object) => ({
    deployment: { id: "api", namespace: "demo", image: "api:1", regions: [{ region: "local", replicas: 1 }], ...probes },
  });

  test("a mistake in a probe names its field and writes nothing", async () => {
    const http = (value: object) => ({ handler: { case: "httpGet", value } });
    const bad: [object, RegExp][] = [
      [{ readinessProbe: {} }, /deployment\.readiness_probe: needs one of http_get, tcp_socket and exec/],
      [{ readinessProbe: http({ path: "/healthz", port: 0 }) }, /deployment\.readiness_probe\.http_get\.port: must be a port from 1 to 65535/],
      [{ readinessProbe: http({ path: "healthz", port: 80 }) }, /deployment\.readiness_probe\.http_get\.path: must start with \//],
      [{ livenessProbe: { handler: { case: "tcpSocket", value: { port: 70000 } } } }, /deployment\.liveness_probe\.tcp_socket\.port/],
      [{ startupProbe: { handler: { case: "exec", value: { command: [] } } } }, /deployment\.startup_probe\.exec\.command: needs 1 to 64 arguments/],
      [{ readinessProbe: { ...http({ port: 80 }), periodSeconds: -1 } }, /deployment\.readiness_probe\.period_seconds: must be from 0 to 3600/],
      [
        { livenessProbe: { ...http({ port: 80 }), successThreshold: 2 } },
        /deployment\.liveness_probe\.success_threshold: must be 1 for liveness and startup probes/,
      ],
    ];
    const before = await rowCounts(t.store);
    for (const [probes, message] of bad) {
      await assert.rejects(
        t.client(DeploymentService).createDeployment(deployment(probes) as never),
        (e) => ConnectError.from(e).code === Code.InvalidArgument && message.test(ConnectError.from(e).message),
        JSON.stringify(probes),
      );
    }
    assert.deepEqual(await rowCounts(t.store), before);
  });

  test("a deployment's and a sentinel's probes reach the desired state of their regions", async () => {
    const readinessProbe = { handler: { case: "httpGet" as const, value: { path: "/healthz", port: 80 } }, periodSeconds: 5 };
    const livenessProbe = { handler: { case: "tcpSocket" as const, value: { port: 80 } } };
    await t.client(DeploymentService).createDeployment(deployment({ readinessProbe, livenessProbe }));
    await t.client(SentinelService).createSentinel({
      sentinel: {
        id: "gw",
        region: "local",
        namespace: "demo",
        image: "gw:1",
        replicas: 1,
        startupProbe: { handler: { case: "exec", value: { command: ["true"] } } },
      },
    });
    const rows = await t.store.database.db.selectFrom("desired_resources").select(["resource_id", "body"]).orderBy("resource_id").execute();
    const workloads = rows.map((r) => {
      const spec = fromBinary(DesiredResourceSchema, r.body).spec;
      return spec.case === "deployment" || spec.case === "sentinel" ? spec.value.workload : undefined;
    });
    assert.equal(workloads[0]?.readinessProbe?.handler.case, "httpGet");
    assert.equal(workloads[0]?.livenessProbe?.handler.case, "tcpSocket");
    assert.equal(workloads[1]?.startupProbe?.handler.case, "exec");
    const { deployment: read } = await t.client(DeploymentService).getDeployment({ id: "api" });
    assert.equal(read!.readinessProbe?.handler.case, "httpGet");
    assert.equal(read!.readinessProbe?.periodSeconds, 5);
    assert.equal(read!.livenessProbe?.handler.case, "tcpSocket");
  });
});
