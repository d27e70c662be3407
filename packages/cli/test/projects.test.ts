// Projects from the CLI, as teams use them: an admin applies Regions, Projects and resources
// (metadata.project) in one go; `operator create` without --role makes an account whose roles
// come from projects; its apply in another project, or outside its project's namespaces, is
// refused naming the project and writes nothing; its get, get projects, audit and version show only
// its own; get -o yaml of a resource applies back unchanged.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, rowCounts, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { runCli } from "./cli-harness.ts";

const [{ db }] = await testDatabases();

const doc = (kind: string, name: string, body: string) => `apiVersion: flotilla.dev/v1\nkind: ${kind}\nmetadata:\n  name: ${name}\n${body}---\n`;
const project = (team: string, region: string, extraRole = "") =>
  doc(
    "Project",
    `team-${team}`,
    `spec:\n  description: Team ${team.toUpperCase()}\n  namespaces: ["${team}-*"]\n  regions: { names: [${region}] }\n  roles:\n    - role: deployer\n      operators: [${team === "a" ? "alice" : "bob"}]\n      groups: [team-${team}]\n${extraRole}`,
  );
const deployment = (name: string, team: string, namespace: string, region: string) =>
  doc("Deployment", name, `  project: team-${team}\nspec:\n  namespace: ${namespace}\n  image: nginx:1.27\n  regions: [{ region: ${region}, replicas: 1 }]\n`);

