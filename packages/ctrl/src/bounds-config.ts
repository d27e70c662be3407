// The connection bounds from ctrl's configuration (flags and environment).
import { type CtrlConfig, flagReader } from "./config.ts";
import type { ConnectionBounds } from "./connection-bounds.ts";
import { formatDuration } from "@flotilla/runtime";

export function connectionBounds(config: CtrlConfig): ConnectionBounds {
  const read = flagReader(config);
  const bounds: ConnectionBounds = {
    firstRequestTimeoutMs: read.positiveDuration("first-request-timeout"),
    idleTimeoutMs: read.positiveDuration("idle-timeout"),
    maxConcurrentStreams: read.positiveInt("max-concurrent-streams"),
    maxResetsPerSecond: read.positiveInt("max-resets-per-second"),
    maxPingsPerSecond: read.positiveInt("max-pings-per-second"),
    maxAuthFailuresPerConnection: read.positiveInt("max-auth-failures-per-connection"),
    headersTimeoutMs: read.positiveDuration("http1-headers-timeout"),
    requestTimeoutMs: read.positiveDuration("http1-request-timeout"),
    keepAliveTimeoutMs: read.positiveDuration("http1-keep-alive-timeout"),
  };
  // Node refuses a request timeout shorter than the headers timeout.
  if (bounds.requestTimeoutMs < bounds.headersTimeoutMs) {
    throw new Error(
      `--http1-request-timeout ${formatDuration(bounds.requestTimeoutMs)} is shorter than --http1-headers-timeout ${formatDuration(bounds.headersTimeoutMs)}`,
    );
  }
  return bounds;
}
