// The agent as its image runs it: the production bundle (deploy/build-bundle.sh: one JavaScript
// file built by esbuild, so no TypeScript stripper in the process), for the benchmarks that
// measure the agent's memory.
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Builds the agent's bundle into `dir` (which must not exist yet), and each of the given bench
 * scripts (paths relative to bench/) as a bundle of its own beside it, `<script>.mjs` (the agent's
 * code inlined, as in main.mjs; native addons from the bundle's node_modules). Returns the
 * bundle's directory.
 */
export function buildAgentBundle(dir: string, benchScripts: readonly string[]): string {
  execFileSync("deploy/build-bundle.sh", ["agent", dir, "--offline"], { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "inherit"] });
  for (const script of benchScripts) {
    const out = join(dir, script.replace(/\.ts$/, ".mjs"));
    execFileSync(process.execPath, ["deploy/bundle.ts", join("bench", script), out], { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "inherit"] });
  }
  return dir;
}
