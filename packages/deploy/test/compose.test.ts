// docker-compose.yml without docker: each service's command (its image's ENTRYPOINT from
// deploy/Dockerfile, then `command`) runs with its environment as a local process, in
// depends_on order, each started once its dependencies' health checks pass; MariaDB is the
// machine's (FLOTILLA_TEST_MYSQL_URL) instead of the mariadb service; service hostnames and
// ports become 127.0.0.1 and free ports. Then the docs' blocks marked `sh runnable stack=compose`
// (the API guide's `buf curl` flow, the streams page's lines) run as written.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import { parse } from "yaml";
import { testDatabases } from "@flotilla/testkit/databases";
import { runnableBlocks } from "@flotilla/testkit/docs";
import { passesHealthcheck, readDockerfile } from "./dockerfile.ts";
import { eventually, mainOf, REPO_ROOT, startProcess, type RunningProcess } from "./processes.ts";

interface Service {
  image?: string;
  build?: { context: string; dockerfile: string; target: string };
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
}

const ADMIN_TOKEN = "compose-test-admin-token";
const mysql = (await testDatabases()).find(({ db }) => db.name === "mysql")!;

/** Compose's interpolation of ${VAR}, ${VAR:?message} and ${VAR:-default}. */
function interpolate(text: string, env: Record<string, string>): string {
  return text.replace(/\$\{(\w+)(?::([?-])([^}]*))?\}/g, (_, name: string, operator?: string, argument?: string) => {
    const value = env[name];
    if (value) return value;
    if (operator === "?") throw new Error(`${name}: ${argument}`);
    return operator === "-" ? argument! : "";
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.once("error", reject);
  });
}

/** The services in an order where each comes after what it depends on. */
function startOrder(services: Record<string, Service>): string[] {
  const order: string[] = [];
  const visit = (name: string) => {
    if (order.includes(name)) return;
    for (const dependency of Object.keys(services[name]!.depends_on ?? {})) visit(dependency);
    order.push(name);
  };
  for (const name of Object.keys(services)) visit(name);
  return order;
}

