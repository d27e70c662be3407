// Authentication and RBAC authorization (--rbac): who a request is, what RBAC lets it do, and
// the 401/403 Status objects, as kube-apiserver writes them.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { KubernetesEmulator } from "@flotilla/k8s-emulator";

const ADMIN = "emulator-token";
const SA_USER = "system:serviceaccount:team:bot";

interface Reply {
  status: number;
  body: any;
}

async function call(
  emu: KubernetesEmulator,
  token: string | undefined,
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json",
): Promise<Reply> {
  const headers: Record<string, string> = { "content-type": contentType };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${emu.url}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text.startsWith("{") ? JSON.parse(text) : text };
}

const rbac = (kind: string, name: string, rest: object) => ({ apiVersion: "rbac.authorization.k8s.io/v1", kind, metadata: { name }, ...rest });
const saSubject = { kind: "ServiceAccount", name: "bot", namespace: "team" };
const deploymentBody = (name: string) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name },
  spec: {
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "c", image: "nginx:1.27" }] } },
  },
});

describe("RBAC on", () => {
  let emu: KubernetesEmulator;
  let token: string;
  const as = (method: string, path: string, body?: unknown, contentType?: string) => call(emu, token, method, path, body, contentType);
  const admin = (method: string, path: string, body?: unknown) => call(emu, ADMIN, method, path, body);

  before(async () => {
    emu = await KubernetesEmulator.start({ rbac: true, rolloutDelayMs: 10 });
    for (const ns of ["team", "other"]) emu.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
    emu.put({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "bot", namespace: "team" } });
    const issued = await admin("POST", "/api/v1/namespaces/team/serviceaccounts/bot/token", {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: {},
    });
    assert.equal(issued.status, 201);
    token = issued.body.status.token;
  });
  after(() => emu.stop());

  it("issues tokens with TokenRequest: defaults, bounds, unknown accounts", async () => {
    const issued = await admin("POST", "/api/v1/namespaces/team/serviceaccounts/bot/token", { spec: { expirationSeconds: 600 } });
    assert.equal(issued.body.kind, "TokenRequest");
    assert.deepEqual(issued.body.spec, { audiences: ["https://kubernetes.default.svc.cluster.local"], expirationSeconds: 600, boundObjectRef: null });
    assert.match(issued.body.status.expirationTimestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const short = await admin("POST", "/api/v1/namespaces/team/serviceaccounts/bot/token", { spec: { expirationSeconds: 60 } });
    assert.equal(short.status, 422);
    assert.match(short.body.message, /spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes/);
    const missing = await admin("POST", "/api/v1/namespaces/team/serviceaccounts/nobody/token", { spec: {} });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.message, 'serviceaccounts "nobody" not found');
    assert.equal((await admin("GET", "/api/v1/namespaces/team/serviceaccounts/bot/token")).status, 405);
  });

  it("401 for a token nobody issued, anonymous for none, admin for the kubeconfig token", async () => {
    const bogus = await call(emu, "made-up", "GET", "/api/v1/namespaces");
    assert.deepEqual(bogus, {
      status: 401,
      body: { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: "Unauthorized", reason: "Unauthorized", code: 401 },
    });
    const anonymous = await call(emu, undefined, "GET", "/api");
    assert.equal(anonymous.status, 403);
    assert.equal(anonymous.body.message, 'forbidden: User "system:anonymous" cannot get path "/api"');
    assert.equal((await call(emu, undefined, "GET", "/healthz")).body, "ok", "system:public-info-viewer");
    assert.equal((await as("GET", "/apis")).status, 200, "system:discovery for authenticated users");
    assert.equal((await admin("GET", "/api/v1/secrets")).status, 200);
  });

  it("403 Status exactly like the API server: namespaced, cluster scope, collection, subresource", async () => {
    const get = await as("GET", "/apis/apps/v1/namespaces/team/deployments/web");
    assert.deepEqual(get.body, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: `deployments.apps "web" is forbidden: User "${SA_USER}" cannot get resource "deployments" in API group "apps" in the namespace "team"`,
      reason: "Forbidden",
      details: { name: "web", group: "apps", kind: "deployments" },
      code: 403,
    });
    const list = await as("GET", "/api/v1/secrets");
    assert.equal(list.body.message, `secrets is forbidden: User "${SA_USER}" cannot list resource "secrets" in API group "" at the cluster scope`);
    assert.deepEqual(list.body.details, { group: "", kind: "secrets" });
    const watch = await as("GET", "/api/v1/namespaces/team/configmaps?watch=true");
    assert.match(watch.body.message, /cannot watch resource "configmaps" in API group "" in the namespace "team"$/);
    const status = await as("PATCH", "/apis/apps/v1/namespaces/team/deployments/web/status", {}, "application/merge-patch+json");
    assert.match(status.body.message, /cannot patch resource "deployments\/status" in API group "apps"/);
    const collection = await as("DELETE", "/api/v1/namespaces/team/configmaps");
    assert.match(collection.body.message, /cannot deletecollection resource "configmaps"/);
  });

  it("Roles and ClusterRoles through RoleBindings and ClusterRoleBindings; resourceNames, subresources, groups", async () => {
    emu.put(rbac("ClusterRole", "cm-reader", { rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list"] }] }));
    emu.put({
      ...rbac("RoleBinding", "read-cm", {
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cm-reader" },
        subjects: [{ kind: "ServiceAccount", name: "bot" }],
      }),
      metadata: { name: "read-cm", namespace: "team" },
    });
    assert.equal(
      (await as("GET", "/api/v1/namespaces/team/configmaps")).status,
      200,
      "a RoleBinding grants in its namespace (subject namespace defaults to it)",
    );
    assert.equal((await as("GET", "/api/v1/namespaces/other/configmaps")).status, 403, "and nowhere else");
    assert.equal((await as("GET", "/api/v1/configmaps")).status, 403, "not cluster-wide");

    emu.put({
      ...rbac("Role", "one-deploy", {
        rules: [
          { apiGroups: ["apps"], resources: ["deployments"], resourceNames: ["web"], verbs: ["get"] },
          { apiGroups: ["apps"], resources: ["deployments/status"], verbs: ["get"] },
        ],
      }),
      metadata: { name: "one-deploy", namespace: "team" },
    });
    emu.put({
      ...rbac("RoleBinding", "one-deploy", { roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "one-deploy" }, subjects: [saSubject] }),
      metadata: { name: "one-deploy", namespace: "team" },
    });
    await admin("POST", "/apis/apps/v1/namespaces/team/deployments", deploymentBody("web"));
    await admin("POST", "/apis/apps/v1/namespaces/team/deployments", deploymentBody("db"));
    assert.equal((await as("GET", "/apis/apps/v1/namespaces/team/deployments/web")).status, 200);
    assert.equal((await as("GET", "/apis/apps/v1/namespaces/team/deployments/db")).status, 403, "resourceNames");
    assert.equal((await as("GET", "/apis/apps/v1/namespaces/team/deployments/db/status")).status, 200, "deployments/status");
    assert.equal((await as("GET", "/apis/apps/v1/namespaces/team/deployments")).status, 403, "a list has no name");

    emu.put(
      rbac("ClusterRole", "ns-viewer", {
        rules: [
          { apiGroups: [""], resources: ["namespaces"], verbs: ["*"] },
          { nonResourceURLs: ["/metrics*"], verbs: ["get"] },
        ],
      }),
    );
    emu.put(
      rbac("ClusterRoleBinding", "ns-viewer", {
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "ns-viewer" },
        subjects: [{ kind: "Group", name: "system:serviceaccounts:team" }],
      }),
    );
    assert.equal((await as("GET", "/api/v1/namespaces")).status, 200, "Group subject, verb *");
    assert.equal((await as("GET", "/metrics/x")).status, 404, "nonResourceURLs prefix: allowed, then not found");
    assert.equal((await as("GET", "/version")).status, 200);
  });

  it("SelfSubjectAccessReview answers what RBAC would (kubectl auth can-i)", async () => {
    const review = (spec: object) =>
      as("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", { apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectAccessReview", spec });
    const secrets = await review({ resourceAttributes: { verb: "list", resource: "secrets" } });
    assert.equal(secrets.status, 201);
    assert.deepEqual(secrets.body.status, { allowed: false });
    assert.deepEqual((await review({ resourceAttributes: { verb: "get", resource: "configmaps", namespace: "team" } })).body.status, { allowed: true });
    assert.deepEqual((await review({ nonResourceAttributes: { verb: "get", path: "/version" } })).body.status, { allowed: true });
    const neither = await review({});
    assert.equal(neither.status, 422);
    assert.match(neither.body.message, /exactly one of nonResourceAttributes or resourceAttributes must be specified/);
  });

  it("impersonation: the admin runs as the account it names; an account without `impersonate` is refused, with it runs as the user; groups without a user are an error", async () => {
    const listSecrets = async (bearer: string, impersonate: Record<string, string>) => {
      const res = await fetch(`${emu.url}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews`, {
        method: "POST",
        headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json", ...impersonate },
        body: JSON.stringify({
          apiVersion: "authorization.k8s.io/v1",
          kind: "SelfSubjectAccessReview",
          spec: { resourceAttributes: { verb: "list", resource: "secrets" } },
        }),
      });
      const body = (await res.json()) as { status?: { allowed?: boolean }; message?: string };
      return { status: res.status, allowed: body.status?.allowed, message: body.message };
    };
    assert.deepEqual(await listSecrets(ADMIN, {}), { status: 201, allowed: true, message: undefined });
    assert.deepEqual(await listSecrets(ADMIN, { "impersonate-user": SA_USER }), { status: 201, allowed: false, message: undefined }, "answered as the account");
    assert.deepEqual(
      { user: emu.requestLog.at(-1)?.user, impersonatedUser: emu.requestLog.at(-1)?.impersonatedUser },
      { user: "emulator-admin", impersonatedUser: SA_USER },
    );

    const refused = await listSecrets(token, { "impersonate-user": "alice" });
    assert.equal(refused.status, 403);
    assert.equal(refused.message, `users "alice" is forbidden: User "${SA_USER}" cannot impersonate resource "users" in API group "" at the cluster scope`);

    emu.put(rbac("ClusterRole", "impersonate-alice", { rules: [{ apiGroups: [""], resources: ["users"], verbs: ["impersonate"], resourceNames: ["alice"] }] }));
    emu.put(
      rbac("ClusterRoleBinding", "bot-impersonates-alice", {
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "impersonate-alice" },
        subjects: [saSubject],
      }),
    );
    try {
      assert.deepEqual(
        await listSecrets(token, { "impersonate-user": "alice" }),
        { status: 201, allowed: false, message: undefined },
        "alice may not list secrets",
      );
      const asGroup = await listSecrets(token, { "impersonate-user": "alice", "impersonate-group": "system:masters" });
      assert.equal(asGroup.status, 403, "alice, yes; the group system:masters, no");
      assert.match(asGroup.message ?? "", /^groups "system:masters" is forbidden: User "system:serviceaccount:team:bot" cannot impersonate resource "groups"/);
    } finally {
      emu.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "bot-impersonates-alice");
      emu.delete("rbac.authorization.k8s.io/v1", "ClusterRole", "impersonate-alice");
    }

    const groupsOnly = await listSecrets(ADMIN, { "impersonate-group": "system:masters" });
    assert.equal(groupsOnly.status, 500);
    assert.match(groupsOnly.message ?? "", /without impersonating a user/);
  });

  it("a binding to a missing role: the reason says so", async () => {
    emu.put(
      rbac("ClusterRoleBinding", "dangling", { roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "gone" }, subjects: [saSubject] }),
    );
    const res = await as("GET", "/api/v1/secrets");
    assert.equal(
      res.body.message,
      `secrets is forbidden: User "${SA_USER}" cannot list resource "secrets" in API group "" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found`,
    );
    emu.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "dangling");
  });

  it("server-side apply that creates needs create as well as patch", async () => {
    emu.put({
      ...rbac("Role", "patcher", { rules: [{ apiGroups: ["apps"], resources: ["deployments"], verbs: ["patch"] }] }),
      metadata: { name: "patcher", namespace: "other" },
    });
    emu.put({
      ...rbac("RoleBinding", "patcher", { roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "patcher" }, subjects: [saSubject] }),
      metadata: { name: "patcher", namespace: "other" },
    });
    const apply = (name: string) =>
      as("PATCH", `/apis/apps/v1/namespaces/other/deployments/${name}?fieldManager=bot`, JSON.stringify(deploymentBody(name)), "application/apply-patch+yaml");
    const refused = await apply("new");
    assert.equal(refused.status, 403);
    assert.equal(refused.body.message, 'deployments.apps "new" is forbidden: ');
    assert.equal(emu.get("apps/v1", "Deployment", "other", "new"), undefined);
    await admin("POST", "/apis/apps/v1/namespaces/other/deployments", deploymentBody("old"));
    assert.equal((await apply("old")).status, 200, "an existing object needs patch only");
  });

  it("token Secrets are filled in by the token controller; tokens die with their Secret or account", async () => {
    await admin("POST", "/api/v1/namespaces/team/secrets", {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "bot-token", annotations: { "kubernetes.io/service-account.name": "bot" } },
      type: "kubernetes.io/service-account-token",
    });
    const secret = await admin("GET", "/api/v1/namespaces/team/secrets/bot-token");
    assert.equal(secret.body.metadata.annotations["kubernetes.io/service-account.uid"], emu.get("v1", "ServiceAccount", "team", "bot")!.metadata.uid);
    assert.equal(Buffer.from(secret.body.data.namespace, "base64").toString(), "team");
    const legacy = Buffer.from(secret.body.data.token, "base64").toString();
    assert.equal((await call(emu, legacy, "GET", "/api/v1/namespaces")).status, 200);
    await admin("DELETE", "/api/v1/namespaces/team/secrets/bot-token");
    assert.equal((await call(emu, legacy, "GET", "/api/v1/namespaces")).status, 401);

    // A re-created account has a new uid: the old account's tokens no longer authenticate.
    emu.delete("v1", "ServiceAccount", "team", "bot");
    emu.put({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "bot", namespace: "team" } });
    assert.equal((await as("GET", "/api/v1/namespaces")).status, 401);
  });
});

describe("RBAC off (the default)", () => {
  it("any token, or none, may do anything", async () => {
    const emu = await KubernetesEmulator.start();
    try {
      assert.equal((await call(emu, "made-up", "GET", "/api/v1/secrets")).status, 200);
      assert.equal((await call(emu, undefined, "GET", "/api/v1/secrets")).status, 200);
      assert.equal(emu.list("rbac.authorization.k8s.io/v1", "ClusterRole").length, 0, "no bootstrap policy");
    } finally {
      await emu.stop();
    }
  });
});
