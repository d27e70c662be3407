// The results table of docs/benchmarks.md: a run replaces the rows of what it measured, keeps
// the others with their own date, commit and machine, and writes nothing else.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { mergeResults, type Row, type RunInfo } from "../lib/report.ts";

const row = (benchmark: string, measured: string, met?: boolean): Row => ({ benchmark, measured, reference: "ref", ratio: "1.00×", target: "≤ 1", met });
const START = "<!-- results:start (written by `node bench/run.ts --write-docs`) -->";
const END = "<!-- results:end -->";
const earlier: RunInfo = { date: "2026-11-26 23:14 UTC", commit: "d9300bc", machine: "2 cores" };
const later: RunInfo = { date: "2026-11-28 10:00 UTC", commit: "abc1234", machine: "2 cores" };

const doc = (table: string) => `# Benchmarks\n\nWhat each measures.\n\n${START}\n${table}\n${END}\n\n## Design notes\n\nThey stay.\n`;

test("a run replaces its benchmarks' rows in place, keeps the rest, adds the new ones at the end", () => {
  const first = mergeResults(doc(""), [row("B1 sync", "100/s", true), row("B2 p99", "20 ms", false), row("B3 queries", "10/s")], earlier);
  const second = mergeResults(first, [row("B2 p99", "18 ms", true), row("B9 new", "1 s")], later);
  const lines = second.slice(second.indexOf(START), second.indexOf(END)).split("\n").slice(1, -1);
  assert.deepEqual(lines, [
    "| benchmark | measured | reference (same run) | ratio | target | met? | date | commit | machine |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    "| B1 sync | 100/s | ref | 1.00× | ≤ 1 | yes | 2026-11-26 23:14 UTC | d9300bc | 2 cores |",
    "| B2 p99 | 18 ms | ref | 1.00× | ≤ 1 | yes | 2026-11-28 10:00 UTC | abc1234 | 2 cores |",
    "| B3 queries | 10/s | ref | 1.00× | ≤ 1 | — | 2026-11-26 23:14 UTC | d9300bc | 2 cores |",
    "| B9 new | 1 s | ref | 1.00× | ≤ 1 | — | 2026-11-28 10:00 UTC | abc1234 | 2 cores |",
  ]);
  // Nothing outside the table moved, and nothing was appended.
  assert.equal(second.slice(0, second.indexOf(START)), "# Benchmarks\n\nWhat each measures.\n\n");
  assert.equal(second.slice(second.indexOf(END)), `${END}\n\n## Design notes\n\nThey stay.\n`);
  assert.equal(mergeResults(second, [row("B2 p99", "18 ms", true), row("B9 new", "1 s")], later), second, "the same run again changes nothing");
});

test("a pipe inside a cell is escaped and read back as one cell", () => {
  const merged = mergeResults(doc(""), [{ ...row("B4 x", "1 | 2"), reference: "a|b" }], earlier);
  assert.match(merged, /^\| B4 x \| 1 \\\| 2 \| a\\\|b \| 1\.00× \|/m);
  assert.equal(mergeResults(merged, [], later), merged);
});

test("without the table's markers nothing is written: the file is not appended to", () => {
  assert.throws(() => mergeResults("# Benchmarks\n", [row("B1", "1")], later), /markers are missing/);
});

test("docs/benchmarks.md has the table, one row per benchmark, each with its date, commit and machine", () => {
  const text = readFileSync(new URL("../../docs/benchmarks.md", import.meta.url), "utf8");
  assert.equal(mergeResults(text, [], later), text, "the table is as the writer writes it");
  const rows = text
    .slice(text.indexOf(START), text.indexOf(END))
    .split("\n")
    .filter((line) => /^\| B\d/.test(line));
  assert.ok(rows.length >= 30, `${rows.length} rows`);
  for (const line of rows) assert.match(line, /\| \d{4}-\d\d-\d\d [^|]+ \| [0-9a-f]{7}[^|]* \| \d+ cores [^|]+ \|$/, line);
  assert.ok(!/^### \d{4}-\d\d-\d\d/m.test(text), "no dated runs: git keeps them");
});
