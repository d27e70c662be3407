// The agent's Kubernetes client against the emulator (and, where the emulator cannot show it,
// a bare HTTP server): paths and queries, errors as the API server writes them, watches
// (bookmarks, 410, abort, line splitting), and the credentials of in-cluster configuration
// and kubeconfig files, including an exec credential plugin through @kubernetes/client-node.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { createServer as createNetServer, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { createLogger } from "@flotilla/runtime";
import { KubernetesEmulator } from "@flotilla/k8s-emulator";
import { initPki, issueAgent } from "@flotilla/ctrl/pki";
import { serviceAccountToken } from "@flotilla/testkit/emulator";
import { KubeApiError, KubeClient, resourcePath, type ApiObject, type ListMetadata, type Query, type WatchEvent } from "../src/kube-api.ts";
import { inClusterConnection, kubeconfigConnection, kubeconfigConnectionFromString, loadKubeConnection } from "../src/kube-connection.ts";

/** Credential files are read again at most this often in these tests (--kube-credentials-recheck, 1 s by default). */
const RECHECK_MS = 200;
/** Waits until a rotation written now is read (the recheck interval has passed). */
const rechecked = () => new Promise((resolve) => setTimeout(resolve, RECHECK_MS + 50));

/** Every item of one list page, and the page's metadata. */
async function listAll(client: KubeClient, path: string, query: Query = {}): Promise<{ items: ApiObject[]; metadata: ListMetadata }> {
  const items: ApiObject[] = [];
  const metadata = await client.list(path, query, (item) => items.push(item));
  return { items, metadata };
}

const ADMIN_TOKEN = "emulator-token";
const ADMIN_USER = "emulator-admin";

