import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startCluster, type Cluster } from "@flotilla/testkit/emulator";
import { internalError } from "../src/errors.ts";

async function raw(c: Cluster, method: string, path: string, body?: string, contentType = "application/json") {
  const res = await fetch(`${c.emu.url}${path}`, { method, body, headers: body !== undefined ? { "Content-Type": contentType } : {} });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text.startsWith("{") || text.startsWith("[") ? JSON.parse(text) : text };
}

describe("robustness and protocol details", () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster();
  });
  after(() => c.emu.stop());

  it("serves discovery documents", async () => {
    const api = await raw(c, "GET", "/api");
    assert.equal(api.body.kind, "APIVersions");
    assert.deepEqual(api.body.versions, ["v1"]);
    const apis = await raw(c, "GET", "/apis");
    assert.equal(apis.body.kind, "APIGroupList");
    assert.deepEqual(
      apis.body.groups.map((g: { name: string }) => g.name),
      ["apps", "cilium.io", "rbac.authorization.k8s.io", "coordination.k8s.io", "policy", "autoscaling", "admissionregistration.k8s.io"],
    );
    const core = await raw(c, "GET", "/api/v1");
    const ns = core.body.resources.find((r: { name: string }) => r.name === "namespaces");
    assert.deepEqual([ns.kind, ns.namespaced, ns.singularName], ["Namespace", false, "namespace"]);
    assert.ok(ns.verbs.includes("watch"));
    const token = core.body.resources.find((r: { name: string }) => r.name === "serviceaccounts/token");
    assert.deepEqual(token, {
      name: "serviceaccounts/token",
      singularName: "",
      namespaced: true,
      group: "authentication.k8s.io",
      version: "v1",
      kind: "TokenRequest",
      verbs: ["create"],
    });
    const cilium = await raw(c, "GET", "/apis/cilium.io/v2");
    assert.ok(cilium.body.resources.some((r: { kind: string; namespaced: boolean }) => r.kind === "CiliumNetworkPolicy" && r.namespaced));
    const coordination = await raw(c, "GET", "/apis/coordination.k8s.io/v1");
    const lease = coordination.body.resources.find((r: { name: string }) => r.name === "leases");
    assert.deepEqual([lease.kind, lease.namespaced, lease.singularName], ["Lease", true, "lease"]);
    assert.ok(!coordination.body.resources.some((r: { name: string }) => r.name === "leases/status"), "no status subresource");
    const version = await raw(c, "GET", "/version");
    assert.equal(version.body.major, "1");
    assert.equal((await raw(c, "GET", "/apis/nope.io/v1")).status, 404);
  });

  it("answers unknown paths and methods with a Status", async () => {
    const unknown = await raw(c, "GET", "/apis/apps/v1/namespaces/default/widgets");
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.kind, "Status");
    assert.equal(unknown.body.reason, "NotFound");
    const method = await raw(c, "POST", "/apis/apps/v1/namespaces/default/deployments/web", "{}");
    assert.equal(method.status, 405);
    assert.equal(method.body.reason, "MethodNotAllowed");
  });

  it("shapes failures as the API server's metav1.Status", async () => {
    const missing = await raw(c, "GET", "/apis/apps/v1/namespaces/default/deployments/nope");
    assert.deepEqual(missing.body, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: 'deployments.apps "nope" not found',
      reason: "NotFound",
      details: { name: "nope", group: "apps", kind: "deployments" },
      code: 404,
    });
    await raw(c, "POST", "/api/v1/namespaces", JSON.stringify({ metadata: { name: "twice" } }));
    const exists = await raw(c, "POST", "/api/v1/namespaces", JSON.stringify({ metadata: { name: "twice" } }));
    assert.deepEqual(exists.body, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: 'namespaces "twice" already exists',
      reason: "AlreadyExists",
      details: { name: "twice", group: "", kind: "namespaces" },
      code: 409,
    });
    const bad = await raw(c, "POST", "/api/v1/namespaces", JSON.stringify({ metadata: { name: "Bad_Name" } }));
    assert.equal(bad.status, 422);
    assert.equal(bad.body.reason, "Invalid");
    assert.deepEqual(bad.body.details, {
      name: "Bad_Name",
      kind: "Namespace",
      causes: [{ reason: "FieldValueInvalid", message: bad.body.details.causes[0].message, field: "metadata.name" }],
    });
    assert.match(bad.body.message, /^Namespace "Bad_Name" is invalid: metadata\.name: Invalid value: "Bad_Name": a lowercase RFC 1123 label/);
    assert.deepEqual(internalError("boom").toStatus(), {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "Internal error occurred: boom",
      reason: "InternalError",
      details: { causes: [{ message: "boom" }] },
      code: 500,
    });
  });

  it("rejects malformed JSON and YAML with 400 and keeps serving", async () => {
    const json = await raw(c, "POST", "/api/v1/namespaces", '{"metadata": {');
    assert.equal(json.status, 400);
    assert.equal(json.body.reason, "BadRequest");
    const yaml = await raw(c, "PATCH", "/api/v1/namespaces/x?fieldManager=t", "a: [1, 2\n", "application/apply-patch+yaml");
    assert.equal(yaml.status, 400);
    const notObject = await raw(c, "PATCH", "/api/v1/namespaces/default", '"str"', "application/merge-patch+json");
    assert.equal(notObject.status, 400);
    const badType = await raw(c, "PATCH", "/api/v1/namespaces/default", "{}", "text/plain");
    assert.equal(badType.status, 415);
    assert.equal((await raw(c, "GET", "/api/v1/namespaces/default")).status, 200);
  });

  it("accepts real YAML for server-side apply", async () => {
    const manifest = [
      "apiVersion: v1",
      "kind: Service",
      "metadata:",
      "  name: yaml-svc   # comment",
      "  namespace: default",
      "  labels: {app: web, \"quoted\": 'yes'}",
      "spec:",
      "  selector:",
      "    app: web",
      "  ports:",
      "  - name: http",
      "    port: 80",
      "    targetPort: 8080",
      "",
    ].join("\n");
    const res = await raw(c, "PATCH", "/api/v1/namespaces/default/services/yaml-svc?fieldManager=yaml", manifest, "application/apply-patch+yaml");
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.deepEqual(res.body.metadata.labels, { app: "web", quoted: "yes" });
    assert.deepEqual(res.body.spec.ports, [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }]);
  });

  it("rejects bodies over 3 MiB with 413", async () => {
    const big = JSON.stringify({ metadata: { name: "big", annotations: { blob: "x".repeat(3 * 1024 * 1024) } } });
    const res = await raw(c, "POST", "/api/v1/namespaces", big);
    assert.equal(res.status, 413);
    assert.equal(res.body.reason, "RequestEntityTooLarge");
    assert.equal((await raw(c, "GET", "/api/v1/namespaces/default")).status, 200);
  });

  it("lists built-in types without per-item apiVersion/kind, like the real server", async () => {
    const res = await raw(c, "GET", "/api/v1/namespaces");
    assert.equal(res.body.kind, "NamespaceList");
    assert.equal(res.body.items[0].kind, undefined);
    assert.ok(res.body.items.some((n: { metadata: { name: string } }) => n.metadata.name === "kube-system"));
  });

  it("watch on a bad resourceVersion is a 400; legacy /watch/ paths work", async () => {
    assert.equal((await raw(c, "GET", "/api/v1/namespaces?watch=true&resourceVersion=abc")).status, 400);
    const res = await fetch(`${c.emu.url}/api/v1/watch/namespaces?timeoutSeconds=1&fieldSelector=metadata.name%3Ddefault`);
    const text = await res.text();
    const events = text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      events.map((e) => [e.type, e.object.metadata.name]),
      [["ADDED", "default"]],
    );
  });
});
