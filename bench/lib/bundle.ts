// A process as its image runs it: the production bundle (deploy/build-bundle.sh: one JavaScript
// file built by esbuild, so no TypeScript stripper in the process), for the benchmarks that
// measure a process's memory.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Builds the production bundle of `app` into `dir` (which must not exist yet), and each of the
 * given bench scripts (paths relative to bench/) as a bundle of its own beside it,
 * `<script>.mjs` (the app's code inlined, as in main.mjs; native addons from the bundle's
 * node_modules). Returns the bundle's directory.
 */
export function buildBundle(app: "agent" | "ctrl", dir: string, benchScripts: readonly string[]): string {
  execFileSync("deploy/build-bundle.sh", [app, dir, "--offline"], { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "inherit"] });
  for (const script of benchScripts) {
    const out = join(dir, script.replace(/\.ts$/, ".mjs"));
    execFileSync(process.execPath, ["deploy/bundle.ts", join("bench", script), out], { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "inherit"] });
  }
  return dir;
}
