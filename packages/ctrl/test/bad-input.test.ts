// ARCHITECTURE §6: every bad input gets the right code and names the field; nothing is written.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, rowCounts, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

const valid = { id: "web", namespace: "demo", image: "nginx:1.27", port: 80, regions: [{ region: "local", replicas: 2 }] };
const withDeployment = (patch: Record<string, unknown>) => ({ deployment: { ...valid, ...patch } });

interface Case {
  name: string;
  method: string;
  body: unknown;
  code: string;
  /** Text the error message must contain, usually the field path. */
  mentions?: string;
  token?: string | null;
}

const cases: Case[] = [
  { name: "missing deployment", method: "DeploymentService/CreateDeployment", body: {}, code: "invalid_argument", mentions: "deployment:" },
  {
    name: "uppercase id",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ id: "Web" }),
    code: "invalid_argument",
    mentions: "deployment.id",
  },
  { name: "empty id", method: "DeploymentService/CreateDeployment", body: withDeployment({ id: "" }), code: "invalid_argument", mentions: "deployment.id" },
  {
    name: "64-char id",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ id: "a".repeat(64) }),
    code: "invalid_argument",
    mentions: "deployment.id",
  },
  {
    name: "id with dot",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ id: "a.b" }),
    code: "invalid_argument",
    mentions: "deployment.id",
  },
  {
    name: "namespace underscore",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ namespace: "a_b" }),
    code: "invalid_argument",
    mentions: "deployment.namespace",
  },
  ...["kube-system", "kube-public", "kube-node-lease", "default"].map((namespace) => ({
    name: `system namespace ${namespace}`,
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ namespace }),
    code: "invalid_argument",
    mentions: "deployment.namespace",
  })),
  {
    name: "update into kube-system",
    method: "DeploymentService/UpdateDeployment",
    body: withDeployment({ namespace: "kube-system" }),
    code: "invalid_argument",
    mentions: "deployment.namespace",
  },
  {
    name: "sentinel in kube-system",
    method: "SentinelService/CreateSentinel",
    body: { sentinel: { id: "gw", region: "local", namespace: "kube-system", image: "sentinel:1" } },
    code: "invalid_argument",
    mentions: "sentinel.namespace",
  },
  {
    name: "policy in default",
    method: "NetworkPolicyService/CreateNetworkPolicy",
    body: { networkPolicy: { id: "p", region: "local", namespace: "default", spec: { a: 1 } } },
    code: "invalid_argument",
    mentions: "network_policy.namespace",
  },
  {
    name: "empty image",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ image: "" }),
    code: "invalid_argument",
    mentions: "deployment.image",
  },
  {
    name: "image with uppercase path",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ image: "Nginx:1" }),
    code: "invalid_argument",
    mentions: "deployment.image",
  },
  {
    name: "image with empty tag",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ image: "nginx:" }),
    code: "invalid_argument",
    mentions: "deployment.image",
  },
  {
    name: "image with bad digest",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ image: "nginx@sha256:zz" }),
    code: "invalid_argument",
    mentions: "deployment.image",
  },
  {
    name: "image with spaces",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ image: "nginx latest" }),
    code: "invalid_argument",
    mentions: "deployment.image",
  },
  {
    name: "negative replicas",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ regions: [{ region: "local", replicas: -1 }] }),
    code: "invalid_argument",
    mentions: "deployment.regions[0].replicas",
  },
  {
    name: "huge replicas",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ regions: [{ region: "local", replicas: 100000 }] }),
    code: "invalid_argument",
    mentions: "deployment.regions[0].replicas",
  },
  {
    name: "port out of range",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ port: 70000 }),
    code: "invalid_argument",
    mentions: "deployment.port",
  },
  {
    name: "negative cpu",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ cpuMillicores: -5 }),
    code: "invalid_argument",
    mentions: "deployment.cpu_millicores",
  },
  {
    name: "bad env name",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ env: [{ name: "A B", value: "x" }] }),
    code: "invalid_argument",
    mentions: "deployment.env[0].name",
  },
  {
    name: "duplicate env",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({
      env: [
        { name: "A", value: "1" },
        { name: "A", value: "2" },
      ],
    }),
    code: "invalid_argument",
    mentions: "deployment.env[1].name",
  },
  {
    name: "command arg too long",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ command: ["x".repeat(5000)] }),
    code: "invalid_argument",
    mentions: "deployment.command[0]",
  },
  {
    name: "whole deployment too large",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ env: Array.from({ length: 20 }, (_, i) => ({ name: `V${i}`, value: "x".repeat(20_000) })) }),
    code: "invalid_argument",
    mentions: "deployment: larger than",
  },
  {
    name: "duplicate region",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({
      regions: [
        { region: "local", replicas: 1 },
        { region: "local", replicas: 2 },
      ],
    }),
    code: "invalid_argument",
    mentions: "deployment.regions[1].region",
  },
  {
    name: "bad region name",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ regions: [{ region: "Local", replicas: 1 }] }),
    code: "invalid_argument",
    mentions: "deployment.regions[0].region",
  },
  {
    name: "unknown region",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ regions: [{ region: "mars", replicas: 1 }] }),
    code: "not_found",
    mentions: "deployment.regions[0].region",
  },
  {
    name: "unknown desired status",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ desiredStatus: 42 }),
    code: "invalid_argument",
    mentions: "deployment.desired_status",
  },
  { name: "unknown enum name", method: "DeploymentService/CreateDeployment", body: withDeployment({ desiredStatus: "NAPPING" }), code: "invalid_argument" },
  { name: "wrong JSON type", method: "DeploymentService/CreateDeployment", body: withDeployment({ port: "eighty" }), code: "invalid_argument" },
  { name: "unknown JSON field", method: "DeploymentService/CreateDeployment", body: withDeployment({ replicas: 3 }), code: "invalid_argument" },
  { name: "get with empty id", method: "DeploymentService/GetDeployment", body: {}, code: "invalid_argument", mentions: "id" },
  { name: "get unknown", method: "DeploymentService/GetDeployment", body: { id: "nope" }, code: "not_found", mentions: "nope" },
  { name: "delete unknown", method: "DeploymentService/DeleteDeployment", body: { id: "nope" }, code: "not_found", mentions: "nope" },
  { name: "update unknown", method: "DeploymentService/UpdateDeployment", body: withDeployment({ id: "nope" }), code: "not_found", mentions: "nope" },
  { name: "bad page token", method: "DeploymentService/ListDeployments", body: { pageToken: "garbage!" }, code: "invalid_argument", mentions: "page_token" },
  { name: "negative page size", method: "DeploymentService/ListDeployments", body: { pageSize: -1 }, code: "invalid_argument", mentions: "page_size" },
  {
    name: "sentinel without region",
    method: "SentinelService/CreateSentinel",
    body: { sentinel: { id: "gw", namespace: "edge", image: "sentinel:1" } },
    code: "invalid_argument",
    mentions: "sentinel.region",
  },
  {
    name: "sentinel huge replicas",
    method: "SentinelService/CreateSentinel",
    body: { sentinel: { id: "gw", region: "local", namespace: "edge", image: "sentinel:1", replicas: 5000 } },
    code: "invalid_argument",
    mentions: "sentinel.replicas",
  },
  {
    name: "policy without spec",
    method: "NetworkPolicyService/CreateNetworkPolicy",
    body: { networkPolicy: { id: "p", region: "local", namespace: "edge" } },
    code: "invalid_argument",
    mentions: "network_policy.spec",
  },
  {
    name: "policy spec too large",
    method: "NetworkPolicyService/CreateNetworkPolicy",
    body: { networkPolicy: { id: "p", region: "local", namespace: "edge", spec: { blob: "x".repeat(300_000) } } },
    code: "invalid_argument",
    mentions: "network_policy.spec",
  },
  {
    name: "policy in unknown region",
    method: "NetworkPolicyService/CreateNetworkPolicy",
    body: { networkPolicy: { id: "p", region: "mars", namespace: "edge", spec: { a: 1 } } },
    code: "not_found",
    mentions: "network_policy.region",
  },
  { name: "region bad name", method: "RegionService/CreateRegion", body: { region: { name: "Bad_Name" } }, code: "invalid_argument", mentions: "region.name" },
  { name: "region missing", method: "RegionService/CreateRegion", body: {}, code: "invalid_argument", mentions: "region" },
  { name: "token for unknown region", method: "RegionService/CreateAgentToken", body: { region: "mars" }, code: "not_found", mentions: "mars" },
  { name: "missing token", method: "DeploymentService/CreateDeployment", body: withDeployment({ id: "x" }), code: "unauthenticated", token: null },
  { name: "wrong token", method: "DeploymentService/CreateDeployment", body: withDeployment({ id: "x" }), code: "unauthenticated", token: "not-the-token" },
  { name: "malformed JSON", method: "DeploymentService/CreateDeployment", body: "{not json", code: "invalid_argument" },
  {
    name: "oversized body",
    method: "DeploymentService/CreateDeployment",
    body: withDeployment({ command: ["x".repeat(5 * 1024 * 1024)] }),
    code: "resource_exhausted",
  },
];