test("docker-compose.yml's services run and the docs' buf curl lines work against them", { skip: mysql.skip, timeout: 240_000 }, async (t) => {
  const compose = parse(interpolate(readFileSync(join(REPO_ROOT, "docker-compose.yml"), "utf8"), { FLOTILLA_CTRL_ADMIN_TOKEN: ADMIN_TOKEN })) as {
    services: Record<string, Service>;
  };
  const { services } = compose;
  assert.deepEqual(Object.keys(services).sort(), ["agent", "ctrl", "k8s-emulator", "mariadb"]);
  const stages = readDockerfile();
  const root = mkdtempSync(join(tmpdir(), "flotilla-compose-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const { url: databaseUrl, drop } = await mysql.db.create();
  t.after(drop);

  // Every service's published container port, as 127.0.0.1 and a free port here.
  const addresses = new Map<string, string>();
  for (const [name, service] of Object.entries(services)) {
    for (const port of service.ports ?? []) {
      const containerPort = port.split(":").at(-1)!;
      addresses.set(`${name}:${containerPort}`, `127.0.0.1:${await freePort()}`);
    }
  }
  /** `text` with service addresses replaced by the local ones. */
  const localized = (text: string) => text.replace(/\b([\w-]+):(\d+)\b/g, (address) => addresses.get(address) ?? address);

  const running = new Map<string, { process: RunningProcess; healthy: () => boolean }>();
  t.after(() => Promise.all([...running.values()].reverse().map(({ process }) => process.stop())));
  for (const name of startOrder(services)) {
    const service = services[name]!;
    if (name === "mariadb") {
      assert.equal(service.image?.split(":")[0], "mariadb");
      continue;
    }
    for (const [dependency, { condition }] of Object.entries(service.depends_on ?? {})) {
      assert.equal(condition, "service_healthy", `${name} waits for ${dependency} to be healthy`);
      if (dependency !== "mariadb") await eventually(() => running.get(dependency)!.healthy(), `${dependency} to be healthy`);
    }
    const stage = stages.get(service.build!.target)!;
    assert.ok(stage?.entrypoint && stage.healthcheck, `${name}: deploy/Dockerfile has target ${service.build!.target} with an ENTRYPOINT and a HEALTHCHECK`);
    const data = join(root, name);
    mkdirSync(data);
    // Files mounted into the container: a copy with service addresses made local.
    const mounts = new Map<string, string>();
    for (const volume of service.volumes ?? []) {
      const [source, target] = volume.split(":");
      const copy = join(data, basename(source!));
      writeFileSync(copy, localized(readFileSync(join(REPO_ROOT, source!), "utf8")));
      mounts.set(target!, copy);
    }
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries({ ...stage.env, ...service.environment })) {
      const listen = /^0\.0\.0\.0:(\d+)$/.exec(value);
      if (listen) env[key] = addresses.get(`${name}:${listen[1]}`) ?? "127.0.0.1:0";
      else if (value.startsWith("mysql://")) {
        assert.equal(new URL(value).hostname, "mariadb", `${name} uses the mariadb service`);
        env[key] = databaseUrl;
      } else env[key] = localized(mounts.get(value) ?? value.replace("/var/lib/flotilla", data));
    }
    // The image's /app/main.mjs is the package's src/main.ts bundled (deploy/build-bundle.sh); here the sources run.
    const main = mainOf(service.build!.target as "ctrl" | "agent" | "k8s-emulator");
    const command = [...stage.entrypoint!, ...(service.command ?? [])].map((part) => (part === "/app/main.mjs" ? main : part));
    const started = startProcess(command, { env, cwd: data });
    running.set(name, { process: started, healthy: () => passesHealthcheck(stage.healthcheck!, env) });
  }
  for (const [name, { healthy }] of running) await eventually(healthy, `${name} to be healthy`);

  // The docs' compose blocks, as written, with CTRL pointing at this ctrl: the flow, then the streams.
  const blocks = runnableBlocks(REPO_ROOT).filter((block) => block.stack === "compose");
  const flow = blocks.find((block) => block.commands.some(({ command }) => command.includes("/CreateRegion")));
  const streams = blocks.find((block) => block.commands.some(({ command }) => command.includes("/WatchDeploymentChanges")));
  assert.ok(flow && streams && blocks.length === 2, "two blocks marked sh runnable stack=compose: the API guide's flow and the streams page's");
  const [setup, ...commands] = flow.commands.map(({ command }) => command);
  assert.match(setup!, /^CTRL=http:\/\/127\.0\.0\.1:7070;/);
  assert.equal(streams.commands[0]!.command, setup, "the streams block sets CTRL and AUTH as the flow does");
  const ctrlAddress = addresses.get("ctrl:7070")!;
  const prelude = setup!.replace("127.0.0.1:7070", ctrlAddress);
  const shell = (line: string) =>
    promisify(execFile)("sh", ["-c", `${prelude}\n${line}`], { cwd: REPO_ROOT, env: { ...process.env, ADMIN_TOKEN }, timeout: 60_000 });
  const emulator = `http://${addresses.get("k8s-emulator:7072")}`;
  const deployment = async () => {
    const response = await fetch(`${emulator}/apis/apps/v1/namespaces/demo/deployments/web`);
    return response.ok ? ((await response.json()) as { spec: { replicas: number; template: { spec: { containers: { image: string }[] } } } }) : undefined;
  };
  const ran: string[] = [];
  for (const line of commands) {
    const rpc = /\/ctrl\.v1\.\w+\/(\w+)/.exec(line)?.[1] ?? "ListServices";
    const { stdout } = await shell(line);
    ran.push(rpc);
    if (rpc === "ListServices") assert.match(stdout, /ctrl\.v1\.DeploymentService/);
    if (rpc === "CreateAgentToken") assert.match(stdout, /"token"/);
    if (rpc === "CreateDeployment") await eventually(async () => (await deployment())?.spec.replicas === 2, "the agent to apply web");
    if (rpc === "GetDeployment") assert.match(stdout, /"id": "web"/);
    if (rpc === "UpdateDeployment") {
      await eventually(async () => (await deployment())?.spec.template.spec.containers[0]?.image === "nginx:1.28", "the agent to apply the update");
    }
    if (rpc === "DeleteDeployment") await eventually(async () => (await deployment()) === undefined, "the agent to delete web");
  }
  assert.deepEqual(ran, ["ListServices", "CreateRegion", "CreateAgentToken", "CreateDeployment", "GetDeployment", "UpdateDeployment", "DeleteDeployment"]);

  // The streams: the snapshot ends; a watch follows live changes, so it runs until it printed
  // what shows it works — from the head, a bookmark; from version 0, the flow's changes up to the delete.
  for (const { command } of streams.commands.slice(1)) {
    if (command.includes("SyncDesiredState")) {
      assert.match((await shell(command)).stdout, /"complete": \{/, "the snapshot ends with its complete marker");
      continue;
    }
    const fromVersionZero = command.includes('"versionLastSeen":"0"');
    const child = execFile("sh", ["-c", `${prelude}\nexec ${command}`], { cwd: REPO_ROOT, env: { ...process.env, ADMIN_TOKEN } });
    let output = "";
    child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    try {
      const shows = fromVersionZero ? /"delete": \{/ : /"version": "\d+"/;
      await eventually(() => shows.test(output), `${command} to print ${shows}`).catch((error: Error) => {
        throw new Error(`${error.message}; it printed:\n${output}`);
      });
      if (fromVersionZero) assert.match(output, /"version": "1"/, "the watch from version 0 starts at the first change");
    } finally {
      child.kill();
    }
  }
});
