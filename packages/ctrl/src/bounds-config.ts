// The connection bounds from ctrl's configuration (flags and environment).
import { type CTRL_OPTIONS, positiveInt, type Config } from "./config.ts";
import type { ConnectionBounds } from "./connection-bounds.ts";

export function connectionBounds(config: Config<typeof CTRL_OPTIONS>): ConnectionBounds {
  const bounds: ConnectionBounds = {
    firstRequestTimeoutMs: positiveInt("first-request-timeout-ms", config["first-request-timeout-ms"]),
    idleTimeoutMs: positiveInt("idle-timeout-ms", config["idle-timeout-ms"]),
    maxConcurrentStreams: positiveInt("max-concurrent-streams", config["max-concurrent-streams"]),
    maxResetsPerSecond: positiveInt("max-resets-per-second", config["max-resets-per-second"]),
    maxPingsPerSecond: positiveInt("max-pings-per-second", config["max-pings-per-second"]),
    headersTimeoutMs: positiveInt("http1-headers-timeout-ms", config["http1-headers-timeout-ms"]),
    requestTimeoutMs: positiveInt("http1-request-timeout-ms", config["http1-request-timeout-ms"]),
  };
  // Node refuses a request timeout shorter than the headers timeout.
  if (bounds.requestTimeoutMs < bounds.headersTimeoutMs) {
    throw new Error(`--http1-request-timeout-ms ${bounds.requestTimeoutMs} is shorter than --http1-headers-timeout-ms ${bounds.headersTimeoutMs}`);
  }
  return bounds;
}
