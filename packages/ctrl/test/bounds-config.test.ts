// The bounds' flags and environment variables.
import { test } from "node:test";
import assert from "node:assert/strict";
import { connectionBounds } from "../src/bounds-config.ts";
import { CTRL_OPTIONS, parseConfig } from "../src/config.ts";
import { DEFAULT_CONNECTION_BOUNDS } from "../src/connection-bounds.ts";

const config = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
  const parsed = parseConfig(CTRL_OPTIONS, argv, env);
  assert.notEqual(parsed, "help");
  return parsed as Exclude<typeof parsed, "help">;
};

test("defaults, flags and environment variables", () => {
  assert.deepEqual(connectionBounds(config([])), DEFAULT_CONNECTION_BOUNDS);
  const bounds = connectionBounds(
    config(["--max-resets-per-second", "7", "--idle-timeout-ms=1234"], { FLOTILLA_MAX_PINGS_PER_SECOND: "3", FLOTILLA_HTTP1_HEADERS_TIMEOUT_MS: "500" }),
  );
  assert.deepEqual(
    { resets: bounds.maxResetsPerSecond, idle: bounds.idleTimeoutMs, pings: bounds.maxPingsPerSecond, headers: bounds.headersTimeoutMs },
    { resets: 7, idle: 1234, pings: 3, headers: 500 },
  );
});

test("a request timeout shorter than the headers timeout, or a bound that is not a positive integer, is refused by name", () => {
  assert.throws(() => connectionBounds(config(["--http1-request-timeout-ms", "100", "--http1-headers-timeout-ms", "200"])), /--http1-request-timeout-ms 100 is shorter than --http1-headers-timeout-ms 200/);
  assert.throws(() => connectionBounds(config(["--max-concurrent-streams", "0"])), /--max-concurrent-streams "0"/);
});
