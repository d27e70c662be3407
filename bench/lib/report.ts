// The results table: printed by a run, and kept in docs/benchmarks.md with the latest figure of each benchmark.
import { readFileSync, writeFileSync } from "node:fs";

export interface Row {
  benchmark: string;
  measured: string;
  reference: string;
  ratio: string;
  target: string;
  /** undefined: informational, no target. */
  met: boolean | undefined;
}

export interface BenchResult {
  rows: Row[];
  /** Extra observations printed under the table. */
  notes: string[];
}

export interface BenchContext {
  serverUrl: string;
  quick: boolean;
  pollIntervalMs: number;
  cpuProfileDir: string | undefined;
  /** B7: heap snapshots of the agent processes when drained go here (bench/diag/heap-summary.ts reads them). */
  heapSnapshotDir: string | undefined;
  /** B7: agent runs with the kubernetes target, the median is the figure (default 3). */
  b7Runs: number;
  /** B7: this share of the fleet's deployments with five secret values, probes and autoscaling (0: none, the default). */
  b7ServiceMix: number;
}

export function markdownTable(rows: readonly Row[]): string {
  const lines = [
    "| benchmark | measured | reference (same run) | ratio | target | met? |",
    "|---|---|---|---|---|---|",
    ...rows.map(
      (r) => `| ${r.benchmark} | ${r.measured} | ${r.reference} | ${r.ratio} | ${r.target} | ${r.met === undefined ? "—" : r.met ? "yes" : "**no**"} |`,
    ),
  ];
  return lines.join("\n");
}

const START = "<!-- results:start (written by `node bench/run.ts --write-docs`) -->";
const END = "<!-- results:end -->";
const HEADER = ["benchmark", "measured", "reference (same run)", "ratio", "target", "met?", "date", "commit", "machine"];

/** Where and when a run measured: each row of the results table carries its own. */
export interface RunInfo {
  /** 2026-11-26 23:14 UTC */
  date: string;
  /** The short commit, marked when the sources measured had uncommitted changes. */
  commit: string;
  /** Cores, CPU, memory, Node.js and database. */
  machine: string;
}

const escapeCell = (text: string) => text.replaceAll("|", "\\|");
/** The cells of a table row, `|` inside a cell escaped as `\|`. */
const cellsOf = (line: string) =>
  line
    .replace(/^\|\s?|\s?\|$/g, "")
    .split(/\s?(?<!\\)\|\s?/)
    .map((cell) => cell.trim());

function cellsOfRow(row: Row, run: RunInfo): string[] {
  const met = row.met === undefined ? "—" : row.met ? "yes" : "**no**";
  return [row.benchmark, row.measured, row.reference, row.ratio, row.target, met, run.date, run.commit, run.machine].map(escapeCell);
}

/**
 * `doc` with the results table between its markers holding the latest figure of each
 * benchmark: a row of `rows` replaces the row of the same benchmark in place, a row not there
 * yet is added at the end; rows this run did not measure keep their earlier figures with their
 * own date, commit and machine. Nothing outside the table changes, nothing is appended.
 */
export function mergeResults(doc: string, rows: readonly Row[], run: RunInfo): string {
  const from = doc.indexOf(START);
  const to = doc.indexOf(END);
  if (from < 0 || to < from) throw new Error(`the results table's markers are missing: ${START} … ${END}`);
  const table = new Map<string, string[]>();
  for (const line of doc.slice(from + START.length, to).split("\n")) {
    if (!line.startsWith("|") || /^\|\s*-/.test(line)) continue;
    const cells = cellsOf(line);
    if (cells[0] !== HEADER[0]) table.set(cells[0]!, cells);
  }
  for (const row of rows) table.set(escapeCell(row.benchmark), cellsOfRow(row, run));
  const lines = [HEADER, HEADER.map(() => "---"), ...table.values()].map((cells) => `| ${cells.join(" | ")} |`);
  return `${doc.slice(0, from)}${START}\n${lines.join("\n")}\n${doc.slice(to)}`;
}

/** Writes this run's rows into docs/benchmarks.md's results table (mergeResults). */
export function writeResults(docPath: string, rows: readonly Row[], run: RunInfo): void {
  writeFileSync(docPath, mergeResults(readFileSync(docPath, "utf8"), rows, run));
}
