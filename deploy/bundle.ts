// One process as one JavaScript file, with esbuild: every import (workspace packages and
// dependencies) inlined, so the process starts without resolving or type-stripping modules.
// esbuild rather than rolldown or tsdown: one native binary with no dependencies of its own,
// stable for years, and the bundler Vite and tsx build on.
//   node deploy/bundle.ts <entry.ts> <out-file.mjs>
import { build } from "esbuild";

const [entry, outfile] = process.argv.slice(2);
if (!entry || !outfile) {
  process.stderr.write("usage: node deploy/bundle.ts <entry.ts> <out-file.mjs>\n");
  process.exit(2);
}

await build({
  entryPoints: [entry],
  outfile,
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node24",
  minify: true,
  sourcemap: true,
  logLevel: "warning",
  // Dependencies written as CommonJS call require(): give the module one.
  banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
});
