export { healthEndpoints, parseListen, serveHealth, type HealthChecks, type HealthServer, type MetricsRegistry } from "./health.ts";
export { CONSUMER_TOO_SLOW, ERROR_DOMAIN, FENCED, RESYNC_REQUIRED } from "./reasons.ts";
