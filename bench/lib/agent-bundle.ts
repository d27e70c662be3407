// The agent as its image runs it: the production bundle (deploy/build-bundle.sh: JavaScript, so
// no TypeScript stripper in the process), for the benchmarks that measure the agent's memory.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { toJavaScript } from "../../deploy/to-javascript.ts";

const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * Builds the agent's bundle into `dir` (which must not exist yet) and writes the given bench
 * scripts (paths relative to bench/) into its root as JavaScript: there the bundle's package.json
 * is @flotilla/agent's, so they import the bundle's own files. Returns the bundle's directory.
 */
export function buildAgentBundle(dir: string, benchScripts: readonly string[]): string {
  execFileSync("deploy/build-bundle.sh", ["agent", dir, "--offline"], { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "inherit"] });
  for (const script of benchScripts) {
    const out = join(dir, script.replace(/\.ts$/, ".js"));
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, toJavaScript(readFileSync(join(REPO_ROOT, "bench", script), "utf8")));
  }
  return dir;
}
