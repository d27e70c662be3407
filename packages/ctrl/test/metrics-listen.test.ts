// --metrics-listen: /metrics, /healthz and /readyz on an address of their own; the public
// port then serves no /metrics (health stays, for load balancers).
import { test } from "node:test";
import assert from "node:assert/strict";
import { testDatabases } from "@flotilla/testkit/databases";
import { startTestCtrl } from "@flotilla/testkit/ctrl";

const [{ db: sqlite }] = await testDatabases();

test("metrics on a separate listener, not on the public port", async () => {
  const t = await startTestCtrl(sqlite, { metricsListen: "127.0.0.1:0" });
  try {
    assert.ok(t.ctrl.metricsUrl && t.ctrl.metricsUrl !== t.url);
    const metrics = await fetch(`${t.ctrl.metricsUrl}/metrics`);
    assert.equal(metrics.status, 200);
    assert.match(await metrics.text(), /flotilla_ctrl_/);
    assert.equal((await fetch(`${t.ctrl.metricsUrl}/healthz`)).status, 200);
    assert.equal((await fetch(`${t.ctrl.metricsUrl}/readyz`)).status, 200);
    assert.equal((await fetch(`${t.ctrl.metricsUrl}/ctrl.v1.RegionService/ListRegions`, { method: "POST" })).status, 404);
    assert.equal((await fetch(`${t.url}/metrics`)).status, 404);
    assert.equal((await fetch(`${t.url}/healthz`)).status, 200);
  } finally {
    await t.close();
  }
});

test("without it the public port serves /metrics as before", async () => {
  const t = await startTestCtrl(sqlite);
  try {
    assert.equal(t.ctrl.metricsUrl, undefined);
    assert.equal((await fetch(`${t.url}/metrics`)).status, 200);
  } finally {
    await t.close();
  }
});
