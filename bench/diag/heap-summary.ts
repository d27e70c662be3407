// A diagnostic, not a benchmark: where the bytes of a V8 heap snapshot go (B7 writes one per agent
// process with `node bench/run.ts --only B7 --heap-snapshot-dir DIR`; `node --heapsnapshot-signal`
// and v8.writeHeapSnapshot() write the same format).
//
//   node --max-old-space-size=8192 bench/diag/heap-summary.ts FILE.heapsnapshot [TOP]
//
// Prints (1) self size and count by constructor (object nodes by their class name, others by
// node type: strings, code, arrays…), and (2) the TOP objects with the largest retained size —
// the bytes that would be freed with them — from the dominator tree (Cooper, Harvey and
// Kennedy's iterative algorithm over the strong edges; weak edges retain nothing), each with the
// edge names that lead to it from its dominator chain.
import { readFileSync } from "node:fs";

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) throw new Error("usage: heap-summary.ts FILE.heapsnapshot [TOP]");
const top = Number(topArg ?? 40);
const heap = JSON.parse(readFileSync(file, "utf8")) as Snapshot;
const { meta } = heap.snapshot;
const nodeFieldCount = meta.node_fields.length;
const edgeFieldCount = meta.edge_fields.length;
const TYPE = meta.node_fields.indexOf("type");
const NAME = meta.node_fields.indexOf("name");
const SELF = meta.node_fields.indexOf("self_size");
const EDGES = meta.node_fields.indexOf("edge_count");
const EDGE_TYPE = meta.edge_fields.indexOf("type");
const EDGE_NAME = meta.edge_fields.indexOf("name_or_index");
const EDGE_TO = meta.edge_fields.indexOf("to_node");
const nodeTypes = meta.node_types[0];
const edgeTypes = meta.edge_types[0];
const WEAK = edgeTypes.indexOf("weak");
const { nodes, edges, strings } = heap;
const count = nodes.length / nodeFieldCount;

// First edge of each node (edges are stored in node order).
const firstEdge = new Uint32Array(count + 1);
for (let n = 0, e = 0; n < count; n++) {
  firstEdge[n] = e;
  e += nodes[n * nodeFieldCount + EDGES]! * edgeFieldCount;
  firstEdge[n + 1] = e;
}
const target = (e: number) => edges[e + EDGE_TO]! / nodeFieldCount;
const strong = (e: number) => edges[e + EDGE_TYPE] !== WEAK;
const selfSize = (n: number) => nodes[n * nodeFieldCount + SELF]!;
const label = (n: number) => {
  const type = nodeTypes[nodes[n * nodeFieldCount + TYPE]!]!;
  return type === "object" || type === "closure" || type === "native" ? `${type} ${strings[nodes[n * nodeFieldCount + NAME]!]}` : type;
};

// (1) Self size by constructor.
const byLabel = new Map<string, { count: number; bytes: number }>();
for (let n = 0; n < count; n++) {
  const key = label(n);
  const row = byLabel.get(key) ?? { count: 0, bytes: 0 };
  row.count++;
  row.bytes += selfSize(n);
  byLabel.set(key, row);
}
const total = [...byLabel.values()].reduce((sum, r) => sum + r.bytes, 0);
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(2).padStart(8)} MB`;
console.log(`${file}: ${count} nodes, ${mb(total)} in all\n\nself size by constructor (top ${top}):`);
for (const [key, r] of [...byLabel].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top)) {
  console.log(`${mb(r.bytes)} ${String(r.count).padStart(9)} × ${(r.bytes / r.count).toFixed(0).padStart(6)} B  ${key.slice(0, 100)}`);
}

// (2) Dominator tree: post order of a depth-first walk from the root (node 0) over strong edges.
const postOrder = new Int32Array(count).fill(-1);
const order: number[] = [];
{
  const stack = [0];
  const cursor = new Uint32Array(count);
  const seen = new Uint8Array(count);
  seen[0] = 1;
  for (let n = 0; n < count; n++) cursor[n] = firstEdge[n]!;
  while (stack.length) {
    const n = stack[stack.length - 1]!;
    let pushed = false;
    while (cursor[n]! < firstEdge[n + 1]!) {
      const e = cursor[n]!;
      cursor[n] = e + edgeFieldCount;
      const to = target(e);
      if (strong(e) && !seen[to]) {
        seen[to] = 1;
        stack.push(to);
        pushed = true;
        break;
      }
    }
    if (!pushed) {
      stack.pop();
      postOrder[n] = order.length;
      order.push(n);
    }
  }
}
// Predecessors over strong edges, among reachable nodes.
const predCount = new Uint32Array(count + 1);
for (let n = 0; n < count; n++) {
  if (postOrder[n] === -1) continue;
  for (let e = firstEdge[n]!; e < firstEdge[n + 1]!; e += edgeFieldCount) if (strong(e)) predCount[target(e) + 1]!++;
}
for (let n = 0; n < count; n++) predCount[n + 1]! += predCount[n]!;
const preds = new Uint32Array(predCount[count]!);
{
  const fill = predCount.slice(0, count);
  for (let n = 0; n < count; n++) {
    if (postOrder[n] === -1) continue;
    for (let e = firstEdge[n]!; e < firstEdge[n + 1]!; e += edgeFieldCount) if (strong(e)) preds[fill[target(e)]!++] = n;
  }
}
const idom = new Int32Array(count).fill(-1);
idom[0] = 0;
const intersect = (a: number, b: number) => {
  while (a !== b) {
    while (postOrder[a]! < postOrder[b]!) a = idom[a]!;
    while (postOrder[b]! < postOrder[a]!) b = idom[b]!;
  }
  return a;
};
for (let changed = true; changed; ) {
  changed = false;
  for (let i = order.length - 2; i >= 0; i--) {
    const n = order[i]!;
    let dom = -1;
    for (let p = predCount[n]!; p < predCount[n + 1]!; p++) {
      const pred = preds[p]!;
      if (idom[pred] === -1) continue;
      dom = dom === -1 ? pred : intersect(pred, dom);
    }
    if (dom !== -1 && idom[n] !== dom) {
      idom[n] = dom;
      changed = true;
    }
  }
}
const retained = new Float64Array(count);
for (const n of order) retained[n]! += selfSize(n);
for (const n of order) if (n !== 0) retained[idom[n]!]! += retained[n]!;

/** The name of the edge from `from` to `to`, if one exists. */
const edgeName = (from: number, to: number) => {
  for (let e = firstEdge[from]!; e < firstEdge[from + 1]!; e += edgeFieldCount) {
    if (target(e) !== to) continue;
    const type = edgeTypes[edges[e + EDGE_TYPE]!];
    const name = edges[e + EDGE_NAME]!;
    return type === "element" || type === "hidden" ? `[${name}]` : strings[name];
  }
  return "?";
};
const path = (n: number) => {
  const parts: string[] = [];
  for (let at = n; at !== 0 && parts.length < 6; at = idom[at]!) parts.unshift(edgeName(idom[at]!, at));
  return parts.join(".");
};
console.log(`\nlargest retained sizes (top ${top}; nested objects are counted in their dominators too):`);
const candidates = order.filter((n) => n !== 0 && label(n) !== "synthetic").sort((a, b) => retained[b]! - retained[a]!);
for (const n of candidates.slice(0, top)) console.log(`${mb(retained[n]!)}  ${label(n).slice(0, 60).padEnd(60)}  via ${path(n).slice(0, 120)}`);
