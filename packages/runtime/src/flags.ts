// The flag conventions of ctrl and the agent, in one place: every flag is also an environment
// variable FLOTILLA_<PROCESS>_<FLAG> (--poll-interval of ctrl → FLOTILLA_CTRL_POLL_INTERVAL;
// one prefix per process, so that an environment shared by both, as `pnpm start` has, cannot
// set one's flag for the other); flags win over the environment, the environment over the
// default; durations are written 250ms, 30s, 10m, 1h. A table of OptionSpecs is the single
// source of --help and of the reference's flag tables (scripts/docs-reference.ts).
import { parseArgs } from "node:util";

export interface OptionSpec {
  flag: string;
  /** Default value as written on the command line ("" for none). */
  default: string;
  description: string;
  /** A switch without a value (`--insecure`); its value is "true" or "false". */
  boolean?: true;
  /** A name this flag had before (e.g. `poll-interval-ms`): still accepted, with a warning, for one release. */
  was?: LegacyName;
}

/** A former flag and environment variable name, and how its value reads today. */
export interface LegacyName {
  flag?: string;
  env?: string;
  /** The former value as a bare number of this unit; today's value is written with it ("200" → "200ms"). */
  unit?: "ms" | "s";
}

/** The environment variable of `flag` under `prefix` (FLOTILLA_CTRL_, FLOTILLA_AGENT_). */
export function envName(prefix: string, flag: string): string {
  return prefix + flag.toUpperCase().replaceAll("-", "_");
}

export interface ParsedFlags {
  /** By flag name: the flag's value, else its variable's, else the default. */
  values: Record<string, string>;
  help: boolean;
  /** One line per former name used (to log as a warning once a logger exists). */
  deprecations: string[];
}

/** Reads `argv` and `env` by `specs`; unknown flags and positionals throw. */
export function parseFlags(specs: readonly OptionSpec[], prefix: string, argv: string[], env: NodeJS.ProcessEnv): ParsedFlags {
  const options: Record<string, { type: "string" | "boolean" }> = { help: { type: "boolean" } };
  for (const spec of specs) {
    options[spec.flag] = { type: spec.boolean ? "boolean" : "string" };
    if (spec.was?.flag) options[spec.was.flag] = { type: spec.boolean ? "boolean" : "string" };
  }
  const given = parseArgs({ args: argv, options, strict: true, allowPositionals: false }).values as Record<string, string | boolean | undefined>;
  const deprecations: string[] = [];
  const values: Record<string, string> = {};
  for (const spec of specs) {
    const env_ = envName(prefix, spec.flag);
    const legacy = (name: string, value: string | boolean | undefined, kind: string, now: string) => {
      if (value === undefined) return undefined;
      deprecations.push(`${kind} ${name} is deprecated and will be removed; use ${now}`);
      return typeof value === "string" && spec.was?.unit ? `${value}${spec.was.unit}` : value;
    };
    const fromFlag = given[spec.flag] ?? legacy(`--${spec.was?.flag}`, spec.was?.flag ? given[spec.was.flag] : undefined, "flag", `--${spec.flag}`);
    const fromEnv = env[env_] ?? legacy(spec.was?.env ?? "", spec.was?.env ? env[spec.was.env] : undefined, "environment variable", env_);
    const value = fromFlag ?? fromEnv;
    values[spec.flag] = spec.boolean
      ? String(value === true || (typeof value === "string" && ["1", "true"].includes(value.toLowerCase())))
      : ((value as string | undefined) ?? spec.default);
  }
  return { values, help: given.help === true, deprecations };
}

/** --help text: each flag, its variable and default. */
export function usage(synopsis: string, specs: readonly OptionSpec[], prefix: string): string {
  const rows = specs.map(
    (s) =>
      `  --${s.flag}${s.boolean ? "" : " <value>"}\n      ${s.description}\n      env ${envName(prefix, s.flag)}${s.default ? `, default ${s.default}` : ""}`,
  );
  return `usage: ${synopsis}\n\n${rows.join("\n")}\n  --help\n      show this help\n`;
}

/** The reference's table of `specs` (Markdown). */
export function markdownTable(specs: readonly OptionSpec[], prefix: string): string {
  const cell = (text: string) => text.replaceAll("|", "\\|").replaceAll("<", "&lt;");
  const rows = specs.map((s) => `| \`--${s.flag}\` | \`${envName(prefix, s.flag)}\` | ${s.default ? `\`${cell(s.default)}\`` : ""} | ${cell(s.description)} |`);
  return ["| Flag | Environment | Default | Meaning |", "| --- | --- | --- | --- |", ...rows].join("\n");
}

const DURATION_UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** Milliseconds of "250ms", "30s", "10m", "1h", "1h30m" (units in any sequence, as Go's time.ParseDuration), or a bare 0; undefined for anything else. */
export function millisecondsIn(text: string): number | undefined {
  const trimmed = text.trim();
  if (trimmed === "0") return 0;
  if (!/^(\d+(?:\.\d+)?(?:ms|s|m|h))+$/.test(trimmed)) return undefined;
  let ms = 0;
  for (const [, n, unit] of trimmed.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) ms += Number(n) * DURATION_UNIT_MS[unit as keyof typeof DURATION_UNIT_MS];
  return ms;
}

/** Milliseconds from "250ms", "30s", "10m", "1h", "1h30m" (a bare 0 is 0); anything else throws naming `flag`. */
export function parseDuration(text: string, flag = "duration"): number {
  const ms = millisecondsIn(text);
  if (ms === undefined) throw new Error(`--${flag} ${JSON.stringify(text)}: expected a duration such as 250ms, 30s, 10m, 1h`);
  return ms;
}

/** The shortest of "1h", "10m", "30s", "250ms" that is exactly `ms`. */
export function formatDuration(ms: number): string {
  if (ms === 0) return "0";
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
