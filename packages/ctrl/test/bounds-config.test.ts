// The bounds' flags and environment variables.
import { test } from "node:test";
import assert from "node:assert/strict";
import { connectionBounds } from "../src/bounds-config.ts";
import { parseConfig } from "../src/config.ts";
import { DEFAULT_CONNECTION_BOUNDS } from "../src/connection-bounds.ts";

const config = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
  const parsed = parseConfig(argv, env);
  assert.notEqual(parsed, "help");
  return (parsed as Exclude<typeof parsed, "help">).config;
};

test("defaults, flags and environment variables", () => {
  assert.deepEqual(connectionBounds(config([])), DEFAULT_CONNECTION_BOUNDS);
  const bounds = connectionBounds(
    config(["--max-resets-per-second", "7", "--idle-timeout=1234ms"], {
      FLOTILLA_CTRL_MAX_PINGS_PER_SECOND: "3",
      FLOTILLA_CTRL_HTTP1_HEADERS_TIMEOUT: "500ms",
      FLOTILLA_CTRL_MAX_AUTH_FAILURES_PER_CONNECTION: "5",
    }),
  );
  assert.deepEqual(
    {
      resets: bounds.maxResetsPerSecond,
      idle: bounds.idleTimeoutMs,
      pings: bounds.maxPingsPerSecond,
      headers: bounds.headersTimeoutMs,
      authFailures: bounds.maxAuthFailuresPerConnection,
    },
    { resets: 7, idle: 1234, pings: 3, headers: 500, authFailures: 5 },
  );
  assert.equal(connectionBounds(config(["--max-auth-failures-per-connection", "9"])).maxAuthFailuresPerConnection, 9);
  assert.equal(connectionBounds(config(["--http1-keep-alive-timeout", "2s"])).keepAliveTimeoutMs, 2000);
  assert.equal(connectionBounds(config([], { FLOTILLA_CTRL_HTTP1_KEEP_ALIVE_TIMEOUT: "750ms" })).keepAliveTimeoutMs, 750);
});

test("the former names (FLOTILLA_<FLAG>, --…-ms in milliseconds) still work", () => {
  const bounds = connectionBounds(config(["--idle-timeout-ms", "1234"], { FLOTILLA_MAX_PINGS_PER_SECOND: "3" }));
  assert.deepEqual({ idle: bounds.idleTimeoutMs, pings: bounds.maxPingsPerSecond }, { idle: 1234, pings: 3 });
});

test("a request timeout shorter than the headers timeout, or a bound that is not a positive integer, is refused by name", () => {
  assert.throws(
    () => connectionBounds(config(["--http1-request-timeout", "100ms", "--http1-headers-timeout", "200ms"])),
    /--http1-request-timeout 100ms is shorter than --http1-headers-timeout 200ms/,
  );
  assert.throws(() => connectionBounds(config(["--max-concurrent-streams", "0"])), /--max-concurrent-streams "0"/);
});
