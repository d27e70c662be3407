// The health endpoints ctrl and the agent share: /healthz, /readyz, /metrics, 404 otherwise.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseListen, serveHealth } from "../src/health.ts";

test("serveHealth: healthz and readyz answer 503 with the reason until healthy/ready; metrics from the registry", async () => {
  let ready = false;
  let draining = false;
  const server = await serveHealth("127.0.0.1:0", {
    registry: { contentType: "text/plain; version=0.0.4", metrics: async () => "up 1\n" },
    unhealthy: () => (draining ? "draining" : undefined),
    notReady: () => (ready ? undefined : "waiting for the first complete sync"),
  });
  try {
    const get = async (path: string) => {
      const response = await fetch(server.url + path);
      return [response.status, await response.text()];
    };
    assert.deepEqual(await get("/healthz"), [200, "ok\n"]);
    assert.deepEqual(await get("/livez"), [200, "ok\n"]);
    assert.deepEqual(await get("/readyz?verbose"), [503, "waiting for the first complete sync\n"]);
    ready = true;
    assert.deepEqual(await get("/readyz"), [200, "ok\n"]);
    assert.deepEqual(await get("/metrics"), [200, "up 1\n"]);
    assert.deepEqual(await get("/other"), [404, "not found\n"]);
    draining = true;
    assert.deepEqual(await get("/healthz"), [503, "draining\n"]);
    assert.deepEqual(await get("/livez"), [503, "draining\n"]);
  } finally {
    await server.close();
  }
});

test("parseListen: host:port, [v6]:port, a bare port on loopback; anything else names --listen", () => {
  assert.deepEqual(parseListen("0.0.0.0:7071"), { host: "0.0.0.0", port: 7071 });
  assert.deepEqual(parseListen("[::1]:0"), { host: "::1", port: 0 });
  assert.deepEqual(parseListen("7070"), { host: "127.0.0.1", port: 7070 });
  assert.throws(() => parseListen("host:99999"), /--listen "host:99999": expected host:port/);
  assert.throws(() => parseListen("nope"), /--listen/);
});
