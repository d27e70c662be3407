// Operator accounts and roles: every RPC against every role (refusals name the role needed);
// a viewer's write writes nothing; revoking an operator token is refused on a second replica
// within 1 s; revisions, rollback and the audit trail record the actor; the status stream
// sends a snapshot, SYNCED, then changes, and resumes from a cursor.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { HistoryService } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { OperatorService, Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import { StatusService, type WatchStatusResponse } from "@flotilla/proto/ctrl/v1/status_pb.js";
import { Store } from "@flotilla/store";
import { startCtrl, type Ctrl } from "../src/server.ts";
import { permissionOf } from "../src/authorization/permissions.ts";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, rowCounts, startTestCtrl, testLogger, type TestCtrl } from "@flotilla/testkit/ctrl";

const SERVICES: DescService[] = [
  DeploymentService,
  SentinelService,
  NetworkPolicyService,
  RegionService,
  OperatorService,
  HistoryService,
  StatusService,
  ClusterService,
];

function clientOf<S extends DescService>(url: string, service: S, token: string): Client<S> {
  const transport = createConnectTransport({
    baseUrl: url,
    httpVersion: "1.1",
    interceptors: [
      (next) => (req) => {
        req.header.set("authorization", `Bearer ${token}`);
        return next(req);
      },
    ],
  });
  return createClient(service, transport);
}

/** The code a call ends with; a stream's first message is enough to know it was admitted. */
async function outcome(client: Client<DescService>, method: DescService["methods"][number]): Promise<Code | "ok"> {
  const call = (client as unknown as Record<string, (req: object, opts: object) => unknown>)[method.localName]!;
  const signal = AbortSignal.timeout(3000);
  try {
    const result = call({}, { signal });
    if (method.methodKind === "server_streaming") {
      for await (const _ of result as AsyncIterable<unknown>) break;
    } else await result;
    return "ok";
  } catch (error) {
    return ConnectError.from(error).code;
  }
}

