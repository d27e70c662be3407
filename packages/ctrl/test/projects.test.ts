// Projects as their members meet them: a deployer of A is refused (naming the project, writing
// nothing) on a namespace or a region outside A's, whether A picks regions by name or by label;
// a viewer's status stream never carries B's objects, live changes and deletions included; a
// project's admin edits its roles but not its bounds; every served service has a permission
// table.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { OperatorService, Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { ProjectService } from "@flotilla/proto/ctrl/v1/project_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { ServerReflection } from "@flotilla/proto/grpc/reflection/v1/reflection_pb.js";
import { StatusService, type WatchStatusResponse } from "@flotilla/proto/ctrl/v1/status_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { rowCounts, startTestCtrl } from "@flotilla/testkit/ctrl";
import { PERMISSIONS } from "../src/authorization/permissions.ts";

const [{ db }] = await testDatabases();

const refusedNaming = (pattern: RegExp) => (error: unknown) => {
  const e = ConnectError.from(error);
  assert.equal(e.code, Code.PermissionDenied, e.rawMessage);
  assert.match(e.rawMessage, pattern);
  return true;
};

test("a deployer of A: PERMISSION_DENIED naming the project outside A's namespaces and regions, and nothing written", async (t) => {
  const ctrl = await startTestCtrl(db);
  t.after(() => ctrl.close());
  const regions = ctrl.client(RegionService);
  await regions.createRegion({ region: { name: "east", labels: { team: "a" } } });
  await regions.createRegion({ region: { name: "west" } });
  await ctrl.client(ProjectService).createProject({
    project: { name: "team-a", namespaces: ["a-*"], regions: { selector: "team=a" }, roles: [{ role: Role.DEPLOYER, operators: ["alice"] }] },
  });
  const { token } = await ctrl.client(OperatorService).createOperator({ name: "alice" });
  const alice = ctrl.client(DeploymentService, { token });
  const web = (namespace: string, region: string, project = "team-a") => ({
    id: "web",
    project,
    namespace,
    image: "nginx:1",
    regions: [{ region, replicas: 1 }],
  });

  const before = await rowCounts(ctrl.store);
  await assert.rejects(
    alice.createDeployment({ deployment: web("b-web", "east") }),
    refusedNaming(/project "team-a" does not include namespace "b-web" \(its namespaces: a-\*\)/),
  );
  await assert.rejects(
    alice.createDeployment({ deployment: web("a-web", "west") }),
    refusedNaming(/regions\[0\]\.region: project "team-a" does not include region "west"/),
  );
  await assert.rejects(alice.createDeployment({ deployment: web("a-web", "east", "default") }), refusedNaming(/in project "default".*has no role there/));
  await assert.rejects(alice.createDeployment({ deployment: web("a-web", "east", "") }), refusedNaming(/in project "default"/));
  assert.deepEqual(await rowCounts(ctrl.store), before, "nothing was written");

  // Allowed inside A; a region labelled into A later is A's once the catalog is read again (its age: 500 ms).
  await alice.createDeployment({ deployment: web("a-web", "east") });
  await regions.updateRegion({ region: { name: "west", labels: { team: "a" } } });
  await new Promise((resolve) => setTimeout(resolve, 600));
  const moved = await alice.updateDeployment({ deployment: { ...web("a-web", "east"), regions: [{ region: "west", replicas: 1 }] } });
  assert.equal(moved.deployment?.regions[0]?.region, "west");
  // A resource's project never changes (PERMISSION_DENIED first: the caller may not write in default).
  await assert.rejects(alice.updateDeployment({ deployment: web("a-web", "west", "default") }), refusedNaming(/in project "default"/));
});

