// The server's own surfaces: /healthz, /metrics, grpc.health.v1, unknown paths.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Health, HealthCheckResponse_ServingStatus } from "@flotilla/proto/grpc/health/v1/health_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { grpcJsUnary } from "@flotilla/testkit/interop";

const [sqlite] = await testDatabases();

describe("server surfaces", () => {
  let t: TestCtrl;
  before(async () => (t = await startTestCtrl(sqlite!.db)));
  after(() => t.close());

  test("/healthz and grpc.health.v1 report serving, without a token", async () => {
    const res = await fetch(`${t.url}/healthz`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "ok\n");
    const health = await grpcJsUnary(t.url, Health.method.check, { service: "" });
    assert.equal(health.status, HealthCheckResponse_ServingStatus.SERVING);
    const svc = await grpcJsUnary(t.url, Health.method.check, { service: "ctrl.v1.DeploymentService" });
    assert.equal(svc.status, HealthCheckResponse_ServingStatus.SERVING);
    await assert.rejects(grpcJsUnary(t.url, Health.method.check, { service: "nope.Service" }));
  });

  test("/metrics counts requests by procedure and code", async () => {
    await t.client(RegionService).createRegion({ region: { name: "m" } });
    await t
      .client(RegionService)
      .getRegion({ name: "missing" })
      .catch(() => {});
    const text = await (await fetch(`${t.url}/metrics`)).text();
    assert.match(text, /flotilla_ctrl_requests_total\{procedure="ctrl.v1.RegionService\/CreateRegion",code="ok"\} 1/);
    assert.match(text, /flotilla_ctrl_requests_total\{procedure="ctrl.v1.RegionService\/GetRegion",code="not_found"\} 1/);
    assert.match(text, /flotilla_ctrl_request_duration_seconds_bucket/);
    assert.match(text, /process_resident_memory_bytes/);
  });

  test("unknown paths are 404, not a crash", async () => {
    assert.equal((await fetch(`${t.url}/nope`)).status, 404);
    assert.equal((await fetch(`${t.url}/ctrl.v1.Nope/Call`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status, 404);
  });
});
