// `pnpm lint` (and so `pnpm test`): every package is used through its package.json exports.
// Fails on
// * a relative import (or `new URL(…, import.meta.url)`) that reaches into another package
//   (`../../store/src/…`, `../packages/agent/src/…`): import `@flotilla/<pkg>` instead;
// * an export pattern (`./*`) or an export whose file does not exist;
// * a generated protocol file of @flotilla/proto that is not exported (or the reverse).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

const ROOT = resolve(import.meta.dirname, "..");
/** Trees whose files are checked; each package and each top-level folder is a unit of its own. */
const TREES = ["packages", "migrations", "bench", "scripts"];
const SKIP = new Set(["node_modules", "gen", "fixtures"]);

const problems: string[] = [];

/** The unit a path belongs to: "packages/<name>" or its top-level folder. */
function unitOf(path: string): string {
  const parts = relative(ROOT, path).split(sep);
  return parts[0] === "packages" ? parts.slice(0, 2).join("/") : parts[0]!;
}

function* sourceFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(path);
    else if (entry.name.endsWith(".ts")) yield path;
  }
}

// import … from "x", export … from "x", import "x", import("x"), new URL("x", import.meta.url)
const SPECIFIERS = /(?:\bfrom\s*|\bimport\s*\(?\s*)(["'])(\.{1,2}\/[^"']*)\1|new URL\(\s*(["'])(\.{1,2}\/[^"']*)\3\s*,\s*import\.meta\.url/g;

for (const tree of TREES) {
  for (const file of sourceFiles(join(ROOT, tree))) {
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(SPECIFIERS)) {
      const specifier = match[2] ?? match[4]!;
      const target = resolve(dirname(file), specifier);
      const into = unitOf(target);
      if (into.startsWith("packages/") && into !== unitOf(file)) {
        const line = text.slice(0, match.index).split("\n").length;
        problems.push(
          `${relative(ROOT, file)}:${line}: ${specifier} reaches into ${into}; import @flotilla/${into.slice("packages/".length)} (its package.json exports) instead`,
        );
      }
    }
  }
}

for (const name of readdirSync(join(ROOT, "packages"))) {
  const manifestPath = join(ROOT, "packages", name, "package.json");
  if (!existsSync(manifestPath)) continue;
  const { exports = {} } = JSON.parse(readFileSync(manifestPath, "utf8")) as { exports?: Record<string, string> };
  for (const [subpath, file] of Object.entries(exports)) {
    if (subpath.includes("*") || file.includes("*")) problems.push(`packages/${name}/package.json: export ${subpath} is a pattern; list what is exported`);
    else if (!existsSync(join(ROOT, "packages", name, file))) problems.push(`packages/${name}/package.json: export ${subpath} → ${file} does not exist`);
  }
  if (name === "proto") {
    const generated = [...generatedModules(join(ROOT, "packages/proto/gen"))].map(
      (path) => `./${relative(join(ROOT, "packages/proto/gen"), path).split(sep).join("/")}`,
    );
    for (const module of generated)
      if (exports[module] !== `./gen/${module.slice(2)}`)
        problems.push(`packages/proto/package.json: generated ${module} is not exported as ./gen/${module.slice(2)}`);
  }
}

function* generatedModules(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* generatedModules(path);
    else if (entry.name.endsWith("_pb.js")) yield path;
  }
}

if (problems.length > 0) {
  console.error(`check-imports: ${problems.length} problem(s):\n${problems.map((p) => `  ${p}`).join("\n")}`);
  process.exit(1);
}
console.error("check-imports: every package is used through its exports");
