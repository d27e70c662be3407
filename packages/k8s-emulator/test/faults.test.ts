import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { collectWatch, deployment, expectApiError, startCluster, waitFor, type Cluster } from "@flotilla/testkit/emulator";

describe("fault injection and the request log", () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster();
    await c.apply(deployment("web"));
  });
  beforeEach(() => {
    c.emu.faults.clear();
    c.emu.clearRequestLog();
  });
  after(() => c.emu.stop());

  it("failNext returns 500 Status to the client once, then recovers", async () => {
    c.emu.faults.failNext("get", 1, 500);
    const err = await expectApiError(c.apps.readNamespacedDeployment({ name: "web", namespace: "default" }), 500);
    assert.equal(err.reason, "InternalError");
    const ok = await c.apps.readNamespacedDeployment({ name: "web", namespace: "default" });
    assert.equal(ok.metadata?.name, "web");
    assert.deepEqual(
      c.emu.requestLog.map((e) => [e.verb, e.status]),
      [
        ["get", 500],
        ["get", 200],
      ],
    );
  });

  it("tooManyRequests returns 429 with Retry-After visible to the client", async () => {
    c.emu.faults.tooManyRequests("apply", 2, 7);
    for (let i = 0; i < 2; i++) {
      const err = await expectApiError(c.apply(deployment("web")), 429);
      assert.equal(err.reason, "TooManyRequests");
      assert.equal(err.details.retryAfterSeconds, 7);
      assert.equal(err.headers["retry-after"], "7");
    }
    await c.apply(deployment("web"));
  });

  it("setErrorRate fails the configured fraction of requests", async () => {
    c.emu.faults.setErrorRate("list", 1, 503);
    await expectApiError(c.apps.listNamespacedDeployment({ namespace: "default" }), 503);
    c.emu.faults.setErrorRate("list", 0);
    await c.apps.listNamespacedDeployment({ namespace: "default" });
    // Half the requests with a fixed random sequence.
    let n = 0;
    c.emu.faults.random = () => (n++ % 2 === 0 ? 0.1 : 0.9);
    c.emu.faults.setErrorRate("*", 0.5);
    const results = await Promise.allSettled([1, 2, 3, 4].map(() => c.apps.readNamespacedDeployment({ name: "web", namespace: "default" })));
    assert.equal(results.filter((r) => r.status === "rejected").length, 2);
    c.emu.faults.random = Math.random;
  });

  it("latencyMs delays responses", async () => {
    c.emu.faults.latencyMs("get", 150);
    const t = Date.now();
    await c.apps.readNamespacedDeployment({ name: "web", namespace: "default" });
    assert.ok(Date.now() - t >= 140);
  });

  it("hold keeps requests with its verb unanswered until release; other verbs pass", async () => {
    const release = c.emu.faults.hold("apply");
    let answered = false;
    const applied = c.apply(deployment("web")).then(() => (answered = true));
    await c.apps.readNamespacedDeployment({ name: "web", namespace: "default" });
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(answered, false, "held");
    release();
    await applied;
    assert.deepEqual(
      c.emu.requestLog.map((e) => [e.verb, e.status]),
      [
        ["get", 200],
        ["apply", 200],
      ],
    );
  });

  it("dropWatches ends client watches; failing watch requests surface the status code", async () => {
    const w = await collectWatch(c, "/apis/apps/v1/namespaces/default/deployments");
    await waitFor(() => c.emu.openWatches > 0, 1000, "watch open");
    assert.equal(c.emu.faults.dropWatches(), 1);
    await waitFor(() => w.done, 1000, "watch ended");
    assert.equal(c.emu.openWatches, 0);

    c.emu.faults.failNext("watch", 1, 500);
    const failed = await collectWatch(c, "/apis/apps/v1/namespaces/default/deployments");
    await waitFor(() => failed.done, 1000, "failed watch");
    assert.equal((failed.error as { statusCode?: number }).statusCode, 500);
  });

  it("suppressWatchEvents keeps watches open without delivering events", async () => {
    c.emu.faults.suppressWatchEvents(true);
    const w = await collectWatch(c, "/api/v1/namespaces", { resourceVersion: c.emu.resourceVersion });
    await c.core.createNamespace({ body: { metadata: { name: "quiet" } } });
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(w.events.length, 0);
    assert.equal(w.done, false);
    c.emu.faults.suppressWatchEvents(false);
    await c.core.deleteNamespace({ name: "quiet" });
    await waitFor(() => w.events.length >= 1, 1000, "event after unsuppress");
    assert.equal(w.events[0].type, "MODIFIED", "the namespace turned Terminating");
    w.abort();
  });

  it("setWatchDropIntervalMs drops watches periodically", async () => {
    c.emu.faults.setWatchDropIntervalMs(50);
    const w = await collectWatch(c, "/api/v1/namespaces", { resourceVersion: c.emu.resourceVersion });
    await waitFor(() => w.done, 1000, "periodic drop");
  });

  it("records every API request with verb, resource, namespace, name, status and fieldManager", async () => {
    await c.apply(deployment("logged"), "log-test");
    await expectApiError(c.apps.readNamespacedDeployment({ name: "missing", namespace: "default" }), 404);
    await c.apps.listDeploymentForAllNamespaces({ labelSelector: "app=logged" });
    const api = c.emu.requestLog.filter((e) => e.verb);
    assert.deepEqual(
      api.map(({ verb, group, version, resource, namespace, name, status, fieldManager }) => ({
        verb,
        group,
        version,
        resource,
        namespace,
        name,
        status,
        fieldManager,
      })),
      [
        { verb: "apply", group: "apps", version: "v1", resource: "deployments", namespace: "default", name: "logged", status: 201, fieldManager: "log-test" },
        { verb: "get", group: "apps", version: "v1", resource: "deployments", namespace: "default", name: "missing", status: 404, fieldManager: undefined },
        { verb: "list", group: "apps", version: "v1", resource: "deployments", namespace: undefined, name: undefined, status: 200, fieldManager: undefined },
      ],
    );
    assert.equal(api[2].query.labelSelector, "app=logged");
    assert.equal(api[0].method, "PATCH");
    assert.ok(!Number.isNaN(Date.parse(api[0].time)));
  });

  it("exposes faults, the request log and reset over HTTP", async () => {
    const put = await fetch(`${c.emu.url}/_emulator/faults`, {
      method: "PUT",
      body: JSON.stringify({ failNext: [{ verb: "get", count: 1, status: 429, retryAfterSeconds: 3 }], latency: [{ verb: "list", ms: 1 }] }),
    });
    assert.equal(put.status, 200);
    const shown = (await (await fetch(`${c.emu.url}/_emulator/faults`)).json()) as { failNext: unknown[] };
    assert.deepEqual(shown.failNext, [{ verb: "get", count: 1, status: 429, retryAfterSeconds: 3 }]);
    const err = await expectApiError(c.apps.readNamespacedDeployment({ name: "web", namespace: "default" }), 429);
    assert.equal(err.headers["retry-after"], "3");
    const log = (await (await fetch(`${c.emu.url}/_emulator/requests`)).json()) as { path: string; status: number }[];
    assert.equal(log.at(-1)?.status, 429);
    assert.ok(!log.some((e) => e.path.startsWith("/_emulator")), "emulator endpoints are not logged");

    const bad = await fetch(`${c.emu.url}/_emulator/faults`, { method: "POST", body: '{"errorRates":[{"verb":"nope","rate":1}]}' });
    assert.equal(bad.status, 400);

    await fetch(`${c.emu.url}/_emulator/faults`, { method: "POST", body: JSON.stringify({ dropWatches: true }) });
    const reset = await fetch(`${c.emu.url}/_emulator/reset`, { method: "POST" });
    assert.equal(reset.status, 200);
    assert.equal(c.emu.get("apps/v1", "Deployment", "default", "web"), undefined);
    assert.ok(c.emu.get("v1", "Namespace", "default"));
    assert.deepEqual(c.emu.requestLog, []);
  });
});
