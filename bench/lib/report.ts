// The results table and docs/benchmarks.md.
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

const START = "<!-- results:start (written by `node bench/run.ts`) -->";
const END = "<!-- results:end -->";

/** Replaces the generated part of docs/benchmarks.md (between the markers), keeping the rest. */
export function writeResults(docPath: string, results: string): void {
  let doc: string;
  try {
    doc = readFileSync(docPath, "utf8");
  } catch {
    doc = "# Benchmarks\n\n## Results\n\n";
  }
  const block = `${START}\n${results.trim()}\n${END}`;
  const from = doc.indexOf(START);
  const to = doc.indexOf(END);
  if (from >= 0 && to > from) doc = doc.slice(0, from) + block + doc.slice(to + END.length);
  else if (doc.includes("## Results\n")) doc = doc.replace("## Results\n", `## Results\n\n${block}\n`);
  else doc = `${doc.trimEnd()}\n\n## Results\n\n${block}\n`;
  writeFileSync(docPath, doc);
}
