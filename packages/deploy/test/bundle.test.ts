// The production bundles of deploy/Dockerfile, built with the Dockerfile's own commands
// (deploy/build-bundle.sh, offline from the local pnpm store) and started with each image's
// ENTRYPOINT, ENV and HEALTHCHECK outside the workspace: what the images contain runs, with no
// container engine needed. Each process is one JavaScript file (esbuild, deploy/bundle.ts) beside
// the node_modules its native addons load from.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { AGENT_ENVIRONMENT, AGENT_NODE_FLAGS } from "@flotilla/agent/node-flags";
import { CTRL_ENVIRONMENT, CTRL_NODE_FLAGS } from "@flotilla/ctrl/node-flags";
import { passesHealthcheck, readDockerfile, type Stage } from "./dockerfile.ts";
import { eventually, operatorClients, REPO_ROOT, startProcess, type RunningProcess } from "./processes.ts";

const ADMIN_TOKEN = "bundle-test-admin-token";

/** The workspace packages' package.json files and sources, and the migrations (each file's path and content). */
function workspaceFiles(): Map<string, string> {
  const files = new Map<string, string>();
  const collect = (path: string): void => {
    if (!existsSync(path)) return;
    if (!statSync(path).isDirectory()) files.set(relative(REPO_ROOT, path), readFileSync(path, "utf8"));
    else for (const name of readdirSync(path)) collect(join(path, name));
  };
  for (const name of readdirSync(join(REPO_ROOT, "packages"))) {
    for (const part of ["package.json", "src"]) collect(join(REPO_ROOT, "packages", name, part));
  }
  collect(join(REPO_ROOT, "migrations"));
  return files;
}

/** The names of the packages installed in `nodeModules` (a flat, hoisted node_modules). */
function installedPackages(nodeModules: string): string[] {
  return readdirSync(nodeModules).flatMap((name) =>
    name.startsWith(".") ? [] : name.startsWith("@") ? readdirSync(join(nodeModules, name)).map((scoped) => `${name}/${scoped}`) : [name],
  );
}

/** The TypeScript files (declarations included) under `dir`, outside node_modules. */
function typeScriptFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name === "node_modules") return [];
    const path = join(dir, entry.name);
    return entry.isDirectory() ? typeScriptFiles(path) : /\.[mc]?ts$/.test(entry.name) ? [path] : [];
  });
}

