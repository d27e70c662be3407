// Turns a production bundle of deploy/build-bundle.sh into JavaScript:
//   node deploy/to-javascript.ts <bundle-dir>
// Node loads its TypeScript stripper (amaro, WebAssembly) the first time a process imports a
// .ts file, which costs the agent about 22 MB of RSS for the life of the process
// (docs/benchmarks.md, finding 9). So the bundle's types
// are stripped here, once, with that same stripper (`stripTypeScriptTypes`; the sources use
// erasable syntax only, so stripping is all it takes and lines and columns stay as in the .ts
// files), relative `.ts` import specifiers become `.js`, and each package.json's `exports`,
// `main` and `bin` name the .js files. The workspace itself keeps running from its .ts sources.
// (TypeScript 7's emit with `rewriteRelativeImportExtensions` would do the same, but needs the
// compiler, a development dependency, in the image's builder, which fetches production packages only.)
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { stripTypeScriptTypes } from "node:module";
import { dirname, join, resolve } from "node:path";

/** A relative specifier in `import … from`, `export … from`, `import "…"` or `import("…")`. */
const RELATIVE_IMPORT = /(\bfrom\s*|\bimport\s*\(?\s*)(["'])(\.{1,2}\/[^"'\n]*)\2/g;
/** Any relative path to a .ts file in quotes, wherever it is (`new URL(…)`, a computed import). */
const RELATIVE_TS_PATH = /(["'`])\.{1,2}\/[^"'`\n]*\.ts\1/;

/** The JavaScript of one TypeScript module: its types stripped, its relative `.ts` imports made `.js`. */
export function toJavaScript(typescript: string): string {
  const javascript = stripTypeScriptTypes(typescript, { mode: "strip" });
  return javascript.replace(RELATIVE_IMPORT, (whole, before: string, quote: string, specifier: string) =>
    specifier.endsWith(".ts") ? `${before}${quote}${specifier.slice(0, -".ts".length)}.js${quote}` : whole,
  );
}

/** The package directories of a bundle: its root (the app) and the workspace packages build-bundle.sh moved to packages/. */
function packagesOf(bundle: string): string[] {
  const moved = join(bundle, "packages");
  return [bundle, ...(existsSync(moved) ? readdirSync(moved).map((name) => join(moved, name)) : [])];
}

/** The files of a package, outside node_modules (its dependencies and, at the root, the whole install). */
function* filesOf(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "node_modules") continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* filesOf(path);
    else yield path;
  }
}

const isTypeScript = (path: string) => /\.[mc]?ts$/.test(path) && !/\.d\.[mc]?ts$/.test(path);

/** `./src/main.ts` → `./src/main.js`, in the string values of a package.json field (nested conditions included). */
function toJavaScriptEntries(value: unknown): unknown {
  if (typeof value === "string") return value.startsWith("./") && value.endsWith(".ts") ? `${value.slice(0, -".ts".length)}.js` : value;
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(Object.entries(value).map(([key, entry]) => [key, toJavaScriptEntries(entry)]));
}

/** The string values of a package.json field: the paths it names. */
const pathsOf = (value: unknown): string[] =>
  typeof value === "string" ? [value] : value !== null && typeof value === "object" ? Object.values(value).flatMap(pathsOf) : [];

/** Strips one package's .ts files into .js and points its package.json at them; returns what is wrong with the result. */
function convertPackage(dir: string): string[] {
  const problems: string[] = [];
  const converted: string[] = [];
  for (const file of filesOf(dir)) {
    if (!isTypeScript(file)) continue;
    if (!file.endsWith(".ts")) {
      problems.push(`${file}: only .ts files are converted`);
      continue;
    }
    const javascript = `${file.slice(0, -".ts".length)}.js`;
    if (existsSync(javascript)) {
      problems.push(`${javascript} exists beside ${file}`);
      continue;
    }
    writeFileSync(javascript, toJavaScript(readFileSync(file, "utf8")));
    rmSync(file);
    converted.push(javascript);
  }
  for (const file of converted) {
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(RELATIVE_IMPORT)) {
      if (!existsSync(resolve(dirname(file), match[3]!))) problems.push(`${file}: import ${match[3]} does not resolve to a file of the bundle`);
    }
    const leftover = RELATIVE_TS_PATH.exec(text);
    if (leftover) problems.push(`${file}: still refers to TypeScript (${leftover[0]})`);
  }
  const manifestPath = join(dir, "package.json");
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as Record<string, unknown>;
  for (const field of ["exports", "main", "bin"]) {
    if (!(field in manifest)) continue;
    manifest[field] = toJavaScriptEntries(manifest[field]);
    for (const path of pathsOf(manifest[field])) {
      if (!existsSync(join(dir, path))) problems.push(`${manifestPath}: ${field} names ${path}, which is not in the bundle`);
    }
  }
  // Replaced, not written over: pnpm deploy hard-links an injected package's files to the
  // workspace's, which writing in place would change as well.
  rmSync(manifestPath);
  writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
  return problems;
}

if (import.meta.main) {
  const [bundle] = process.argv.slice(2);
  if (!bundle) {
    console.error("usage: node deploy/to-javascript.ts <bundle-dir>");
    process.exit(2);
  }
  const problems = packagesOf(bundle).flatMap(convertPackage);
  if (problems.length > 0) {
    console.error(`${bundle} is not all JavaScript:\n${problems.join("\n")}`);
    process.exit(1);
  }
}
