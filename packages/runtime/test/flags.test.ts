// The flag conventions ctrl and the agent share: flag over variable over default, durations,
// former names accepted with a warning, --help and the reference's table from one table.
import { test } from "node:test";
import assert from "node:assert/strict";
import { formatDuration, markdownTable, parseDuration, parseFlags, usage, type OptionSpec } from "../src/flags.ts";

const SPECS = [
  { flag: "poll-interval", default: "200ms", description: "poll <this> often", was: { flag: "poll-interval-ms", env: "OLD_POLL_INTERVAL_MS", unit: "ms" } },
  { flag: "listen", default: "127.0.0.1:1", description: "where | how" },
  { flag: "insecure", default: "", boolean: true, description: "plaintext" },
] as const satisfies readonly OptionSpec[];

test("a flag wins over its variable, the variable over the default; switches read 1/true", () => {
  const env = { X_POLL_INTERVAL: "1s", X_LISTEN: "0.0.0.0:2", X_INSECURE: "1" };
  assert.deepEqual(parseFlags(SPECS, "X_", ["--poll-interval", "5s"], env), {
    values: { "poll-interval": "5s", listen: "0.0.0.0:2", insecure: "true" },
    help: false,
    deprecations: [],
  });
  assert.deepEqual(parseFlags(SPECS, "X_", [], {}).values, { "poll-interval": "200ms", listen: "127.0.0.1:1", insecure: "false" });
  assert.equal(parseFlags(SPECS, "X_", ["--help"], {}).help, true);
  assert.throws(() => parseFlags(SPECS, "X_", ["--nope"], {}), /nope/);
});

test("former names still work, in their old unit, each with a deprecation", () => {
  const byFlag = parseFlags(SPECS, "X_", ["--poll-interval-ms", "150"], {});
  assert.equal(byFlag.values["poll-interval"], "150ms");
  assert.deepEqual(byFlag.deprecations, ["flag --poll-interval-ms is deprecated and will be removed; use --poll-interval"]);
  const byEnv = parseFlags(SPECS, "X_", [], { OLD_POLL_INTERVAL_MS: "300" });
  assert.equal(byEnv.values["poll-interval"], "300ms");
  assert.deepEqual(byEnv.deprecations, ["environment variable OLD_POLL_INTERVAL_MS is deprecated and will be removed; use X_POLL_INTERVAL"]);
  assert.equal(parseFlags(SPECS, "X_", [], { OLD_POLL_INTERVAL_MS: "300", X_POLL_INTERVAL: "1s" }).values["poll-interval"], "1s", "the new name wins");
});

test("durations: 250ms, 30s, 10m, 1h, 1h30m and 0; anything else names its flag", () => {
  assert.deepEqual(
    ["250ms", "30s", "10m", "1h", "0", "1.5s", "1h30m", "2m0.5s"].map((text) => parseDuration(text)),
    [250, 30_000, 600_000, 3_600_000, 0, 1500, 5_400_000, 120_500],
  );
  assert.throws(() => parseDuration("1h 30m"), /expected a duration/);
  assert.throws(() => parseDuration("200", "poll-interval"), /--poll-interval "200": expected a duration such as 250ms, 30s, 10m, 1h/);
  assert.throws(() => parseDuration("soon", "x"), /--x "soon"/);
  assert.deepEqual([250, 30_000, 600_000, 7 * 24 * 3_600_000, 0].map(formatDuration), ["250ms", "30s", "10m", "168h", "0"]);
});

test("--help and the reference's table come from the same specs", () => {
  const help = usage("x [flags]", SPECS, "X_");
  assert.match(help, /--poll-interval <value>\n {6}poll <this> often\n {6}env X_POLL_INTERVAL, default 200ms\n/);
  assert.match(help, /--insecure\n {6}plaintext\n {6}env X_INSECURE\n/);
  assert.equal(
    markdownTable(SPECS, "X_"),
    [
      "| Flag | Environment | Default | Meaning |",
      "| --- | --- | --- | --- |",
      "| `--poll-interval` | `X_POLL_INTERVAL` | `200ms` | poll &lt;this> often |",
      "| `--listen` | `X_LISTEN` | `127.0.0.1:1` | where \\| how |",
      "| `--insecure` | `X_INSECURE` |  | plaintext |",
    ].join("\n"),
  );
});