for (const { db, skip } of await testDatabases()) {
  describe(`operators and roles (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    let tokens: Record<"viewer" | "deployer" | "admin", string>;
    before(async () => {
      t = await startTestCtrl(db);
      await t.client(RegionService).createRegion({ region: { name: "east" } });
      const operators = t.client(OperatorService);
      tokens = {
        viewer: (await operators.createOperator({ name: "vera", role: Role.VIEWER })).token,
        deployer: (await operators.createOperator({ name: "dan", role: Role.DEPLOYER })).token,
        admin: (await operators.createOperator({ name: "ada", role: Role.ADMIN })).token,
      };
    });
    after(() => t.close());

    test("every RPC against every role: allowed ones get past authorization, refused ones name the role needed", async () => {
      const rank = { viewer: Role.VIEWER, deployer: Role.DEPLOYER, admin: Role.ADMIN };
      for (const service of SERVICES) {
        for (const method of service.methods) {
          for (const [role, token] of Object.entries(tokens) as ["viewer" | "deployer" | "admin", string][]) {
            const needed = permissionOf(service.typeName, method.localName)!;
            const got = await outcome(clientOf(t.url, service, token) as Client<DescService>, method);
            const label = `${role} → ${service.name}.${method.name}`;
            if (needed.scope === "agent" || rank[role] < needed.role) {
              assert.equal(got, Code.PermissionDenied, label);
            } else {
              // Past authorization: an empty request may still be invalid, but never refused for the role.
              assert.notEqual(got, Code.PermissionDenied, label);
              assert.notEqual(got, Code.Unauthenticated, label);
            }
          }
        }
      }
    });

    test("a refusal names the role needed and the caller's; a viewer's write writes nothing", async () => {
      const before = await rowCounts(t.store);
      const viewer = clientOf(t.url, DeploymentService, tokens.viewer);
      await assert.rejects(
        viewer.createDeployment({ deployment: { id: "web", namespace: "demo", image: "nginx:1", regions: [{ region: "east", replicas: 1 }] } }),
        (error) => {
          const e = ConnectError.from(error);
          assert.equal(e.code, Code.PermissionDenied);
          assert.match(e.rawMessage, /CreateDeployment needs role deployer in a project; operator "vera" has role viewer and none in any project/);
          return true;
        },
      );
      assert.deepEqual(await rowCounts(t.store), before);
    });

    test("validate_only runs every check of the write and writes nothing", async () => {
      const before = await rowCounts(t.store);
      const dan = clientOf(t.url, DeploymentService, tokens.deployer);
      const deployment = { id: "dry", namespace: "demo", image: "nginx:1", regions: [{ region: "east", replicas: 1 }] };
      assert.equal((await dan.createDeployment({ deployment, validateOnly: true })).deployment?.revision, 1n);
      await assert.rejects(dan.createDeployment({ deployment: { ...deployment, regions: [{ region: "nowhere", replicas: 1 }] }, validateOnly: true }), (e) => {
        assert.equal(ConnectError.from(e).code, Code.NotFound);
        assert.match(ConnectError.from(e).rawMessage, /deployment\.regions\[0\]\.region: region "nowhere" not found/);
        return true;
      });
      await assert.rejects(dan.updateDeployment({ deployment, validateOnly: true }), (e) => ConnectError.from(e).code === Code.NotFound);
      assert.deepEqual(await rowCounts(t.store), before);
      await assert.rejects(dan.getDeployment({ id: "dry" }), (e) => ConnectError.from(e).code === Code.NotFound);
    });

    test("WhoAmI names the caller and its role", async () => {
      assert.deepEqual(
        { ...(await clientOf(t.url, OperatorService, tokens.deployer).whoAmI({})), $typeName: undefined, serverVersion: undefined },
        { $typeName: undefined, actor: "dan", role: Role.DEPLOYER, serverVersion: undefined, projectRoles: [], subject: "", groups: [] },
      );
      assert.equal((await t.client(OperatorService).whoAmI({})).actor, "admin");
    });

    test("operators: the name admin is reserved, a name is unique, no role is none fleet-wide, list never shows a token", async () => {
      const operators = t.client(OperatorService);
      await assert.rejects(operators.createOperator({ name: "admin", role: Role.VIEWER }), (e) => ConnectError.from(e).code === Code.InvalidArgument);
      await assert.rejects(operators.createOperator({ name: "vera", role: Role.VIEWER }), (e) => ConnectError.from(e).code === Code.AlreadyExists);
      await assert.rejects(operators.createOperator({ name: "badrole", role: 7 as Role }), (e) => ConnectError.from(e).code === Code.InvalidArgument);
      assert.equal((await operators.createOperator({ name: "norole" })).operator?.role, Role.UNSPECIFIED);
      const listed = (await operators.listOperators({})).operators;
      assert.deepEqual(
        listed.map((o) => [o.name, o.role, o.createdBy]),
        [
          ["ada", Role.ADMIN, "admin"],
          ["dan", Role.DEPLOYER, "admin"],
          ["norole", Role.UNSPECIFIED, "admin"],
          ["vera", Role.VIEWER, "admin"],
        ],
      );
      assert.ok(!JSON.stringify(listed, (_k, v) => (typeof v === "bigint" ? String(v) : v)).includes("flt_op_"));
    });

    test("revisions keep each accepted spec and its actor; rollback writes a new revision with an old spec", async () => {
      const dan = clientOf(t.url, DeploymentService, tokens.deployer);
      const spec = (image: string) => ({ id: "api", namespace: "demo", image, regions: [{ region: "east", replicas: 1 }] });
      await dan.createDeployment({ deployment: spec("api:1"), message: "first" });
      await t.client(DeploymentService).updateDeployment({ deployment: spec("api:2") });
      await dan.updateDeployment({ deployment: spec("api:3"), message: "third" });
      // An update that changes nothing is no revision.
      await dan.updateDeployment({ deployment: spec("api:3") });
      const history = clientOf(t.url, HistoryService, tokens.deployer);
      const revisions = (await history.listRevisions({ resourceType: ResourceType.DEPLOYMENT, id: "api" })).revisions;
      assert.deepEqual(
        revisions.map((r) => [Number(r.revision), r.actor, r.message, r.spec.case === "deployment" ? r.spec.value.image : ""]),
        [
          [3, "dan", "third", "api:3"],
          [2, "admin", "", "api:2"],
          [1, "dan", "first", "api:1"],
        ],
      );
      const rolled = await history.rollback({ resourceType: ResourceType.DEPLOYMENT, id: "api", toRevision: 1n, expectedRevision: 3n, message: "back" });
      assert.equal(rolled.revision?.revision, 4n);
      const current = (await dan.getDeployment({ id: "api" })).deployment!;
      assert.equal(current.image, "api:1");
      assert.equal(current.revision, 4n);
      // Optimistic concurrency: the revision moved.
      await assert.rejects(
        history.rollback({ resourceType: ResourceType.DEPLOYMENT, id: "api", toRevision: 2n, expectedRevision: 3n }),
        (e) => ConnectError.from(e).code === Code.Aborted,
      );
      await assert.rejects(
        history.rollback({ resourceType: ResourceType.DEPLOYMENT, id: "api", toRevision: 9n }),
        (e) => ConnectError.from(e).code === Code.NotFound,
      );
      const viewerHistory = clientOf(t.url, HistoryService, tokens.viewer);
      await assert.rejects(
        viewerHistory.rollback({ resourceType: ResourceType.DEPLOYMENT, id: "api", toRevision: 2n }),
        (e) => ConnectError.from(e).code === Code.PermissionDenied,
      );

      // His refused attempts (earlier tests) are there too, as "denied".
      const audit = (await viewerHistory.listAuditEvents({ actor: "dan" })).events.filter((e) => e.decision === "allowed");
      assert.deepEqual(
        audit.map((e) => [e.action, e.objectKind, e.objectId, Number(e.revision), e.message]),
        [
          ["RollbackDeployment", "deployment", "api", 4, "back"],
          ["UpdateDeployment", "deployment", "api", 3, "third"],
          ["CreateDeployment", "deployment", "api", 1, "first"],
        ],
      );
      const adminWrites = (await viewerHistory.listAuditEvents({ actor: "admin" })).events.map((e) => `${e.action} ${e.objectId}`);
      assert.ok(
        adminWrites.includes("CreateOperator vera") && adminWrites.includes("CreateRegion east") && adminWrites.includes("UpdateDeployment api"),
        adminWrites.join(", "),
      );
    });

    test("the status stream: a snapshot, SYNCED, then a change as it happens; resumed from a cursor, the changes since", async () => {
      const status = clientOf(t.url, StatusService, tokens.viewer);
      const deployments = t.client(DeploymentService);
      await deployments.createDeployment({ deployment: { id: "s1", namespace: "demo", image: "s:1", regions: [{ region: "east", replicas: 2 }] } });
      const abort = new AbortController();
      const stream = status.watchStatus({ resourceType: ResourceType.DEPLOYMENT }, { signal: abort.signal })[Symbol.asyncIterator]();
      const next = async (): Promise<WatchStatusResponse> => (await stream.next()).value as WatchStatusResponse;
      const snapshot: WatchStatusResponse[] = [];
      for (let r = await next(); r.event.case !== "synced"; r = await next()) snapshot.push(r);
      const s1 = snapshot.find((r) => r.event.case === "object" && r.event.value.id === "s1");
      assert.ok(s1 && s1.event.case === "object");
      assert.equal(s1.event.value.revision, 1n);
      assert.deepEqual(
        s1.event.value.regions.map((r) => [r.region, r.desiredReplicas]),
        [["east", 2]],
      );
      assert.ok(snapshot.some((r) => r.event.case === "region" && r.event.value.name === "east"));

      await deployments.updateDeployment({ deployment: { id: "s1", namespace: "demo", image: "s:2", regions: [{ region: "east", replicas: 3 }] } });
      // (Objects changed just before the stream opened may be sent again: statuses are level-triggered.)
      let change: WatchStatusResponse;
      do change = await next();
      while (change.event.case !== "object" || change.event.value.id !== "s1" || change.event.value.revision < 2n);
      assert.equal(change.event.value.revision, 2n);
      const cursor = change.cursor;
      abort.abort();

      // Written while no stream was open: a resumed stream sends it, without a snapshot.
      await deployments.deleteDeployment({ id: "s1" });
      const resumed = status.watchStatus({ resourceType: ResourceType.DEPLOYMENT, afterCursor: cursor }, { signal: AbortSignal.timeout(5000) });
      for await (const r of resumed) {
        assert.notEqual(r.event.case, "synced");
        if (r.event.case !== "object" || r.event.value.id !== "s1") continue;
        assert.equal(r.event.value.deleted, true);
        break;
      }

      // Once the changes after a cursor are pruned (--status-events-max-age), resuming from it is OUT_OF_RANGE.
      await deployments.createDeployment({ deployment: { id: "s2", namespace: "demo", image: "s:1", regions: [{ region: "east", replicas: 1 }] } });
      assert.ok((await t.store.statusEvents.prune(0, Date.now() + 1000)) > 0);
      await assert.rejects(
        (async () => {
          for await (const _ of status.watchStatus({ resourceType: ResourceType.DEPLOYMENT, afterCursor: cursor }, { signal: AbortSignal.timeout(5000) }))
            break;
        })(),
        (e) => ConnectError.from(e).code === Code.OutOfRange,
      );
    });
  });

  describe(`operator tokens on two ctrl replicas (${db.name})`, { skip }, () => {
    test("a revoked operator token is refused by the other replica within 1 s", async () => {
      const a = await startTestCtrl(db);
      const bStore = await Store.open(a.databaseUrl);
      let b: Ctrl | undefined;
      try {
        b = await startCtrl({ store: bStore, adminToken: ADMIN_TOKEN, port: 0, shutdownGraceMs: 500, log: testLogger() });
        const { token } = await a.client(OperatorService).createOperator({ name: "eve", role: Role.VIEWER });
        const onB = clientOf(b.url, RegionService, token);
        await onB.listRegions({});
        await a.client(OperatorService).revokeOperator({ name: "eve" });
        const revokedAt = Date.now();
        let refusedAfter: number | undefined;
        while (Date.now() - revokedAt < 3000) {
          try {
            await onB.listRegions({});
          } catch (error) {
            assert.equal(ConnectError.from(error).code, Code.Unauthenticated);
            refusedAfter = Date.now() - revokedAt;
            break;
          }
          await sleep(20);
        }
        assert.ok(refusedAfter !== undefined && refusedAfter <= 1000, `refused after ${refusedAfter} ms`);
      } finally {
        await b?.shutdown();
        await bStore.close();
        await a.close();
      }
    });
  });
}
