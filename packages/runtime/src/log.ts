// Structured, leveled logs for ctrl and the agent: one line per event, JSON (for collectors) or
// text (for people), with fields such as region, resource and version. Our own rather than pino:
// pino's import alone adds some 8.5 MB of RSS (measured on Node 24), which the agent's memory
// budget cannot spare, and these few lines are all we use of it. The JSON lines use pino's field
// names (level, time, msg) so that tools made for pino read them.

export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ["json", "text"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** Values attached to a log line (region, resource, version, …). */
export type LogFields = Record<string, string | number | boolean | undefined>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every line. */
  child(fields: LogFields): Logger;
}

export interface LoggerOptions {
  /** Default text. */
  format?: LogFormat;
  /** Lines below this level are dropped. Default info. */
  level?: LogLevel;
  /** Fields on every line (e.g. the process's name and region). */
  fields?: LogFields;
  /** Where a finished line goes (without its newline). Default: stderr. */
  write?: (line: string) => void;
}

// A field whose name says it holds a credential is never written, whatever a caller passes.
const SECRET_FIELD = /token|secret|password|authorization|key$/i;

export function createLogger(options: LoggerOptions = {}): Logger {
  const format = options.format ?? "text";
  const threshold = LOG_LEVELS.indexOf(options.level ?? "info");
  const write = options.write ?? ((line: string) => process.stderr.write(`${line}\n`));
  const make = (base: LogFields): Logger => {
    const emit = (level: LogLevel) => (message: string, fields?: LogFields) => {
      if (LOG_LEVELS.indexOf(level) < threshold) return;
      const all: LogFields = { ...base, ...fields };
      for (const name of Object.keys(all)) if (all[name] === undefined) delete all[name];
      for (const name of Object.keys(all)) if (SECRET_FIELD.test(name)) all[name] = "[redacted]";
      write(format === "json" ? JSON.stringify({ level, time: Date.now(), ...all, msg: message }) : textLine(level, message, all));
    };
    return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error"), child: (fields) => make({ ...base, ...fields }) };
  };
  return make(options.fields ?? {});
}

/** A logger that writes nothing (tests, and library use without a logger). */
export const silentLogger: Logger = createLogger({ write: () => {} });

/** `2026-01-02T03:04:05.678Z WARN message key=value …` (values with spaces quoted). */
function textLine(level: LogLevel, message: string, fields: LogFields): string {
  const pairs = Object.entries(fields).map(([name, value]) => `${name}=${typeof value === "string" && /[\s"=]/.test(value) ? JSON.stringify(value) : value}`);
  return [new Date().toISOString(), level.toUpperCase(), message, ...pairs].join(" ");
}

/** `--log-format` / `--log-level` values checked, or an Error naming the flag. */
export function logOptions(format: string, level: string): { format: LogFormat; level: LogLevel } {
  if (!(LOG_FORMATS as readonly string[]).includes(format)) throw new Error(`--log-format must be ${LOG_FORMATS.join(" or ")}, got ${JSON.stringify(format)}`);
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new Error(`--log-level must be one of ${LOG_LEVELS.join(", ")}, got ${JSON.stringify(level)}`);
  return { format: format as LogFormat, level: level as LogLevel };
}
