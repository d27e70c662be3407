// One process as one JavaScript file, with esbuild: every import (workspace packages and
// dependencies) inlined, so the process starts without resolving or type-stripping modules.
// What the sources import only on demand (`await import()`: @kubernetes/client-node for exec and
// OIDC kubeconfigs, 4 MB) goes into chunks/ beside it and is loaded only if used: inlined, it
// cost the agent 12 MB of RSS at rest (its code and source map parsed at start).
// Packages with a native addon (a binding.gyp or a prebuilt .node file, e.g. better-sqlite3)
// stay external: they load from the bundle's node_modules, where they were built for its Node.
// esbuild rather than rolldown or tsdown: one native binary with no dependencies of its own,
// stable for years, and the bundler Vite and tsx build on; rolldown is younger (1.0 in 2025)
// and tsdown, built on it, targets libraries (declarations, several formats), not one file
// per process.
//   node deploy/bundle.ts <entry.ts> <out-file.mjs>
import { existsSync, readdirSync } from "node:fs";
import { builtinModules } from "node:module";
import { basename, dirname, join, sep } from "node:path";
import { build, type Plugin } from "esbuild";

/** The directory of the installed package a resolved file belongs to; undefined for a workspace package's sources. */
function packageRootOf(file: string, name: string): string | undefined {
  const marker = `${sep}node_modules${sep}${name.split("/").join(sep)}${sep}`;
  const at = file.lastIndexOf(marker);
  return at < 0 ? undefined : file.slice(0, at + marker.length - 1);
}

/** Whether a directory holds a native addon's build recipe or a built addon (outside its node_modules). */
export function hasNativeAddon(dir: string): boolean {
  return readdirSync(dir, { withFileTypes: true }).some((entry) => {
    if (entry.name === "binding.gyp" || entry.name.endsWith(".node")) return true;
    return entry.isDirectory() && entry.name !== "node_modules" && hasNativeAddon(join(dir, entry.name));
  });
}

/** Keeps packages with a native addon out of the bundle: a .node file cannot be inlined. */
const externalNativePackages: Plugin = {
  name: "external-native-packages",
  setup(bundler) {
    const native = new Map<string, boolean>();
    const builtins = new Set(builtinModules);
    bundler.onResolve({ filter: /^[^./]/ }, async (args) => {
      if (args.pluginData === "resolving" || args.path.startsWith("node:") || builtins.has(args.path)) return undefined;
      const name = args.path
        .split("/")
        .slice(0, args.path.startsWith("@") ? 2 : 1)
        .join("/");
      const resolved = await bundler.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: "resolving" });
      const root = resolved.errors.length === 0 ? packageRootOf(resolved.path, name) : undefined;
      if (root === undefined || !existsSync(root)) return undefined;
      if (!native.has(root)) native.set(root, hasNativeAddon(root));
      return native.get(root) ? { path: args.path, external: true } : undefined;
    });
  },
};

/** Bundles `entry` into `outfile` (its source map beside it, code loaded on demand in chunks/). */
async function bundle(entry: string, outfile: string): Promise<void> {
  await build({
    entryPoints: [entry],
    outdir: dirname(outfile),
    entryNames: basename(outfile, ".mjs"),
    chunkNames: "chunks/[name]-[hash]",
    outExtension: { ".js": ".mjs" },
    splitting: true,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node24",
    minify: true,
    sourcemap: true,
    // Stack traces need the mappings only; Node parses the whole map when the process loads (with
    // --enable-source-maps), and the sources in it would double its size.
    sourcesContent: false,
    logLevel: "warning",
    plugins: [externalNativePackages],
    // Dependencies written as CommonJS call require(): give the module one.
    banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
  });
}

if (import.meta.main) {
  const [entry, outfile] = process.argv.slice(2);
  if (!entry || !outfile) {
    process.stderr.write("usage: node deploy/bundle.ts <entry.ts> <out-file.mjs>\n");
    process.exit(2);
  }
  await bundle(entry, outfile);
}