let dir: string;
let plain: KubernetesEmulator;
/** RBAC on, so a request without the right credentials is refused. */
let guarded: KubernetesEmulator;
let tls: KubernetesEmulator;
let caCert: string;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "flotilla-kube-client-"));
  const pki = initPki(join(dir, "pki"));
  caCert = pki.caCert;
  plain = await KubernetesEmulator.start({ rolloutDelayMs: 20, bookmarkIntervalMs: 100, watchHistory: 5 });
  guarded = await KubernetesEmulator.start({ rolloutDelayMs: 20, rbac: true });
  tls = await KubernetesEmulator.start({ rolloutDelayMs: 20, rbac: true, tls: { cert: readFileSync(pki.serverCert), key: readFileSync(pki.serverKey) } });
});
after(async () => {
  await Promise.all([plain?.stop(), guarded?.stop(), tls?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

/** A kubeconfig file in its own directory under the test's, with `user` as its user entry. */
function writeKubeconfig(name: string, server: string, user: Record<string, unknown>, cluster: Record<string, unknown> = {}): string {
  const home = join(dir, name);
  mkdirSync(home, { recursive: true });
  const path = join(home, "config");
  const config = {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c", cluster: { server, ...cluster } }],
    users: [{ name: "u", user }],
    contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
    "current-context": "x",
  };
  writeFileSync(path, JSON.stringify(config));
  return path;
}

const lastUser = (emulator: KubernetesEmulator) => emulator.requestLog.at(-1)?.user;

async function rejection(promise: Promise<unknown>): Promise<KubeApiError> {
  const error = await promise.then(
    () => assert.fail("expected the request to fail"),
    (error: unknown) => error,
  );
  assert.ok(error instanceof KubeApiError, `expected a KubeApiError, got ${String(error)}`);
  return error;
}

describe("requests", () => {
  let client: KubeClient;
  before(async () => {
    client = new KubeClient(await kubeconfigConnectionFromString(plain.kubeconfigYaml()));
  });

  test("paths: core and group APIs, namespaced and cluster-scoped kinds, collections across namespaces, encoded segments", () => {
    assert.equal(resourcePath({ apiVersion: "v1", kind: "Service", namespace: "a", name: "b" }), "/api/v1/namespaces/a/services/b");
    assert.equal(resourcePath({ apiVersion: "apps/v1", kind: "Deployment", namespace: "a", name: "b" }), "/apis/apps/v1/namespaces/a/deployments/b");
    assert.equal(resourcePath({ apiVersion: "apps/v1", kind: "Deployment" }), "/apis/apps/v1/deployments");
    assert.equal(resourcePath({ apiVersion: "v1", kind: "Namespace", namespace: "ignored", name: "n" }), "/api/v1/namespaces/n");
    assert.equal(
      resourcePath({ apiVersion: "coordination.k8s.io/v1", kind: "Lease", namespace: "a b", name: "c/d" }),
      "/apis/coordination.k8s.io/v1/namespaces/a%20b/leases/c%2Fd",
    );
    assert.throws(() => resourcePath({ apiVersion: "v1", kind: "Pod" }), /no resource path known for v1 Pod/);
  });

  test("create, apply with a field manager, get, paged lists with an encoded label selector, delete with preconditions", async () => {
    await client.create("/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "paths" } });
    for (const name of ["one", "two", "three"]) {
      const service = {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name, namespace: "paths", labels: { app: "a", tier: name } },
        spec: { ports: [{ port: 80 }] },
      };
      const applied = await client.apply(resourcePath({ apiVersion: "v1", kind: "Service", namespace: "paths", name }), service, {
        fieldManager: "test-manager",
      });
      assert.equal(applied.metadata?.name, name);
    }
    assert.equal(plain.requestLog.at(-1)?.fieldManager, "test-manager");
    const selector = "app=a,tier in (one,three)";
    const first = await listAll(client, "/api/v1/namespaces/paths/services", { labelSelector: selector, limit: 1 });
    assert.equal(plain.requestLog.at(-1)?.query.labelSelector, selector, "the selector arrives as written");
    assert.equal(first.items.length, 1);
    assert.ok(first.metadata?.continue, "a continue token");
    const second = await listAll(client, "/api/v1/namespaces/paths/services", { labelSelector: selector, limit: 1, continue: first.metadata?.continue });
    assert.deepEqual([...first.items, ...second.items].map((s) => s.metadata?.name).sort(), ["one", "three"]);
    const live = await client.get("/api/v1/namespaces/paths/services/one");
    const stale = await rejection(client.delete("/api/v1/namespaces/paths/services/one", { preconditions: { uid: "not-its-uid" } }));
    assert.equal(stale.statusCode, 409);
    assert.equal(stale.reason, "Conflict");
    await client.delete("/api/v1/namespaces/paths/services/one", { propagationPolicy: "Background", preconditions: { uid: live.metadata?.uid } });
    assert.equal((await rejection(client.get("/api/v1/namespaces/paths/services/one"))).statusCode, 404);
  });

  test("errors carry the HTTP status, the Status reason and message, the body and Retry-After", async () => {
    const missing = await rejection(client.get("/api/v1/namespaces/default/services/nothing"));
    assert.equal(missing.statusCode, 404);
    assert.equal(missing.reason, "NotFound");
    assert.equal(missing.statusMessage, 'services "nothing" not found');
    assert.equal(missing.message, 'GET /api/v1/namespaces/default/services/nothing: services "nothing" not found');
    assert.equal(JSON.parse(missing.body).kind, "Status");
    const exists = await rejection(client.create("/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "default" } }));
    assert.equal(exists.statusCode, 409);
    assert.equal(exists.reason, "AlreadyExists");
    const invalid = await rejection(
      client.create("/apis/apps/v1/namespaces/default/deployments", { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "no-spec" }, spec: {} }),
    );
    assert.equal(invalid.statusCode, 422);
    assert.equal(invalid.reason, "Invalid");
    plain.faults.tooManyRequests("get", 1, 7);
    const throttled = await rejection(client.get("/api/v1/namespaces/default"));
    assert.equal(throttled.statusCode, 429);
    assert.equal(throttled.retryAfter, "7");
    plain.faults.failNext("get", 1, 500);
    assert.equal((await rejection(client.get("/api/v1/namespaces/default"))).statusCode, 500);
    plain.faults.clear();
  });

  test("requests beyond the connection bound wait for a free connection", async () => {
    const bounded = new KubeClient(await kubeconfigConnectionFromString(plain.kubeconfigYaml(), { maxConnections: 2 }));
    plain.faults.latencyMs("list", 100);
    const before = plain.connectionCount;
    const started = performance.now();
    await Promise.all(Array.from({ length: 6 }, () => listAll(bounded, "/api/v1/namespaces")));
    const elapsed = performance.now() - started;
    plain.faults.clear();
    assert.equal(plain.connectionCount - before, 2, "two connections");
    assert.ok(elapsed >= 290, `six requests of 100 ms took three rounds on two connections (${Math.round(elapsed)} ms)`);
  });

  test("pooled sockets the server closed meanwhile: the request goes again until a new one; a fresh socket's failure is not retried", async () => {
    // Answers a connection's first request (keep-alive) and drops it at the second, as a server
    // closing an idle connection just as the client reuses it; `dropFirst` drops every request.
    const drops = { dropFirst: false, connections: 0, requests: 0 };
    const open = new Set<Socket>();
    const server = createNetServer((socket) => {
      drops.connections++;
      open.add(socket);
      socket.on("close", () => open.delete(socket));
      let seen = 0;
      let buffered = "";
      socket.on("data", (data) => {
        buffered += data.toString("latin1");
        while (buffered.includes("\r\n\r\n")) {
          buffered = buffered.slice(buffered.indexOf("\r\n\r\n") + 4);
          drops.requests++;
          if (seen++ > 0 || drops.dropFirst) {
            socket.destroy();
            return;
          }
          const body = JSON.stringify({ kind: "NamespaceList", apiVersion: "v1", metadata: {}, items: [] });
          socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: keep-alive\r\n\r\n${body}`);
        }
      });
      socket.on("error", () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      const client = new KubeClient(await kubeconfigConnectionFromString(plain.kubeconfigYaml().replace(new URL(plain.url).host, `127.0.0.1:${port}`)));
      const outcomes: string[] = [];
      client.requests.add(({ code }) => outcomes.push(code));
      assert.deepEqual((await listAll(client, "/api/v1/namespaces")).items, []);
      assert.deepEqual((await listAll(client, "/api/v1/namespaces")).items, [], "sent again on a new socket");
      assert.deepEqual(drops, { dropFirst: false, connections: 2, requests: 3 });
      assert.deepEqual(outcomes, ["200", "200"], "the dropped attempt is not a failed request");

      // Two pooled sockets, both closed by the server meanwhile: the request meets each, then a new one.
      const pooled = new KubeClient(await kubeconfigConnectionFromString(plain.kubeconfigYaml().replace(new URL(plain.url).host, `127.0.0.1:${port}`)));
      await Promise.all([listAll(pooled, "/api/v1/namespaces"), listAll(pooled, "/api/v1/namespaces")]);
      assert.deepEqual(drops, { dropFirst: false, connections: 4, requests: 5 });
      assert.deepEqual((await listAll(pooled, "/api/v1/namespaces")).items, [], "sent a third time, on a new socket");
      assert.deepEqual(drops, { dropFirst: false, connections: 5, requests: 8 });

      drops.dropFirst = true;
      const fresh = new KubeClient(await kubeconfigConnectionFromString(plain.kubeconfigYaml().replace(new URL(plain.url).host, `127.0.0.1:${port}`)));
      await assert.rejects(listAll(fresh, "/api/v1/namespaces"), /GET \/api\/v1\/namespaces: (socket hang up|read ECONNRESET)/);
      assert.equal(drops.requests, 9, "a new socket's failure is the server's answer: not sent again");
    } finally {
      for (const socket of open) socket.destroy();
      server.close();
    }
  });

  test("a request without a byte from the server for the idle timeout fails; one to a closed port names the request", async () => {
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const port = (silent.address() as AddressInfo).port;
    try {
      const impatient = new KubeClient(await kubeconfigConnectionFromString(plain.kubeconfigYaml().replace(new URL(plain.url).host, `127.0.0.1:${port}`)), {
        idleTimeoutMs: 100,
      });
      await assert.rejects(impatient.get("/api/v1/namespaces"), /GET \/api\/v1\/namespaces: .*no answer for 100 ms/);
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
    const closed = new KubeClient(await kubeconfigConnectionFromString(plain.kubeconfigYaml().replace(new URL(plain.url).host, `127.0.0.1:${port}`)));
    await assert.rejects(closed.get("/api/v1/namespaces"), /GET \/api\/v1\/namespaces: connect ECONNREFUSED/);
  });
});

describe("watch", () => {
  let client: KubeClient;
  before(async () => {
    client = new KubeClient(await kubeconfigConnectionFromString(plain.kubeconfigYaml()));
  });

  test("events and bookmarks in order; an abort ends the watch and its connection", async () => {
    const stop = new AbortController();
    const events: WatchEvent[] = [];
    const { resourceVersion } = (await listAll(client, "/api/v1/namespaces")).metadata ?? {};
    const watching = client.watch("/api/v1/namespaces", { resourceVersion, allowWatchBookmarks: true }, (event) => events.push(event), stop.signal);
    await client.create("/api/v1/namespaces", { apiVersion: "v1", kind: "Namespace", metadata: { name: "watched" } });
    const deadline = Date.now() + 5000;
    while (!events.some((e) => e.type === "BOOKMARK") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.equal(events[0]?.type, "ADDED");
    assert.equal(events[0]?.object.metadata?.name, "watched");
    assert.ok(
      events.some((e) => e.type === "BOOKMARK" && e.object.metadata?.resourceVersion),
      "a bookmark with its resourceVersion",
    );
    assert.equal(plain.openWatches, 1);
    stop.abort();
    await watching;
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(plain.openWatches, 0, "the aborted watch's connection is closed");
  });

  test("a resourceVersion out of the history: an ERROR event with 410, then the stream ends", async () => {
    for (let i = 0; i < 8; i++) plain.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: `churn-${i}` } });
    const events: WatchEvent[] = [];
    await client.watch("/api/v1/namespaces", { resourceVersion: "1" }, (event) => events.push(event), new AbortController().signal);
    assert.equal(events.length, 1);
    assert.equal(events[0]!.type, "ERROR");
    assert.equal(events[0]!.object.code, 410);
    assert.equal(events[0]!.object.reason, "Expired");
  });

  test("a refused watch rejects with the status", async () => {
    plain.faults.failNext("watch", 1, 503);
    const refused = await rejection(client.watch("/api/v1/namespaces", {}, () => {}, new AbortController().signal));
    assert.equal(refused.statusCode, 503);
    plain.faults.clear();
  });

  test("lines split anywhere (within a multi-byte character too) make the same events; a last line without a newline counts", async () => {
    const objects = [{ name: "ä€😀" }, { name: "plain" }, { name: "x".repeat(70_000) }, { name: "last" }];
    const stream = Buffer.from(objects.map((o, i) => JSON.stringify({ type: "ADDED", object: { metadata: o, i } })).join("\n"));
    // Chunk ends: byte by byte through the first event (each multi-byte character split), then larger.
    const chunks = [...Array.from({ length: 120 }, (_, i) => i + 1), 1000, 30_000, 100_000];
    const server = createServer((_, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      let at = 0;
      const next = () => {
        const end = chunks.find((c) => c > at) ?? stream.length;
        response.write(stream.subarray(at, Math.min(end, stream.length)));
        at = Math.min(end, stream.length);
        if (at < stream.length) setTimeout(next, 1);
        else response.end();
      };
      next();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const local = new KubeClient(
        await kubeconfigConnectionFromString(plain.kubeconfigYaml().replace(new URL(plain.url).host, `127.0.0.1:${(server.address() as AddressInfo).port}`)),
      );
      const names: unknown[] = [];
      await local.watch("/api/v1/namespaces", {}, (event) => names.push(event.object.metadata?.name), new AbortController().signal);
      assert.deepEqual(
        names,
        objects.map((o) => o.name),
      );
    } finally {
      server.close();
    }
  });
});

describe("credentials", () => {
  test("a kubeconfig token, and a tokenFile (relative to the kubeconfig) re-read once it changes", async () => {
    const admin = new KubeClient(
      await kubeconfigConnection([writeKubeconfig("token", guarded.url, { token: ADMIN_TOKEN }, { "insecure-skip-tls-verify": true })]),
    );
    await listAll(admin, "/apis/apps/v1/deployments");
    assert.equal(lastUser(guarded), ADMIN_USER);
    const bot = await serviceAccountToken(guarded, "bot");
    const path = writeKubeconfig("token-file", guarded.url, { tokenFile: "token" });
    writeFileSync(join(dir, "token-file", "token"), `${ADMIN_TOKEN}\n`);
    const client = new KubeClient(await kubeconfigConnection([path], { credentialsRecheckMs: RECHECK_MS }));
    await listAll(client, "/apis/apps/v1/deployments");
    assert.equal(lastUser(guarded), ADMIN_USER);
    writeFileSync(join(dir, "token-file", "token"), bot.token);
    await listAll(client, "/apis/apps/v1/deployments");
    assert.equal(lastUser(guarded), ADMIN_USER, "within the recheck interval the file is not read again");
    await rechecked();
    const forbidden = await rejection(listAll(client, "/apis/apps/v1/deployments"));
    assert.equal(forbidden.statusCode, 403);
    assert.equal(forbidden.reason, "Forbidden");
    assert.match(forbidden.statusMessage, /User "system:serviceaccount:default:bot" cannot list resource "deployments"/);
    const unknown = new KubeClient(await kubeconfigConnection([writeKubeconfig("bad-token", guarded.url, { token: "nobody-issued-this" })]));
    const unauthorized = await rejection(listAll(unknown, "/apis/apps/v1/deployments"));
    assert.equal(unauthorized.statusCode, 401);
    assert.equal(unauthorized.reason, "Unauthorized");
  });

  test("in a cluster: KUBERNETES_SERVICE_HOST/PORT, the service account's CA, its token file rotated", async () => {
    const accounts = [await serviceAccountToken(tls, "first"), await serviceAccountToken(tls, "second")];
    tls.put({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "accounts" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
      subjects: ["first", "second"].map((name) => ({ kind: "ServiceAccount", name, namespace: "default" })),
    });
    const serviceAccount = join(dir, "serviceaccount");
    mkdirSync(serviceAccount);
    writeFileSync(join(serviceAccount, "ca.crt"), readFileSync(caCert));
    writeFileSync(join(serviceAccount, "token"), accounts[0]!.token);
    const url = new URL(tls.url);
    const env = { KUBERNETES_SERVICE_HOST: url.hostname, KUBERNETES_SERVICE_PORT: url.port };
    const client = new KubeClient(inClusterConnection({ env, dir: serviceAccount, credentialsRecheckMs: RECHECK_MS }));
    await listAll(client, "/apis/apps/v1/deployments");
    assert.equal(lastUser(tls), accounts[0]!.user);
    // The kubelet replaces the projected token atomically.
    writeFileSync(join(serviceAccount, "token.new"), accounts[1]!.token);
    renameSync(join(serviceAccount, "token.new"), join(serviceAccount, "token"));
    await rechecked();
    await listAll(client, "/apis/apps/v1/deployments");
    assert.equal(lastUser(tls), accounts[1]!.user, "the rotated token is sent");
    assert.equal(
      inClusterConnection({ env: { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "6443" }, dir: serviceAccount }).server.href,
      "https://[fd00::1]:6443/",
    );
    assert.throws(() => inClusterConnection({ env, dir: join(dir, "no-such-dir") }), /the service account's CA: cannot read .*no-such-dir\/ca\.crt/);
    const skipped = new KubeClient(
      await kubeconfigConnection([writeKubeconfig("unverified", tls.url, { token: ADMIN_TOKEN }, { "insecure-skip-tls-verify": true })]),
    );
    await listAll(skipped, "/apis/apps/v1/deployments");
    const unverified = new KubeClient(await kubeconfigConnection([writeKubeconfig("no-ca", tls.url, { token: ADMIN_TOKEN })]));
    await assert.rejects(listAll(unverified, "/apis/apps/v1/deployments"), /self-signed certificate|unable to verify|unable to get local issuer/);
    const wrongName = new KubeClient(
      await kubeconfigConnection([
        writeKubeconfig(
          "server-name",
          tls.url,
          { token: ADMIN_TOKEN },
          { "certificate-authority-data": readFileSync(caCert).toString("base64"), "tls-server-name": "elsewhere.example" },
        ),
      ]),
    );
    await assert.rejects(listAll(wrongName, "/apis/apps/v1/deployments"), /elsewhere\.example/);
  });

  test("no token reaches a log line or an error: rotations logged, rejected and refused requests", async () => {
    const bot = await serviceAccountToken(guarded, "quiet-bot");
    const lines: string[] = [];
    const log = createLogger({ level: "debug", write: (line) => lines.push(line) });
    const path = writeKubeconfig("quiet", guarded.url, { tokenFile: "token" });
    writeFileSync(join(dir, "quiet", "token"), `${ADMIN_TOKEN}\n`);
    const client = new KubeClient(await kubeconfigConnection([path], { log, credentialsRecheckMs: RECHECK_MS }));
    await listAll(client, "/apis/apps/v1/deployments");
    writeFileSync(join(dir, "quiet", "token"), bot.token); // logged as a rotation; then 403
    await rechecked();
    const forbidden = await rejection(listAll(client, "/apis/apps/v1/deployments"));
    writeFileSync(join(dir, "quiet", "token"), "nobody-issued-this"); // logged as a rotation; then 401
    await rechecked();
    const unauthorized = await rejection(listAll(client, "/apis/apps/v1/deployments"));
    assert.deepEqual([forbidden.statusCode, unauthorized.statusCode], [403, 401]);
    assert.equal(lines.filter((line) => /Kubernetes credentials changed/.test(line)).length, 2, lines.join("\n"));
    const said = [...lines, forbidden.message, unauthorized.message, String(forbidden.body), String(unauthorized.body)].join("\n");
    for (const token of [ADMIN_TOKEN, bot.token, "nobody-issued-this"]) assert.ok(!said.includes(token), `a token shows in: ${said}`);
  });

  test("$KUBECONFIG as a path list: the first file naming an entry wins; username/password as basic authentication", async () => {
    const seen: IncomingHttpHeaders[] = [];
    const server = await listening(
      createServer((request, response) => {
        seen.push(request.headers);
        response.writeHead(200, { "content-type": "application/json" });
        response.end('{"items":[]}');
      }),
    );
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const first = join(dir, "first.yaml");
      const second = join(dir, "second.yaml");
      writeFileSync(
        first,
        [
          "current-context: x",
          "contexts: [{ name: x, context: { cluster: c, user: u } }]",
          "users: [{ name: u, user: { username: alice, password: s3cret } }]",
        ].join("\n"),
      );
      writeFileSync(
        second,
        [`clusters: [{ name: c, cluster: { server: "${url}" } }]`, "users: [{ name: u, user: { username: mallory, password: other } }]"].join("\n"),
      );
      const client = new KubeClient(await loadKubeConnection({ env: { KUBECONFIG: [first, second].join(delimiter) } }));
      await listAll(client, "/api/v1/namespaces");
      assert.equal(seen[0]?.authorization, `Basic ${Buffer.from("alice:s3cret").toString("base64")}`);
      assert.match(seen[0]?.["user-agent"] ?? "", /^flotilla-agent /, "the client names itself");
    } finally {
      server.close();
    }
  });

  test("an exec credential plugin (as EKS, GKE and AKS use) works through @kubernetes/client-node", async () => {
    const home = join(dir, "exec");
    mkdirSync(home);
    const marker = join(home, "ran");
    const plugin = join(home, "credential.sh");
    const credential = { apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential", status: { token: ADMIN_TOKEN } };
    writeFileSync(plugin, `#!/bin/sh\ntouch '${marker}'\nprintf '%s' '${JSON.stringify(credential)}'\n`);
    chmodSync(plugin, 0o755);
    const path = writeKubeconfig(
      "exec",
      guarded.url,
      { exec: { apiVersion: "client.authentication.k8s.io/v1", command: "../exec/credential.sh", interactiveMode: "Never" } },
      { "insecure-skip-tls-verify": true },
    );
    const client = new KubeClient(await kubeconfigConnection([path]));
    await listAll(client, "/apis/apps/v1/deployments");
    assert.ok(existsSync(marker), "the plugin ran (its path taken relative to the kubeconfig)");
    assert.equal(lastUser(guarded), ADMIN_USER, "with the plugin's token");
  });

  test("a kubeconfig that cannot be used says which file and which field", async () => {
    const load = (...paths: string[]) => kubeconfigConnection(paths);
    await assert.rejects(load(join(dir, "missing")), /cannot read kubeconfig .*missing: ENOENT/);
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    await assert.rejects(load(file("broken.yaml", "clusters: [")), /kubeconfig .*broken\.yaml is not valid YAML/);
    await assert.rejects(load(file("no-context.yaml", "clusters: []")), /kubeconfig .*no-context\.yaml: no current-context/);
    await assert.rejects(
      load(file("no-cluster.yaml", "current-context: x\ncontexts: [{ name: x, context: { cluster: gone } }]")),
      /no-cluster\.yaml: context "x" names cluster "gone", which is not defined/,
    );
    await assert.rejects(load(writeKubeconfig("no-server", "", { token: "t" })), /clusters\[name=c\]\.cluster\.server: missing/);
    await assert.rejects(
      load(writeKubeconfig("no-cert", "https://127.0.0.1:1", { "client-certificate": "client.pem", "client-key": "client.key" })),
      /no-cert\/config: users\[name=u\]\.user\.client-certificate: cannot read .*no-cert\/client\.pem/,
    );
    const [east, west] = ["east", "west"].map((region) => issueAgent(join(dir, "pki"), region));
    await assert.rejects(
      load(writeKubeconfig("mismatched", "https://127.0.0.1:1", { "client-certificate": east!.cert, "client-key": west!.key })),
      /the Kubernetes credentials \(.*agent-east\.pem, .*agent-west\.key\) do not load: .*key values mismatch/,
    );
    await assert.rejects(
      load(writeKubeconfig("half-pair", "https://127.0.0.1:1", { "client-certificate-data": "QUJD" })),
      /client-key: a client certificate needs both/,
    );
    await assert.rejects(load(writeKubeconfig("both", "https://127.0.0.1:1", { token: "t", username: "u", password: "p" })), /may not both be set/);
  });
});

async function listening(server: Server): Promise<Server> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}