describe("flotilla and projects", () => {
  let ctrl: TestCtrl;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let alice: NodeJS.ProcessEnv;
  const flotilla = (args: string[], extraEnv: NodeJS.ProcessEnv = {}) => runCli({ ...env, ...extraEnv }, args);
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  before(async () => {
    ctrl = await startTestCtrl(db);
    dir = mkdtempSync(join(tmpdir(), "flotilla-projects-"));
    writeFileSync(join(dir, "admin.token"), `${ADMIN_TOKEN}\n`);
    env = { PATH: process.env.PATH, FLOTILLA_CONFIG: join(dir, "config.yaml") };
    const set = await flotilla(["context", "set", "test", "--server", ctrl.url, "--token-file", join(dir, "admin.token")]);
    assert.equal(set.code, 0, set.stderr);
  });
  after(async () => {
    await ctrl?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("an admin applies regions, projects and their resources in one go; again, nothing changes", async () => {
    const teams = file(
      "teams.yaml",
      doc("Region", "east", "") +
        doc("Region", "west", "") +
        project("a", "east") +
        project("b", "west") +
        deployment("a-web", "a", "a-web", "east") +
        deployment("b-web", "b", "b-web", "west"),
    );
    const applied = await flotilla(["apply", "-f", teams]);
    assert.equal(applied.code, 0, applied.stderr);
    assert.equal(
      applied.stdout,
      "region/east created\nregion/west created\nproject/team-a created\nproject/team-b created\ndeployment/a-web created\ndeployment/b-web created\n",
    );
    const again = await flotilla(["apply", "-f", teams]);
    assert.match(again.stdout, /project\/team-a unchanged\n.*deployment\/a-web unchanged\n/s);
    const projects = await flotilla(["get", "projects"]);
    assert.match(
      projects.stdout,
      /^NAME +NAMESPACES +REGIONS +ROLES +AGE\ndefault +\* +\* +<none> +\S+\nteam-a +a-\* +east +deployer: alice group:team-a +\S+\n/,
    );
  });

  test("operator create without --role: no fleet-wide role; its roles come from projects", async () => {
    const created = await flotilla(["operator", "create", "alice"]);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stderr, /operator\/alice created with no fleet-wide role \(projects grant its roles\)/);
    alice = { FLOTILLA_TOKEN_FILE: file("alice.token", created.stdout.trim()) };
    const version = await flotilla(["version"], alice);
    assert.match(version.stdout, /as alice\)\nproject team-a: role deployer\n$/);
    const operators = await flotilla(["get", "operators", "-o", "json"]);
    assert.equal(JSON.parse(operators.stdout).find((o: { name: string }) => o.name === "alice").role, "unspecified");
  });

  test("a deployer of team-a: refused naming the project in team-b and outside its namespaces; nothing written", async () => {
    const before = await rowCounts(ctrl.store);
    const other = await flotilla(["apply", "-f", file("other.yaml", deployment("b-api", "b", "b-api", "west"))], alice);
    assert.equal(other.code, 1);
    assert.match(
      other.stderr,
      /deployment\/b-api: PERMISSION_DENIED: CreateDeployment needs role deployer in project "team-b" \(.*\); operator "alice" has no role there/,
    );
    const outside = await flotilla(["apply", "-f", file("outside.yaml", deployment("a-api", "a", "b-api", "east"))], alice);
    assert.equal(outside.code, 1);
    assert.match(
      outside.stderr,
      /deployment\/a-api: PERMISSION_DENIED: deployment\.namespace: project "team-a" does not include namespace "b-api" \(its namespaces: a-\*\)/,
    );
    const theirs = await flotilla(["apply", "-f", file("theirs.yaml", deployment("b-web", "a", "a-web", "east"))], alice);
    assert.equal(theirs.code, 1);
    assert.match(theirs.stderr, /PERMISSION_DENIED: .* in project "team-b" \(deployment "b-web" belongs to project "team-b"\)/);
    assert.deepEqual(await rowCounts(ctrl.store), before, "nothing was written");
    const own = await flotilla(["apply", "-f", file("own.yaml", deployment("a-api", "a", "a-api", "east"))], alice);
    assert.equal(own.code, 0, own.stderr);
    assert.equal(own.stdout, "deployment/a-api created\n");
  });

  test("its lists show only its project; get -o yaml applies back unchanged", async () => {
    const listed = await flotilla(["get", "deployments", "-o", "json"], alice);
    assert.deepEqual(
      JSON.parse(listed.stdout).items.map((d: { metadata: { name: string; project: string } }) => [d.metadata.name, d.metadata.project]),
      [
        ["a-api", "team-a"],
        ["a-web", "team-a"],
      ],
    );
    const projects = await flotilla(["get", "projects", "-o", "yaml"], alice);
    assert.deepEqual(
      parse(projects.stdout).items.map((p: { metadata: { name: string } }) => p.metadata.name),
      ["team-a"],
    );
    const refused = await flotilla(["get", "deploy", "b-web"], alice);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /PERMISSION_DENIED: GetDeployment needs role viewer in project "team-b"/);
    const audit = JSON.parse((await flotilla(["audit", "-o", "json"], alice)).stdout) as { object: string; project: string }[];
    assert.ok(audit.length > 0 && audit.every((e) => e.project === "team-a"), `only team-a's events: ${JSON.stringify(audit)}`);
    const otherAudit = await flotilla(["audit", "--project", "team-b"], alice);
    assert.equal(otherAudit.code, 1);
    assert.match(otherAudit.stderr, /PERMISSION_DENIED: ListAuditEvents needs role viewer in project "team-b"/);
    const yaml = await flotilla(["get", "deploy", "a-web", "-o", "yaml"], alice);
    assert.equal(parse(yaml.stdout).metadata.project, "team-a");
    const back = await flotilla(["apply", "-f", file("back.yaml", yaml.stdout)], alice);
    assert.equal(back.code, 0, back.stderr);
    assert.equal(back.stdout, "deployment/a-web unchanged\n");
  });

  test("a project's diff shows a role granted; a spec that names its project is refused before anything is sent", async () => {
    const changed = file("team-a.yaml", project("a", "east", "    - role: viewer\n      groups: [auditors]\n"));
    const diff = await flotilla(["diff", "-f", changed]);
    assert.match(diff.stdout, /~ project\/team-a\n {4}\+ roles\[1\]\.groups\[0\]: "auditors"\n {4}\+ roles\[1\]\.role: "viewer"\n/);
    const bad = await flotilla(["apply", "-f", file("bad.yaml", doc("Deployment", "x", "spec:\n  project: team-a\n  namespace: a-x\n  image: nginx:1\n"))]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /bad\.yaml#1: spec\.project: the project is metadata\.project/);
    const badRole = await flotilla(["apply", "-f", file("bad-role.yaml", project("c", "east").replace("role: deployer", "role: owner"))]);
    assert.match(badRole.stderr, /spec\.roles\[0\]\.role: must be viewer, deployer, admin, not "owner"/);
  });
});
