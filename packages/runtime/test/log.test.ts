// The structured logger of ctrl and the agent: levels, JSON and text lines, no secret fields.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createLogger, logOptions } from "../src/log.ts";

test("json: one parseable object a line with level, time, msg and the fields; below the level nothing", () => {
  const lines: string[] = [];
  const log = createLogger({ format: "json", level: "info", fields: { process: "agent" }, write: (line) => lines.push(line) }).child({ region: "east" });
  log.debug("not written");
  log.info("applied", { resource: "1/web", version: 7 });
  log.warn("retry", { resource: undefined });
  assert.equal(lines.length, 2);
  const [first, second] = lines.map((line) => JSON.parse(line));
  assert.deepEqual({ ...first, time: 0 }, { level: "info", time: 0, process: "agent", region: "east", resource: "1/web", version: 7, msg: "applied" });
  assert.equal(typeof first.time, "number");
  assert.equal(second.level, "warn");
  assert.ok(!("resource" in second), "undefined fields are left out");
});

test("text: time, LEVEL, message, then key=value (quoted when needed)", () => {
  const lines: string[] = [];
  createLogger({ level: "debug", write: (line) => lines.push(line) }).debug("report failed", { region: "east", reason: "two words" });
  assert.match(lines[0]!, /^\d{4}-\d\d-\d\dT\S+Z DEBUG report failed region=east reason="two words"$/);
});

test("a field named like a credential is never written", () => {
  const lines: string[] = [];
  const log = createLogger({ format: "json", write: (line) => lines.push(line) });
  log.error("oops", { token: "flt_agent_secret", adminToken: "a", authorization: "Bearer x", clientKey: "k", password: "p" });
  assert.ok(!/flt_agent_secret|Bearer x/.test(lines[0]!), lines[0]);
  assert.deepEqual(Object.values(JSON.parse(lines[0]!)).filter((v) => v === "[redacted]").length, 5);
});

test("logOptions: the flags' values checked, a mistake names its flag", () => {
  assert.deepEqual(logOptions("json", "warn"), { format: "json", level: "warn" });
  assert.throws(() => logOptions("xml", "info"), /--log-format must be json or text/);
  assert.throws(() => logOptions("text", "verbose"), /--log-level must be one of debug, info, warn, error/);
});
