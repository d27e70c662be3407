export { healthEndpoints, parseListen, serveHealth, type HealthChecks, type HealthServer, type MetricsRegistry } from "./health.ts";
export { CONSUMER_TOO_SLOW, ERROR_DOMAIN, FENCED, RESYNC_REQUIRED } from "./reasons.ts";
export {
  createLogger,
  logOptions,
  silentLogger,
  LOG_FORMATS,
  LOG_LEVELS,
  type LogFields,
  type LogFormat,
  type Logger,
  type LogLevel,
  type LoggerOptions,
} from "./log.ts";
export {
  envName,
  formatDuration,
  markdownTable,
  millisecondsIn,
  parseDuration,
  parseFlags,
  usage,
  type LegacyName,
  type OptionSpec,
  type ParsedFlags,
} from "./flags.ts";
export { ReloadingFiles, type ReloadingFilesOptions } from "./reloading-files.ts";
export { FLOTILLA_VERSION } from "./version.ts";
