// The documentation as tests read it: the code blocks marked runnable (```sh runnable
// stack=<name>) in README.md and docs/, split into the commands a shell runs, and the anchors
// of a page's headings as the docs site makes them.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

/** The stacks a runnable block can name: `pnpm start`, `pnpm start --regions canary,eu,us`, `pnpm start --tls`, docker-compose.yml's services. */
export type DocStack = "local" | "regions" | "tls" | "compose" | "prometheus" | "sso";

export interface DocCommand {
  /** The command as a shell runs it: continuation lines joined, trailing comments removed. */
  command: string;
  /** What it exits with: 1 when its comment says "(exits 1)", else 0. */
  exit: number;
}

export interface RunnableBlock {
  /** Relative to the repository: README.md, docs/guides/api.md. */
  file: string;
  /** The nearest heading above the block, as written (## Quick start with the CLI). */
  heading: string;
  stack: DocStack;
  commands: DocCommand[];
}

const FENCE = /^```(\S*)(.*)$/;
const RUNNABLE = /^\s*runnable\s+stack=(local|regions|tls|compose|prometheus|sso)\s*$/;

/**
 * The stack a block's opening fence names, undefined for a block that is not run. Anything
 * after the language other than `runnable stack=<stack>` after `sh` throws: a misspelt marker
 * would otherwise leave the block out of the tests without a word.
 */
export function runnableFence(line: string): DocStack | undefined {
  const [, language, info] = FENCE.exec(line.trim()) ?? [];
  if (info === undefined || info.trim() === "") return undefined;
  const runnable = RUNNABLE.exec(info);
  if (!runnable || language !== "sh")
    throw new Error(`a code block's marker is \`\`\`sh runnable stack=local|regions|tls|compose|prometheus|sso, not ${line.trim()}`);
  return runnable[1] as DocStack;
}

/** The commands of a block: a line that starts with a space continues the command before it. */
export function blockCommands(block: string): DocCommand[] {
  const commands: string[][] = [];
  for (const line of block.split("\n")) {
    if (line.trim() === "") continue;
    if (/^\s/.test(line) && commands.length > 0) commands.at(-1)!.push(line);
    else commands.push([line]);
  }
  return commands.map((lines) => ({
    command: lines.map((line) => line.replace(/\s+# .*$/, "")).join("\n"),
    exit: lines.some((line) => /# .*\(exits 1\)/.test(line)) ? 1 : 0,
  }));
}

/** Every runnable block of one Markdown text. */
export function runnableBlocksIn(file: string, markdown: string): RunnableBlock[] {
  const blocks: RunnableBlock[] = [];
  let heading = "";
  let open: { stack: DocStack; lines: string[] } | undefined;
  let fenced = false;
  for (const line of markdown.split("\n")) {
    const fence = FENCE.exec(line);
    if (fence && !fenced) {
      fenced = true;
      const stack = runnableFence(line);
      open = stack ? { stack, lines: [] } : undefined;
    } else if (fence && fenced) {
      fenced = false;
      if (open) blocks.push({ file, heading, stack: open.stack, commands: blockCommands(open.lines.join("\n")) });
      open = undefined;
    } else if (fenced) open?.lines.push(line);
    else if (/^#{1,6} /.test(line)) heading = line;
  }
  return blocks;
}

function* markdownFiles(root: string, dir: string): Generator<string> {
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    if (entry.name.startsWith(".") || entry.name === "node_modules") continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* markdownFiles(root, path);
    else if (entry.name.endsWith(".md")) yield path;
  }
}

/** Every runnable block of README.md and docs/, in file order. */
export function runnableBlocks(root: string): RunnableBlock[] {
  const files = ["README.md", ...[...markdownFiles(root, "docs")].sort()];
  return files.flatMap((file) => runnableBlocksIn(relative(root, join(root, file)), readFileSync(join(root, file), "utf8")));
}

/** The one runnable block under `heading` in `file`. */
export function runnableBlock(root: string, file: string, heading: string): RunnableBlock {
  const found = runnableBlocksIn(file, readFileSync(join(root, file), "utf8")).filter((b) => b.heading === heading);
  if (found.length !== 1) throw new Error(`${file}: expected one runnable block under "${heading}", found ${found.length}`);
  return found[0]!;
}

/** The anchor the docs site (VitePress) gives a heading: punctuation and spaces become one '-', lowercase. */
export function anchor(heading: string): string {
  return heading
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .replace(/[\s~`!@#$%^&*()\-_+=[\]{}|\\;:"'“”‘’<>,.?/]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .replace(/^(\d)/, "_$1")
    .toLowerCase();
}

/** The anchors of a page's headings (outside code blocks); `{#id}` after a heading names its own. */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const heading = fenced ? undefined : /^#{1,6} (.*?)(?:\s+\{#([^}]+)\})?\s*$/.exec(line);
    if (!heading) continue;
    const base = heading[2] ?? anchor(heading[1]!);
    let id = base;
    for (let n = 1; anchors.has(id); n++) id = `${base}-${n}`;
    anchors.add(id);
  }
  return anchors;
}
