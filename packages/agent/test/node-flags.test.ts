// `pnpm agent` (package.json) must start the agent with the Node flags and environment the rest
// of the repository (scripts/start.ts, the image, benchmark B7) takes from AGENT_NODE_FLAGS and
// AGENT_ENVIRONMENT.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { AGENT_ENVIRONMENT, AGENT_NODE_FLAGS } from "../src/node-flags.ts";

test("pnpm agent runs the agent with AGENT_ENVIRONMENT and AGENT_NODE_FLAGS", async () => {
  const { scripts } = JSON.parse(await readFile(new URL("../../../package.json", import.meta.url), "utf8")) as { scripts: Record<string, string> };
  const environment = Object.entries(AGENT_ENVIRONMENT).map(([name, value]) => `${name}=${value}`);
  assert.equal(scripts.agent, [...environment, "node", ...AGENT_NODE_FLAGS, "packages/agent/src/main.ts"].join(" "));
});
