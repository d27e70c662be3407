// The operator API through second implementations: the `buf curl` CLI (Connect, gRPC and
// gRPC-Web, schema from reflection) and @grpc/grpc-js — exactly the ARCHITECTURE §8 calls.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { status as grpcStatus } from "@grpc/grpc-js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { AUTH, bufCurl, grpcJsUnary, jsonDocuments, BUF_PROTOCOLS as PROTOCOLS } from "@flotilla/testkit/interop";

for (const { db, skip } of await testDatabases()) {
  describe(`operator API interop (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    before(async () => (t = await startTestCtrl(db)));
    after(() => t.close());

    test("buf curl --list-services via reflection", async () => {
      const res = await bufCurl(["--http2-prior-knowledge", t.url, "--list-services"]);
      assert.equal(res.code, 0, res.stderr);
      const services = res.stdout.trim().split("\n");
      for (const s of ["ClusterService", "DeploymentService", "SentinelService", "NetworkPolicyService", "RegionService"]) {
        assert.ok(services.includes(`ctrl.v1.${s}`), `${s} in ${services}`);
      }
    });

    test("the §8 calls, as written", async () => {
      const call = async (path: string, body: string) => {
        const res = await bufCurl(["--http2-prior-knowledge", "-H", AUTH, `${t.url}/${path}`, "-d", body]);
        assert.equal(res.code, 0, `${path}: ${res.stderr}`);
        return jsonDocuments(res.stdout)[0] as Record<string, any>;
      };
      assert.equal((await call("ctrl.v1.RegionService/CreateRegion", '{"region":{"name":"local"}}')).region.name, "local");
      assert.match((await call("ctrl.v1.RegionService/CreateAgentToken", '{"region":"local"}')).token, /^flt_agent_/);
      const created = await call(
        "ctrl.v1.DeploymentService/CreateDeployment",
        `{"deployment":{"id":"web","namespace":"demo","image":"nginx:1.27","port":80,
       "regions":[{"region":"local","replicas":2}]}}`,
      );
      assert.equal(created.deployment.revision, "1");
      const got = await call("ctrl.v1.DeploymentService/GetDeployment", '{"id":"web"}');
      assert.deepEqual(got.deployment.regions, [{ region: "local", replicas: 2 }]);
      assert.equal(got.deployment.image, "nginx:1.27");
      assert.deepEqual(await call("ctrl.v1.DeploymentService/DeleteDeployment", '{"id":"web"}'), {});
    });

    for (const [protocol, flags] of Object.entries(PROTOCOLS)) {
      test(`buf curl over ${protocol}: success and error codes`, async () => {
        const name = `r-${protocol}`;
        const ok = await bufCurl([...flags, "-H", AUTH, `${t.url}/ctrl.v1.RegionService/CreateRegion`, "-d", JSON.stringify({ region: { name } })]);
        assert.equal(ok.code, 0, ok.stderr);
        assert.equal((jsonDocuments(ok.stdout)[0] as any).region.name, name);
        const missing = await bufCurl([...flags, "-H", AUTH, `${t.url}/ctrl.v1.RegionService/GetRegion`, "-d", '{"name":"nowhere"}']);
        assert.notEqual(missing.code, 0);
        assert.match(missing.stdout + missing.stderr, /not_found/);
        const noAuth = await bufCurl([...flags, `${t.url}/ctrl.v1.RegionService/ListRegions`, "-d", "{}"]);
        assert.match(noAuth.stdout + noAuth.stderr, /unauthenticated/);
      });
    }

    test("@grpc/grpc-js client", async () => {
      const created = await grpcJsUnary(t.url, RegionService.method.createRegion, { region: { name: "grpcjs" } }, ADMIN_TOKEN);
      assert.equal(created.region?.name, "grpcjs");
      const listed = await grpcJsUnary(t.url, RegionService.method.listRegions, { pageSize: 1000 }, ADMIN_TOKEN);
      assert.ok(listed.regions.some((r) => r.name === "grpcjs"));
      await assert.rejects(
        grpcJsUnary(t.url, RegionService.method.getRegion, { name: "nowhere" }, ADMIN_TOKEN),
        (e: { code: number }) => e.code === grpcStatus.NOT_FOUND,
      );
      await assert.rejects(grpcJsUnary(t.url, RegionService.method.listRegions, {}), (e: { code: number }) => e.code === grpcStatus.UNAUTHENTICATED);
      await assert.rejects(
        grpcJsUnary(t.url, RegionService.method.createRegion, { region: { name: "Bad" } }, ADMIN_TOKEN),
        (e: { code: number; details: string }) => e.code === grpcStatus.INVALID_ARGUMENT && e.details.includes("region.name"),
      );
    });
  });
}