async function call(t: TestCtrl, c: Case): Promise<{ status: number; code?: string; message?: string }> {
  const token = c.token === undefined ? ADMIN_TOKEN : c.token;
  const res = await fetch(`${t.url}/ctrl.v1.${c.method}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: typeof c.body === "string" ? c.body : JSON.stringify(c.body),
  });
  const json = (await res.json()) as { code?: string; message?: string };
  return { status: res.status, ...json };
}

for (const { db, skip } of await testDatabases()) {
  describe(`bad input (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    before(async () => {
      t = await startTestCtrl(db);
      await t.store.regions.create("local");
    });
    after(() => t.close());

    for (const c of cases) {
      test(c.name, async () => {
        const before = await rowCounts(t.store);
        const res = await call(t, c);
        assert.equal(res.code, c.code, `${c.name}: ${res.message}`);
        if (c.mentions) assert.ok(res.message?.includes(c.mentions), `message ${JSON.stringify(res.message)} should name ${c.mentions}`);
        assert.deepEqual(await rowCounts(t.store), before, "nothing written");
      });
    }

    // INVALID_ARGUMENT, as for JSON (connect-es itself would say INTERNAL); nothing written,
    // and the server lives on.
    test("malformed protobuf body over gRPC → a clean error, server keeps serving", async () => {
      const { connect } = await import("node:http2");
      const session = connect(t.url);
      try {
        const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, 4]), Buffer.from([0xff, 0xff, 0xff, 0xff])]);
        const before = await rowCounts(t.store);
        const status = await new Promise<string | undefined>((resolve, reject) => {
          const stream = session.request({
            ":method": "POST",
            ":path": "/ctrl.v1.DeploymentService/CreateDeployment",
            "content-type": "application/grpc",
            te: "trailers",
            authorization: `Bearer ${ADMIN_TOKEN}`,
          });
          let grpcStatus: string | undefined;
          const read = (h: Record<string, unknown>) => {
            if (h["grpc-status"] !== undefined) grpcStatus = `${h["grpc-status"]} ${decodeURIComponent(String(h["grpc-message"]))}`;
          };
          stream.on("response", read);
          stream.on("trailers", read);
          stream.on("data", () => {});
          stream.on("end", () => resolve(grpcStatus));
          stream.on("error", reject);
          stream.end(frame);
        });
        assert.match(status ?? "", /^3 parse binary: /);
        assert.deepEqual(await rowCounts(t.store), before);
      } finally {
        session.close();
      }
      assert.equal((await fetch(`${t.url}/healthz`)).status, 200);
    });

    test("a system namespace listed in allowedSystemNamespaces is accepted; the others still are not", async () => {
      const allowing = await startTestCtrl(db, { allowedSystemNamespaces: ["kube-system"] });
      try {
        await allowing.store.regions.create("local");
        const ok = await call(allowing, {
          name: "",
          method: "DeploymentService/CreateDeployment",
          body: withDeployment({ id: "sys", namespace: "kube-system" }),
          code: "",
        });
        assert.equal(ok.code, undefined, ok.message);
        const refused = await call(allowing, {
          name: "",
          method: "DeploymentService/CreateDeployment",
          body: withDeployment({ id: "sys2", namespace: "default" }),
          code: "",
        });
        assert.equal(refused.code, "invalid_argument");
      } finally {
        await allowing.close();
      }
    });

    test("agent token on the operator API → permission_denied", async () => {
      const { token } = await t.store.agentTokens.create("local");
      const res = await call(t, { name: "", method: "RegionService/ListRegions", body: {}, code: "", token });
      assert.equal(res.code, "permission_denied");
    });
  });
}