test("the images' bundles start ctrl, the agent, the emulator and the CLI from the bundle alone", { timeout: 240_000 }, async (t) => {
  const stages = readDockerfile();
  const runtime = stages.get("runtime")!;
  assert.match(runtime.user ?? "", /^[1-9]\d*:[1-9]\d*$/, "the runtime user is numeric and not root");
  assert.equal(runtime.workdir, "/var/lib/flotilla");
  assert.deepEqual(
    stages.get("agent")!.entrypoint,
    ["node", "--enable-source-maps", ...AGENT_NODE_FLAGS, "/app/main.mjs"],
    "the agent image runs with AGENT_NODE_FLAGS",
  );
  assert.deepEqual(
    stages.get("ctrl")!.entrypoint,
    ["node", "--enable-source-maps", ...CTRL_NODE_FLAGS, "/app/main.mjs"],
    "the ctrl image runs with CTRL_NODE_FLAGS",
  );
  for (const [name, value] of Object.entries(AGENT_ENVIRONMENT))
    assert.equal(stages.get("agent")!.env[name], value, `the agent image sets ${name} (AGENT_ENVIRONMENT)`);
  for (const [name, value] of Object.entries(CTRL_ENVIRONMENT))
    assert.equal(stages.get("ctrl")!.env[name], value, `the ctrl image sets ${name} (CTRL_ENVIRONMENT)`);

  const root = mkdtempSync(join(tmpdir(), "flotilla-bundle-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  assert.ok(relative(REPO_ROOT, root).startsWith(".."), "the bundle lives outside the workspace, out of reach of its node_modules");
  const out = join(root, "out");
  const data = join(root, "var-lib-flotilla");
  mkdirSync(data);

  // The pnpm the image gets through corepack: package.json's packageManager.
  const { packageManager } = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { packageManager: string };
  assert.equal(`pnpm@${execFileSync("pnpm", ["--version"], { encoding: "utf8" }).trim()}`, packageManager, "the bundles are built with the pinned pnpm");

  // The builder stage's bundle command, with /out moved to the temporary directory.
  const build = stages.get("builder")!.runs.find((run) => run.includes("deploy/build-bundle.sh"));
  assert.ok(build, "the builder stage runs deploy/build-bundle.sh");
  const workspaceBefore = workspaceFiles();
  execFileSync("sh", ["-c", build.replaceAll("/out/", `${out}/`)], { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "pipe"] });
  // pnpm deploy hard-links the workspace packages' files into the bundle: converting them must not change the sources.
  const workspaceAfter = workspaceFiles();
  assert.deepEqual(
    [...workspaceBefore].filter(([path, text]) => workspaceAfter.get(path) !== text).map(([path]) => path),
    [],
    "building the bundles leaves the workspace's packages as they were",
  );

  /** The image path `path` inside this test's directories. */
  const local = (path: string) => path.replace(/^\/app(?=\/|$)/, "").replace(/^\/var\/lib\/flotilla/, data);
  const processes: RunningProcess[] = [];
  t.after(() => Promise.all(processes.map((p) => p.stop())));
  /** Starts a target's ENTRYPOINT with its ENV (paths mapped) plus `env`; returns the URL it prints. */
  async function start(target: string, env: Record<string, string>, ready: RegExp): Promise<{ process: RunningProcess; stage: Stage; url: string }> {
    const stage = stages.get(target)!;
    const copy = stage.copies.find((c) => c.destination === "/app");
    assert.deepEqual(copy, { from: "builder", source: `/out/${target}`, destination: "/app" }, `${target} copies its bundle to /app`);
    const bundle = join(out, target);
    const mapped = (value: string) => (value.startsWith("/app") ? join(bundle, local(value)) : local(value));
    const stageEnv = Object.fromEntries(Object.entries(stage.env).map(([key, value]) => [key, value.replace(/\/var\/lib\/flotilla/, data)]));
    // With type stripping off, importing a .ts file fails (ERR_UNKNOWN_FILE_EXTENSION): nothing the processes load is TypeScript.
    const started = startProcess(stage.entrypoint!.map(mapped), {
      env: { ...stageEnv, ...env, NODE_OPTIONS: "--no-experimental-strip-types" },
      cwd: local(stage.workdir!),
    });
    processes.push(started);
    const [, url] = await started.waitFor(ready);
    return { process: started, stage, url: url! };
  }
  const healthy = (stage: Stage, env: Record<string, string>) => passesHealthcheck(stage.healthcheck!, { ...stage.env, ...env });
  const hostPort = (url: string) => new URL(url).host;

  // One JavaScript file per process (ctrl's bundle adds the migrate and pki commands), each with
  // its source map, beside a node_modules of what it leaves out: packages with a native addon and
  // workspace packages (for their files); no test-only or application workspace package. And
  // JavaScript only: a process that loads a .ts file loads Node's type stripper (about 22 MB of
  // the agent's RSS).
  // (chunks/ holds what the sources import only on demand, loaded only if used.)
  const processFiles = (...names: string[]) => [...names.flatMap((name) => [`${name}.mjs`, `${name}.mjs.map`]), "node_modules"].sort();
  const topLevel = (target: string) =>
    readdirSync(join(out, target))
      .filter((name) => name !== "chunks")
      .sort();
  assert.deepEqual(topLevel("ctrl"), processFiles("main", "migrate", "pki"), "ctrl's bundle is ctrl, migrate and pki");
  for (const target of ["agent", "k8s-emulator"]) assert.deepEqual(topLevel(target), processFiles("main"), `${target} is one file (and its on-demand chunks)`);
  for (const target of ["ctrl", "agent", "k8s-emulator"]) {
    assert.deepEqual(typeScriptFiles(join(out, target)), [], `${target}'s bundle has no TypeScript file outside node_modules`);
    assert.deepEqual(
      installedPackages(join(out, target, "node_modules")).filter((name) => /^@flotilla\/(testkit|ctrl|k8s-emulator|cli)$/.test(name)),
      [],
      `${target}'s bundle has no test-only or application workspace package`,
    );
  }
  const thirdParty = (target: string) => installedPackages(join(out, target, "node_modules")).filter((name) => !name.startsWith("@flotilla/"));
  assert.deepEqual(thirdParty("agent"), [], "the agent's bundle inlines every dependency");
  assert.deepEqual(thirdParty("k8s-emulator"), [], "the emulator's bundle inlines every dependency");
  assert.ok(thirdParty("ctrl").includes("better-sqlite3"), "ctrl's bundle installs better-sqlite3 (a native addon)");
  for (const inlined of ["kysely", "mysql2", "prom-client", "@connectrpc/connect", "typescript"])
    assert.ok(!thirdParty("ctrl").includes(inlined), `ctrl's bundle inlines ${inlined} or leaves it out`);
  assert.match(readFileSync(join(out, "ctrl/main.mjs"), "utf8"), /from"better-sqlite3"/, "better-sqlite3 (a native addon) stays out of ctrl's bundle");

  // The agent's C-heap trimming (@flotilla/malloc-trim, inlined in the bundle) loads its addon
  // from the package in node_modules, built there for the Node that builds the bundle: the
  // image's runtime stage has no compiler.
  if (process.platform === "linux") {
    const fromBundle = createRequire(join(out, "agent/main.mjs"));
    const addon = fromBundle(join(dirname(fromBundle.resolve("@flotilla/malloc-trim/package.json")), "native/malloc-trim.node")) as { mallocTrim?: unknown };
    assert.equal(typeof addon.mallocTrim, "function", "the agent's bundle carries the built malloc-trim addon");
  }

  const kubeconfig = join(root, "kubeconfig");
  const emulator = await start(
    "k8s-emulator",
    { FLOTILLA_EMULATOR_LISTEN: "127.0.0.1:0", FLOTILLA_EMULATOR_KUBECONFIG_OUT: kubeconfig },
    /listening on (http:\/\/\S+)/,
  );
  assert.ok(healthy(emulator.stage, { FLOTILLA_EMULATOR_LISTEN: hostPort(emulator.url) }), "the emulator's HEALTHCHECK passes");

  // ctrl on the image's default database URL (SQLite in the data directory).
  const ctrl = await start("ctrl", { FLOTILLA_CTRL_LISTEN: "127.0.0.1:0", FLOTILLA_CTRL_ADMIN_TOKEN: ADMIN_TOKEN }, /serving on (http:\/\/\S+)/);
  assert.ok(existsSync(join(data, "flotilla.db")), "ctrl keeps its SQLite database in /var/lib/flotilla");
  assert.ok((await fetch(`${ctrl.url}/healthz`)).ok, "ctrl answers /healthz");
  assert.ok(healthy(ctrl.stage, { FLOTILLA_CTRL_LISTEN: hostPort(ctrl.url) }), "ctrl's HEALTHCHECK passes");
  const { regions, deployments } = operatorClients(ctrl.url, ADMIN_TOKEN);
  await regions.createRegion({ region: { name: "local" } });
  const { token } = await regions.createAgentToken({ region: "local" });
  await deployments.createDeployment({
    deployment: { id: "web", namespace: "demo", image: "nginx:1.27", port: 80, regions: [{ region: "local", replicas: 2 }] },
  });

  // The agent on the kubernetes target, against the emulator.
  const agent = await start(
    "agent",
    {
      FLOTILLA_AGENT_LISTEN: "127.0.0.1:0",
      FLOTILLA_AGENT_CTRL_URL: ctrl.url,
      FLOTILLA_AGENT_REGION: "local",
      FLOTILLA_AGENT_TOKEN: token,
      FLOTILLA_AGENT_KUBECONFIG: kubeconfig,
    },
    /health and metrics on (http:\/\/[^\s,]+)/,
  );
  assert.ok(healthy(agent.stage, { FLOTILLA_AGENT_LISTEN: hostPort(agent.url) }), "the agent's HEALTHCHECK passes");
  const applied = await eventually(async () => {
    const response = await fetch(`${emulator.url}/apis/apps/v1/namespaces/demo/deployments/web`);
    return response.ok && ((await response.json()) as { spec: { replicas: number } });
  }, "the agent to apply the Deployment");
  assert.equal(applied.spec.replicas, 2);
  await eventually(async () => (await fetch(`${agent.url}/readyz`)).ok, "the agent to be ready");
  assert.doesNotMatch(agent.process.output() + ctrl.process.output(), /Error:|\n\s+at /, "no stack trace in the logs");

  // The migrations are inlined in ctrl's bundle (ctrl applied them to its new database above); its migrate command applies them alone.
  const migrated = execFileSync(
    process.execPath,
    ["--no-experimental-strip-types", join(out, "ctrl/migrate.mjs"), "--database-url", `sqlite:${join(root, "migrate.db")}`],
    {
      encoding: "utf8",
    },
  );
  assert.match(migrated, /^applied: 0001_desired_state, /, "the bundled migrate command applies every migration");
  assert.match(
    execFileSync(process.execPath, ["--no-experimental-strip-types", join(out, "ctrl/pki.mjs"), "--help"], { encoding: "utf8" }),
    /^usage: /,
    "the bundled pki command runs",
  );

  // The CLI the ctrl image carries, from its bundle, against the bundled ctrl.
  assert.deepEqual(
    stages.get("ctrl")!.copies.filter((c) => c.source === "/out/cli"),
    [{ from: "builder", source: "/out/cli", destination: "/cli" }],
    "the ctrl image carries the CLI",
  );
  assert.deepEqual(readdirSync(join(out, "cli")).sort(), ["flotilla.mjs", "flotilla.mjs.map"], "the CLI is one file (and its source map)");
  const cli = execFileSync(process.execPath, [join(out, "cli/flotilla.mjs"), "get", "deployments", "--server", ctrl.url], {
    cwd: root,
    env: { PATH: process.env.PATH, FLOTILLA_TOKEN: ADMIN_TOKEN, FLOTILLA_CONFIG: join(root, "config.yaml") },
    encoding: "utf8",
  });
  assert.match(cli, /^web +demo +nginx:1\.27 +1 +local:/m, "the bundled CLI lists the deployment");
});
