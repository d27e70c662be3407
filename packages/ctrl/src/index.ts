// @flotilla/ctrl: the server, to start in-process (tests, benchmarks); `pnpm ctrl` is main.ts.
export {
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_READ_MAX_BYTES,
  DEFAULT_RETENTION,
  DEFAULT_RETENTION_INTERVAL_MS,
  startCtrl,
  type Ctrl,
  type CtrlOptions,
} from "./server.ts";
export { DEFAULT_STREAM_OPTIONS, type StreamOptions } from "./services/cluster/options.ts";