test("a viewer's status stream carries its projects' objects only, live changes and deletions included", async (t) => {
  const ctrl = await startTestCtrl(db);
  t.after(() => ctrl.close());
  await ctrl.client(RegionService).createRegion({ region: { name: "east" } });
  const projects = ctrl.client(ProjectService);
  for (const team of ["a", "b"]) {
    await projects.createProject({
      project: {
        name: `team-${team}`,
        namespaces: [`${team}-*`],
        regions: { names: ["*"] },
        roles: [{ role: Role.VIEWER, groups: [], operators: [`${team}-viewer`] }],
      },
    });
  }
  const { token } = await ctrl.client(OperatorService).createOperator({ name: "a-viewer" });
  const deployments = ctrl.client(DeploymentService);
  const web = (team: string, image = "nginx:1") => ({
    id: `${team}-web`,
    project: `team-${team}`,
    namespace: `${team}-web`,
    image,
    regions: [{ region: "east", replicas: 1 }],
  });
  await deployments.createDeployment({ deployment: web("a") });
  await deployments.createDeployment({ deployment: web("b") });

  const abort = new AbortController();
  t.after(() => abort.abort());
  const seen: WatchStatusResponse[] = [];
  let synced!: () => void;
  const isSynced = new Promise<void>((resolve) => (synced = resolve));
  const stream = (async () => {
    try {
      for await (const message of ctrl.client(StatusService, { token }).watchStatus({}, { signal: abort.signal })) {
        seen.push(message);
        if (message.event.case === "synced") synced();
      }
    } catch {
      // aborted at the end
    }
  })();
  await isSynced;
  await deployments.updateDeployment({ deployment: web("b", "nginx:2") });
  await deployments.deleteDeployment({ id: "b-web" });
  await deployments.updateDeployment({ deployment: web("a", "nginx:2") });
  await deployments.deleteDeployment({ id: "a-web" });
  const deadline = Date.now() + 5000;
  while (!seen.some((m) => m.event.case === "object" && m.event.value.id === "a-web" && m.event.value.deleted)) {
    assert.ok(Date.now() < deadline, "A's deletion reaches A's viewer");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  abort.abort();
  await stream;
  const objects = seen.flatMap((m) => (m.event.case === "object" ? [m.event.value.id] : []));
  assert.ok(objects.includes("a-web"));
  assert.ok(!objects.includes("b-web"), `B's objects never reach A's viewer: ${objects.join(", ")}`);

  // Resumed from a cursor, the stream has sent nothing yet: A's deletion still reaches it (by
  // the project its audit event recorded), B's does not.
  const cursor = seen.find((m) => m.event.case === "synced")!.cursor;
  await deployments.createDeployment({ deployment: web("b") });
  await deployments.createDeployment({ deployment: web("a") });
  await deployments.deleteDeployment({ id: "b-web" });
  await deployments.deleteDeployment({ id: "a-web" });
  const resumed: string[] = [];
  const again = new AbortController();
  t.after(() => again.abort());
  const timeout = setTimeout(() => again.abort(), 5000);
  try {
    for await (const m of ctrl.client(StatusService, { token }).watchStatus({ afterCursor: cursor }, { signal: again.signal })) {
      if (m.event.case !== "object") continue;
      resumed.push(`${m.event.value.id}${m.event.value.deleted ? " deleted" : ""}`);
      if (m.event.value.id === "a-web" && m.event.value.deleted) break;
    }
  } finally {
    clearTimeout(timeout);
  }
  assert.ok(resumed.includes("a-web deleted"), `A's deletion reaches a resumed stream: ${resumed.join(", ")}`);
  assert.ok(!resumed.some((r) => r.startsWith("b-web")), `nothing of B's: ${resumed.join(", ")}`);
});

test("a project's admin edits its roles, not its namespaces or regions", async (t) => {
  const ctrl = await startTestCtrl(db);
  t.after(() => ctrl.close());
  const project = { name: "team-a", namespaces: ["a-*"], regions: { names: ["east"] }, roles: [{ role: Role.ADMIN, operators: ["lead"] }] };
  await ctrl.client(ProjectService).createProject({ project });
  const { token } = await ctrl.client(OperatorService).createOperator({ name: "lead" });
  const lead = ctrl.client(ProjectService, { token });
  const updated = await lead.updateProject({
    project: { ...project, description: "Team A", roles: [...project.roles, { role: Role.DEPLOYER, groups: ["team-a"] }] },
  });
  assert.equal(updated.project?.roles.length, 2);
  await assert.rejects(
    lead.updateProject({ project: { ...project, namespaces: ["*"] } }),
    refusedNaming(/only a fleet admin changes project "team-a"'s namespaces and regions/),
  );
  await assert.rejects(
    lead.createProject({ project: { ...project, name: "team-z" } }),
    refusedNaming(/CreateProject needs role admin; operator "lead" has no fleet-wide role/),
  );
  await assert.rejects(ctrl.client(ProjectService).createProject({ project: { ...project, name: "bad", namespaces: [] } }), (e) => {
    assert.equal(ConnectError.from(e).code, Code.InvalidArgument);
    assert.match(ConnectError.from(e).rawMessage, /project\.namespaces: at least one/);
    return true;
  });
});

test("every service ctrl serves but reflection and health has a permission table", async (t) => {
  const ctrl = await startTestCtrl(db);
  t.after(() => ctrl.close());
  const served: string[] = [];
  for await (const answer of ctrl.client(ServerReflection, { protocol: "grpc" }).serverReflectionInfo(
    (async function* () {
      yield { messageRequest: { case: "listServices" as const, value: "" } };
    })(),
  )) {
    if (answer.messageResponse.case === "listServicesResponse") served.push(...answer.messageResponse.value.service.map((s) => s.name));
  }
  assert.ok(served.length > 5);
  for (const name of served) {
    if (name.startsWith("grpc.")) continue;
    assert.ok(PERMISSIONS.has(name), `${name} has a permission table`);
  }
});
