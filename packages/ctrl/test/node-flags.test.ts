// `pnpm ctrl` (package.json) must start ctrl with the Node flags the rest of the repository
// (scripts/start.ts, the image, the tests' ctrl processes) takes from CTRL_NODE_FLAGS; a ctrl
// process started with them has V8's old generation capped at CTRL_OLD_SPACE_PERCENT of the
// memory it may use.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import { CTRL_NODE_FLAGS } from "../src/node-flags.ts";

test("pnpm ctrl runs ctrl with CTRL_NODE_FLAGS", async () => {
  const { scripts } = JSON.parse(await readFile(new URL("../../../package.json", import.meta.url), "utf8")) as { scripts: Record<string, string> };
  assert.equal(scripts.ctrl, ["node", ...CTRL_NODE_FLAGS, "packages/ctrl/src/main.ts"].join(" "));
});

test("CTRL_NODE_FLAGS cap V8's old generation below what the machine would give it", () => {
  const limit = (flags: readonly string[]) =>
    Number(execFileSync(process.execPath, [...flags, "-p", "require('v8').getHeapStatistics().heap_size_limit"], { encoding: "utf8" }));
  const capped = limit(CTRL_NODE_FLAGS);
  assert.ok(capped < limit(["--max-old-space-size-percentage=100"]), `heap limit ${capped} with ${CTRL_NODE_FLAGS.join(" ")}`);
});
