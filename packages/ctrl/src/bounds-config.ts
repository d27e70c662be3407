// The connection bounds from ctrl's configuration (flags and environment).
import { type CtrlConfig, positiveDuration, positiveInt } from "./config.ts";
import type { ConnectionBounds } from "./connection-bounds.ts";
import { formatDuration } from "@flotilla/runtime";

export function connectionBounds(config: CtrlConfig): ConnectionBounds {
  const bounds: ConnectionBounds = {
    firstRequestTimeoutMs: positiveDuration("first-request-timeout", config["first-request-timeout"]),
    idleTimeoutMs: positiveDuration("idle-timeout", config["idle-timeout"]),
    maxConcurrentStreams: positiveInt("max-concurrent-streams", config["max-concurrent-streams"]),
    maxResetsPerSecond: positiveInt("max-resets-per-second", config["max-resets-per-second"]),
    maxPingsPerSecond: positiveInt("max-pings-per-second", config["max-pings-per-second"]),
    maxAuthFailuresPerConnection: positiveInt("max-auth-failures-per-connection", config["max-auth-failures-per-connection"]),
    headersTimeoutMs: positiveDuration("http1-headers-timeout", config["http1-headers-timeout"]),
    requestTimeoutMs: positiveDuration("http1-request-timeout", config["http1-request-timeout"]),
  };
  // Node refuses a request timeout shorter than the headers timeout.
  if (bounds.requestTimeoutMs < bounds.headersTimeoutMs) {
    throw new Error(
      `--http1-request-timeout ${formatDuration(bounds.requestTimeoutMs)} is shorter than --http1-headers-timeout ${formatDuration(bounds.headersTimeoutMs)}`,
    );
  }
  return bounds;
}
