// How tests and checks read the documentation: runnable blocks, their commands, and the
// anchors the site gives headings.
import { test } from "node:test";
import assert from "node:assert/strict";
import { anchor, blockCommands, headingAnchors, runnableBlocksIn, runnableFence } from "@flotilla/testkit/docs";

test("a block's commands: continuation lines joined, trailing comments dropped, (exits 1) read", () => {
  assert.deepEqual(
    blockCommands(
      [
        "CTRL=http://127.0.0.1:7070; AUTH=x",
        "pnpm exec buf curl $CTRL/A \\",
        `  -d '{"a":1}'     # one call over two lines`,
        "",
        "pnpm flotilla diff -f x/   # changes (exits 1)",
      ].join("\n"),
    ),
    [
      { command: "CTRL=http://127.0.0.1:7070; AUTH=x", exit: 0 },
      { command: `pnpm exec buf curl $CTRL/A \\\n  -d '{"a":1}'`, exit: 0 },
      { command: "pnpm flotilla diff -f x/", exit: 1 },
    ],
  );
});

test("only sh blocks marked runnable with a known stack run; a misspelt marker is an error, not a skip", () => {
  assert.equal(runnableFence("```sh"), undefined);
  assert.equal(runnableFence("```yaml"), undefined);
  assert.equal(runnableFence("```sh runnable stack=regions"), "regions");
  assert.throws(() => runnableFence("```sh runable stack=local"), /marker/);
  assert.throws(() => runnableFence("```sh runnable stack=prod"), /marker/);
  assert.throws(() => runnableFence("```bash runnable stack=local"), /marker/);
  const blocks = runnableBlocksIn(
    "x.md",
    ["# Page", "## First", "```sh runnable stack=local", "a", "```", "```sh", "b", "```", "## Second", "```sh runnable stack=tls", "c", "```"].join("\n"),
  );
  assert.deepEqual(
    blocks.map((b) => [b.heading, b.stack, b.commands.map((c) => c.command)]),
    [
      ["## First", "local", ["a"]],
      ["## Second", "tls", ["c"]],
    ],
  );
});

test("anchors as the site makes them: punctuation runs become one dash, a leading digit gets an underscore, repeats a suffix", () => {
  assert.equal(anchor("FlotillaAgentStale"), "flotillaagentstale");
  assert.equal(anchor("2. Versions: commit-ordered, per region, gapless"), "_2-versions-commit-ordered-per-region-gapless");
  assert.equal(anchor("The CLI: `flotilla`"), "the-cli-flotilla");
  assert.deepEqual(
    [...headingAnchors(["# A", "## Usage", "```sh", "# not a heading", "```", "## Usage", "### Custom {#mine}"].join("\n"))],
    ["a", "usage", "usage-1", "mine"],
  );
});
