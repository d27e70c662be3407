// Builds the console's static assets into dist/ (committed, as generated code is; `pnpm lint`
// checks that building again changes nothing): app.js bundled and minified by esbuild,
// app.css and index.html copied. Nothing is loaded from another origin at run time.
// --unminified writes app.js alone, not minified, to the file given (to profile the page with the
// sources' names: bench/diag/console-change.ts).
//   node packages/console/build.ts [--check | --unminified <file>]
import { readFileSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const ui = (file: string) => new URL(`./ui/${file}`, import.meta.url);
const dist = (file: string) => new URL(`./dist/${file}`, import.meta.url);

const unminified = process.argv.includes("--unminified") ? process.argv[process.argv.indexOf("--unminified") + 1] : undefined;
const bundle = await build({
  entryPoints: [ui("main.ts").pathname],
  bundle: true,
  minify: !unminified,
  format: "esm",
  target: "es2022",
  platform: "browser",
  write: false,
  legalComments: "none",
  logLevel: "warning",
});
const outputs: [string, string][] = [
  ["app.js", bundle.outputFiles[0]!.text],
  ["app.css", readFileSync(ui("app.css"), "utf8")],
  ["index.html", readFileSync(ui("index.html"), "utf8")],
];
if (unminified) {
  writeFileSync(unminified, outputs[0]![1]);
} else if (process.argv.includes("--check")) {
  const stale = outputs.filter(([file, text]) => {
    try {
      return readFileSync(dist(file), "utf8") !== text;
    } catch {
      return true;
    }
  });
  if (stale.length > 0) {
    process.stderr.write(`console assets out of date (${stale.map(([f]) => f).join(", ")}): run node packages/console/build.ts\n`);
    process.exit(1);
  }
  process.stdout.write("console assets are up to date\n");
} else {
  for (const [file, text] of outputs) writeFileSync(dist(file), text);
  // The gzipped size is what a browser downloads: the one to keep small.
  const size = (text: string) => `${text.length} B (${gzipSync(text).length} B gzipped)`;
  process.stdout.write(`console assets written: ${outputs.map(([f, t]) => `${f} ${size(t)}`).join(", ")}\n`);
}
