// The emulator measured against the real thing: one fixed corpus of requests (create, apply with
// and without conflicts, get, list with selectors, watch, delete with propagation, the scale
// subresource, table output, bad input) is sent to the emulator and to flotilla-kube, and the
// answers are compared: status code, the Status reason and causes, and the object bodies with
// what only identifies one server's instance (uid, resourceVersion, timestamps) left out.
// Every difference that remains is listed with its reason in docs/emulator-differences.md; a
// difference not listed there fails, and so does a listed one that no longer differs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { request } from "node:https";
import { KubeConfig } from "@kubernetes/client-node";
import { AGENT_SERVICE_ACCOUNT, kubeTargets, type KubeCluster } from "@flotilla/testkit/kube-target";

const DIFFERENCES_DOC = new URL("../../../docs/emulator-differences.md", import.meta.url);
const NS = "differential";

interface Answer {
  status: number;
  body: unknown;
}

interface Step {
  name: string;
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  body?: unknown;
  contentType?: string;
  accept?: string;
  /** Reads a watch: the first `events` events' types and objects, then closes. */
  watchEvents?: number;
  /** Sent as this user (Impersonate-User) rather than as the admin. */
  impersonate?: string;
}

const deployment = (name: string, replicas = 1) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace: NS, labels: { app: name, tier: "web" } },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "app", image: "nginx:1.27", ports: [{ containerPort: 80 }] }] } },
  },
});
const APPLY = "application/apply-patch+yaml";
const TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io";
const deployments = `/apis/apps/v1/namespaces/${NS}/deployments`;

