// Reads deploy/Dockerfile into its stages, so tests can run what an image would run.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./processes.ts";

export interface Stage {
  name: string;
  /** RUN commands, in order. */
  runs: string[];
  /** COPY --from=<stage> sources and destinations. */
  copies: { from: string; source: string; destination: string }[];
  /** ENV, including what the stage inherits from its base stage. */
  env: Record<string, string>;
  workdir?: string;
  user?: string;
  entrypoint?: string[];
  healthcheck?: string[];
}

export function readDockerfile(path = join(REPO_ROOT, "deploy/Dockerfile")): Map<string, Stage> {
  const stages = new Map<string, Stage>();
  let stage: Stage | undefined;
  // Continuation lines joined; comments and blank lines dropped.
  const instructions = readFileSync(path, "utf8")
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith("#"));
  for (const line of instructions) {
    const [, keyword, rest] = /^(\S+)\s+(.*)$/.exec(line)!;
    const instruction = keyword!.toUpperCase();
    if (instruction === "ARG" && !stage) continue;
    if (instruction === "FROM") {
      const [, base, name] = /^(\S+)\s+AS\s+(\S+)$/i.exec(rest!) ?? [];
      if (!name) throw new Error(`every stage needs a name: ${line}`);
      const parent = stages.get(base!);
      stage = { name, runs: [], copies: [], env: { ...parent?.env }, workdir: parent?.workdir, user: parent?.user };
      stages.set(name, stage);
      continue;
    }
    if (!stage) throw new Error(`instruction before FROM: ${line}`);
    if (instruction === "RUN") stage.runs.push(rest!);
    else if (instruction === "ENV") for (const [, key, value] of rest!.matchAll(/(\w+)=(\S+)/g)) stage.env[key!] = value!;
    else if (instruction === "WORKDIR") stage.workdir = rest;
    else if (instruction === "USER") stage.user = rest;
    else if (instruction === "ENTRYPOINT") stage.entrypoint = JSON.parse(rest!) as string[];
    else if (instruction === "HEALTHCHECK") stage.healthcheck = JSON.parse(/\bCMD\s+(\[.*\])$/.exec(rest!)![1]!) as string[];
    else if (instruction === "COPY") {
      const [, from, source, destination] = /^--from=(\S+)\s+(\S+)\s+(\S+)$/.exec(rest!) ?? [];
      if (from) stage.copies.push({ from, source: source!, destination: destination! });
    }
  }
  return stages;
}

/** Runs a HEALTHCHECK command (`node` is this Node binary) with `env`; true when it exits 0. */
export function passesHealthcheck(healthcheck: readonly string[], env: Record<string, string>): boolean {
  const [program, ...args] = healthcheck;
  try {
    execFileSync(program === "node" ? process.execPath : program!, args, { env, stdio: "ignore", timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
}
