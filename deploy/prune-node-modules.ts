// Leaves in a bundle's flat node_modules (deploy/build-bundle.sh) only what its processes load
// from there, since everything else is inlined in their files: the packages with a native addon
// and their dependencies, and the workspace packages, for the files they find through their
// package names (the console's assets, malloc-trim's addon).
//   node deploy/prune-node-modules.ts <bundle-dir>
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { hasNativeAddon } from "./bundle.ts";

/** The names of the packages at the top of a flat node_modules. */
function topLevelPackages(nodeModules: string): string[] {
  return readdirSync(nodeModules).flatMap((name) =>
    name.startsWith(".") ? [] : name.startsWith("@") ? readdirSync(join(nodeModules, name)).map((scoped) => `${name}/${scoped}`) : [name],
  );
}

/** `roots` and the packages they depend on, transitively (those hoisted to the top; nested ones go with their parent). */
function withDependencies(nodeModules: string, roots: string[]): Set<string> {
  const kept = new Set<string>();
  const visit = (name: string): void => {
    const dir = join(nodeModules, name);
    if (kept.has(name) || !existsSync(dir)) return;
    kept.add(name);
    const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as Record<string, Record<string, string> | undefined>;
    for (const dependency of Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies })) visit(dependency);
  };
  for (const root of roots) visit(root);
  return kept;
}

if (import.meta.main) {
  const [bundleDir] = process.argv.slice(2);
  if (!bundleDir) {
    process.stderr.write("usage: node deploy/prune-node-modules.ts <bundle-dir>\n");
    process.exit(2);
  }
  const nodeModules = join(bundleDir, "node_modules");
  const installed = topLevelPackages(nodeModules);
  const natives = withDependencies(
    nodeModules,
    installed.filter((name) => !name.startsWith("@flotilla/") && hasNativeAddon(join(nodeModules, name))),
  );
  for (const name of installed) {
    if (!name.startsWith("@flotilla/") && !natives.has(name)) rmSync(join(nodeModules, name), { recursive: true });
  }
  for (const scope of readdirSync(nodeModules)) {
    if (scope.startsWith("@") && readdirSync(join(nodeModules, scope)).length === 0) rmSync(join(nodeModules, scope), { recursive: true });
  }
}