/** The corpus, in order: later steps see what earlier ones created. */
const CORPUS: Step[] = [
  { name: "create a namespace", method: "POST", path: "/api/v1/namespaces", body: { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } } },
  { name: "create a Deployment", method: "POST", path: deployments, body: deployment("web") },
  { name: "create it again", method: "POST", path: deployments, body: deployment("web") },
  { name: "get it", method: "GET", path: `${deployments}/web` },
  { name: "get a missing one", method: "GET", path: `${deployments}/missing` },
  { name: "apply a new one as manager a", method: "PATCH", path: `${deployments}/api?fieldManager=a`, body: deployment("api"), contentType: APPLY },
  {
    name: "apply its replicas as manager b: a conflict",
    method: "PATCH",
    path: `${deployments}/api?fieldManager=b`,
    body: { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "api", namespace: NS }, spec: { replicas: 3 } },
    contentType: APPLY,
  },
  {
    name: "apply its replicas as manager b with force",
    method: "PATCH",
    path: `${deployments}/api?fieldManager=b&force=true`,
    body: { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "api", namespace: NS }, spec: { replicas: 3 } },
    contentType: APPLY,
  },
  { name: "apply without a field manager", method: "PATCH", path: `${deployments}/api`, body: deployment("api"), contentType: APPLY },
  { name: "list by label selector", method: "GET", path: `${deployments}?labelSelector=app%3Dweb` },
  { name: "list by a set selector", method: "GET", path: `${deployments}?labelSelector=app+in+(web,api),tier` },
  { name: "list by a bad selector", method: "GET", path: `${deployments}?labelSelector=app+in+(` },
  { name: "list by field selector", method: "GET", path: `${deployments}?fieldSelector=metadata.name%3Dapi` },
  { name: "get the scale", method: "GET", path: `${deployments}/web/scale` },
  {
    name: "put the scale",
    method: "PUT",
    path: `${deployments}/web/scale`,
    body: { apiVersion: "autoscaling/v1", kind: "Scale", metadata: { name: "web", namespace: NS }, spec: { replicas: 2 } },
  },
  { name: "table output", method: "GET", path: `${deployments}/web`, accept: TABLE },
  {
    name: "create without a selector",
    method: "POST",
    path: deployments,
    body: { ...deployment("bad"), spec: { ...deployment("bad").spec, selector: undefined } },
  },
  { name: "create with a bad name", method: "POST", path: deployments, body: { ...deployment("Bad_Name") } },
  { name: "create with a negative replicas", method: "POST", path: deployments, body: deployment("neg", -1) },
  {
    name: "create with a body of another namespace",
    method: "POST",
    path: deployments,
    body: { ...deployment("x"), metadata: { name: "x", namespace: "other" } },
  },
  { name: "a body that is not JSON", method: "POST", path: deployments, body: "{not json", contentType: "application/json" },
  {
    name: "a merge patch of a label",
    method: "PATCH",
    path: `${deployments}/web`,
    body: { metadata: { labels: { patched: "yes" } } },
    contentType: "application/merge-patch+json",
  },
  {
    name: "a JSON patch that fails its test",
    method: "PATCH",
    path: `${deployments}/web`,
    body: [{ op: "test", path: "/metadata/labels/app", value: "nope" }],
    contentType: "application/json-patch+json",
  },
  {
    name: "strict field validation of an unknown field",
    method: "POST",
    path: `${deployments}?fieldValidation=Strict`,
    body: { ...deployment("strict"), spec: { ...deployment("strict").spec, bogus: 1 } },
  },
  { name: "a dry-run create", method: "POST", path: `${deployments}?dryRun=All`, body: deployment("dry") },
  { name: "get the dry-run one: not there", method: "GET", path: `${deployments}/dry` },
  { name: "list with a limit", method: "GET", path: `${deployments}?limit=1` },
  { name: "a watch from now: the next event", method: "GET", path: `${deployments}?watch=1&labelSelector=app%3Dweb`, watchEvents: 0 },
  {
    name: "delete with foreground propagation",
    method: "DELETE",
    path: `${deployments}/api`,
    body: { kind: "DeleteOptions", apiVersion: "v1", propagationPolicy: "Foreground" },
  },
  {
    // The agent's ServiceAccount (kubeTargets applies deploy/kubernetes there): RBAC lets it
    // write Secrets, its ValidatingAdmissionPolicy refuses it a namespace not handed to flotilla.
    name: "a Secret the agent's admission policy refuses",
    method: "POST",
    path: `/api/v1/namespaces/${NS}/secrets`,
    body: { apiVersion: "v1", kind: "Secret", metadata: { name: "refused", namespace: NS }, data: { k: "eA==" } },
    impersonate: AGENT_SERVICE_ACCOUNT,
  },
  { name: "delete with background propagation", method: "DELETE", path: `${deployments}/web?propagationPolicy=Background` },
  { name: "delete a missing one", method: "DELETE", path: `${deployments}/missing` },
  { name: "delete the namespace", method: "DELETE", path: `/api/v1/namespaces/${NS}` },
  { name: "create in the terminating namespace", method: "POST", path: deployments, body: deployment("late") },
];

/** What identifies one server's instance, or changes with time, is left out of the comparison. */
const VOLATILE = new Set([
  "uid",
  "resourceVersion",
  "creationTimestamp",
  "deletionTimestamp",
  "time",
  "managedFields",
  "generation",
  "status",
  "observedGeneration",
  "continue",
  "remainingItemCount",
  "selfLink",
]);

/** A Table's cells of the object's age and of its controllers' status: when each server answered, how far its controllers got. */
const LIVE_COLUMNS = new Set(["Age", "Ready", "Up-to-date", "Available"]);

function withoutLiveCells(body: unknown): unknown {
  const table = body as { kind?: string; columnDefinitions?: { name: string }[]; rows?: { cells: unknown[] }[] };
  if (table?.kind !== "Table" || !table.columnDefinitions || !table.rows) return body;
  const live = table.columnDefinitions.map((c) => LIVE_COLUMNS.has(c.name));
  return { ...table, rows: table.rows.map((row) => ({ ...row, cells: row.cells.map((cell, i) => (live[i] ? "<live>" : cell)) })) };
}

