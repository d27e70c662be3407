// `pnpm ctrl` (package.json) must start ctrl with the Node flags and environment the rest of the
// repository (scripts/start.ts, the image, the tests' ctrl processes) takes from CTRL_NODE_FLAGS
// and CTRL_ENVIRONMENT; with CTRL_ENVIRONMENT glibc returns freed request-sized blocks; a ctrl
// process started with them has V8's old generation capped at CTRL_OLD_SPACE_PERCENT of the
// memory it may use, its young generation at CTRL_SEMI_SPACE_MIB per semi-space however
// much garbage a burst makes, and its heap between full GCs smaller than V8 lets it grow
// without CTRL_HEAP_GROWING_PERCENT.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import { CTRL_ENVIRONMENT, CTRL_HEAP_GROWING_PERCENT, CTRL_NODE_FLAGS, CTRL_SEMI_SPACE_MIB } from "../src/node-flags.ts";

test("pnpm ctrl runs ctrl with CTRL_ENVIRONMENT and CTRL_NODE_FLAGS", async () => {
  const { scripts } = JSON.parse(await readFile(new URL("../../../package.json", import.meta.url), "utf8")) as { scripts: Record<string, string> };
  const environment = Object.entries(CTRL_ENVIRONMENT).map(([name, value]) => `${name}=${value}`);
  assert.equal(scripts.ctrl, [...environment, "node", ...CTRL_NODE_FLAGS, "packages/ctrl/src/main.ts"].join(" "));
});

test("CTRL_ENVIRONMENT has glibc return freed 64 KiB blocks that sit between live ones", { skip: process.platform !== "linux" && "glibc" }, () => {
  // 2,000 Buffers of 64 KiB (a socket read's size) with every tenth kept, as request bytes freed
  // around ones still in use: kept in malloc's arena by default, returned with the fixed threshold.
  const script = `const rss = () => Number(/VmRSS:\\s+(\\d+)/.exec(require("fs").readFileSync("/proc/self/status", "utf8"))[1]) * 1024;
    const before = rss(); let buffers = [];
    for (let i = 0; i < 2000; i++) buffers.push(Buffer.allocUnsafeSlow(65536).fill(1));
    buffers = buffers.filter((_, i) => i % 10 === 0);
    globalThis.gc(); globalThis.gc();
    console.log(rss() - before);`;
  const kept = (env: Record<string, string>) =>
    Number(execFileSync(process.execPath, ["--expose-gc", "-e", script], { encoding: "utf8", env: { ...process.env, ...env } }));
  const withIt = kept(CTRL_ENVIRONMENT);
  const without = kept({});
  assert.ok(withIt < 40 * 2 ** 20, `${withIt} bytes kept after freeing 90% of 125 MiB with ${JSON.stringify(CTRL_ENVIRONMENT)}`);
  assert.ok(withIt < without / 2, `${withIt} bytes kept with ${JSON.stringify(CTRL_ENVIRONMENT)}, ${without} without`);
});

test("CTRL_NODE_FLAGS cap V8's old generation below what the machine would give it", () => {
  const limit = (flags: readonly string[]) =>
    Number(execFileSync(process.execPath, [...flags, "-p", "require('v8').getHeapStatistics().heap_size_limit"], { encoding: "utf8" }));
  const capped = limit(CTRL_NODE_FLAGS);
  assert.ok(capped < limit(["--max-old-space-size-percentage=100"]), `heap limit ${capped} with ${CTRL_NODE_FLAGS.join(" ")}`);
});

test("CTRL_NODE_FLAGS cap V8's young generation however much garbage a burst makes", () => {
  // Short-lived objects, some surviving a scavenge or two (what grows V8's new space), as a burst of decoded requests.
  const script = `const v8 = require("v8"); let kept = [], most = 0;
    for (let i = 0; i < 3e6; i++) {
      kept.push({ i, s: "x" + i });
      if (kept.length > 200000) kept = [];
      if (i % 10000 === 0) most = Math.max(most, v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space").space_size);
    }
    console.log(most);`;
  const newSpace = (flags: readonly string[]) => Number(execFileSync(process.execPath, [...flags, "-e", script], { encoding: "utf8" }));
  const capped = newSpace(CTRL_NODE_FLAGS);
  // The new space is both semi-spaces and V8's bookkeeping of them; the young generation V8
  // reserves, three semi-spaces, and during a scavenge a little more (one run in six read 3.6
  // semi-spaces): four is still a small fraction of what V8 picks on a large machine (below).
  assert.ok(capped <= 4 * CTRL_SEMI_SPACE_MIB * 2 ** 20, `new space ${capped} with ${CTRL_NODE_FLAGS.join(" ")}`);
  const uncapped = newSpace(CTRL_NODE_FLAGS.filter((flag) => !flag.startsWith("--max-semi-space-size")));
  assert.ok(capped < uncapped, `new space ${capped} capped, ${uncapped} without the cap`);
});

test(`CTRL_NODE_FLAGS (--heap-growing-percent=${CTRL_HEAP_GROWING_PERCENT}) keep V8's heap between full GCs smaller than without`, () => {
  // About 35 MB live (as ctrl at rest), replaced object by object: garbage that lives long enough
  // to be promoted, as a burst's decoded requests and stream pages do.
  const script = `const v8 = require("v8"); const ring = new Array(200000); let most = 0;
    for (let i = 0; i < 6e6; i++) {
      ring[i % ring.length] = { i, s: "x" + i, a: [i, i] };
      if (i % 10000 === 0) most = Math.max(most, v8.getHeapSpaceStatistics().find((s) => s.space_name === "old_space").space_size);
    }
    console.log(JSON.stringify({ most, live: v8.getHeapSpaceStatistics().find((s) => s.space_name === "old_space").space_used_size }));`;
  const oldSpace = (flags: readonly string[]) =>
    JSON.parse(execFileSync(process.execPath, [...flags, "-e", script], { encoding: "utf8" })) as { most: number; live: number };
  const capped = oldSpace(CTRL_NODE_FLAGS);
  const uncapped = oldSpace(CTRL_NODE_FLAGS.filter((flag) => !flag.startsWith("--heap-growing-percent")));
  // Compared with the same run without the flag, not with a multiple of what is live: V8 lets the
  // heap grow past its limit while concurrent marking runs, by as much as the machine's load
  // slows the marking (up to 2.6 times what was live in a loaded CI run). Here: 100–117 MB with
  // the flag, 162–196 MB without, about 35 MB live.
  assert.ok(
    capped.most < uncapped.most,
    `old space up to ${capped.most} with ${CTRL_NODE_FLAGS.join(" ")} (${capped.live} in use at the end), ${uncapped.most} without the flag`,
  );
});