function normalize(value: unknown, key = ""): unknown {
  if (Array.isArray(value)) return value.map((v) => normalize(v));
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b))) {
      // A Status object's status ("Failure") is kept; an object's status is the controllers'.
      if (VOLATILE.has(k) && !(k === "status" && typeof v === "string")) continue;
      out[k] = normalize(v, k);
    }
    return out;
  }
  if (key === "message" && typeof value === "string") return undefined; // wording differs; reason and causes carry the meaning
  return value;
}

async function send(cluster: KubeCluster, step: Step): Promise<Answer> {
  const config = new KubeConfig();
  config.loadFromString(cluster.adminKubeconfig);
  const url = new URL(cluster.server + step.path);
  const options: Record<string, any> = { method: step.method, headers: {} };
  await config.applyToHTTPSOptions(options);
  const body = step.body === undefined ? undefined : typeof step.body === "string" ? step.body : JSON.stringify(step.body);
  options.headers["content-type"] = step.contentType ?? "application/json";
  options.headers.accept = step.accept ?? "application/json";
  if (step.impersonate) options.headers["impersonate-user"] = step.impersonate;
  // A DELETE's body is not chunked by Node's client: its length must be sent.
  if (body !== undefined) options.headers["content-length"] = Buffer.byteLength(body);
  return new Promise((resolve, reject) => {
    const req = request(url, options, (res) => {
      let text = "";
      res.setEncoding("utf8");
      const done = () => {
        let parsed: unknown = text;
        try {
          parsed =
            step.watchEvents !== undefined
              ? text
                  .split("\n")
                  .filter(Boolean)
                  .map((line) => JSON.parse(line))
              : JSON.parse(text);
        } catch {}
        resolve({ status: res.statusCode ?? 0, body: parsed });
      };
      res.on("data", (chunk: string) => {
        text += chunk;
      });
      res.on("end", done);
      if (step.watchEvents !== undefined) {
        setTimeout(() => {
          req.destroy();
          done();
        }, 1500);
      }
    });
    req.on("error", (err) => (step.watchEvents !== undefined ? undefined : reject(err)));
    req.end(body);
  });
}

/** The differences listed in the doc: its table's first column, one step name each. */
function listedDifferences(): Set<string> {
  const text = readFileSync(DIFFERENCES_DOC, "utf8");
  return new Set([...text.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]!));
}

const real = kubeTargets.find((t) => t.name === "real")!;

test("the emulator answers the corpus as a real API server does, but for the differences listed in docs/", { skip: real.skip, timeout: 300_000 }, async () => {
  const emulator = await kubeTargets.find((t) => t.name === "emulator")!.start();
  const server = await real.start();
  try {
    const differences: string[] = [];
    const detail: string[] = [];
    for (const step of CORPUS) {
      const [e, r] = [await send(emulator, step), await send(server, step)];
      const [ne, nr] = [JSON.stringify(normalize(withoutLiveCells(e.body))), JSON.stringify(normalize(withoutLiveCells(r.body)))];
      if (e.status !== r.status || ne !== nr) {
        differences.push(step.name);
        detail.push(`${step.name}: emulator ${e.status} ${ne}\n   real ${r.status} ${nr}`);
      }
    }
    console.log(`${differences.length} of ${CORPUS.length} answers differ from the real API server's`);
    const listed = listedDifferences();
    const unlisted = differences.filter((d) => !listed.has(d));
    const gone = [...listed].filter((d) => !differences.includes(d));
    assert.deepEqual(
      unlisted,
      [],
      `differences not in docs/emulator-differences.md:\n${detail.filter((d) => unlisted.some((u) => d.startsWith(u))).join("\n")}`,
    );
    assert.deepEqual(gone, [], "listed differences that no longer differ: remove them from the doc");
  } finally {
    await emulator.stop();
    await server.stop();
  }
});
