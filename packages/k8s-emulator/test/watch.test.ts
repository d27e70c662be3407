import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { makeInformer, type V1Deployment } from "@kubernetes/client-node";
import { collectWatch, deployment, startCluster, waitFor, type Cluster } from "@flotilla/testkit/emulator";

describe("watch through the client Watch class", () => {
  let c: Cluster;
  before(async () => {
    // Rollouts would add MODIFIED events; keep them out of the way here.
    c = await startCluster({ rolloutDelayMs: 60_000, watchHistory: 20 });
  });
  after(() => c.emu.stop());

  it("delivers synthetic ADDED for existing objects, then ADDED/MODIFIED/DELETED", async () => {
    await c.apply(deployment("pre"));
    const w = await collectWatch(c, "/apis/apps/v1/namespaces/default/deployments");
    await waitFor(() => w.events.length >= 1, 1000, "initial ADDED");
    assert.deepEqual(
      w.events.map((e) => [e.type, e.object.metadata.name]),
      [["ADDED", "pre"]],
    );
    assert.equal(w.events[0].object.kind, "Deployment"); // event objects carry their type

    await c.apply(deployment("live"));
    await c.apply(deployment("live", { replicas: 4 }));
    await c.apps.deleteNamespacedDeployment({ name: "live", namespace: "default" });
    await waitFor(() => w.events.some((e) => e.type === "DELETED"), 1000, "DELETED");
    // The rollout controller's status writes add MODIFIED events of their own.
    const types = w.events
      .slice(1)
      .map((e) => e.type)
      .filter((t, i, all) => t !== "MODIFIED" || all[i - 1] !== "MODIFIED");
    assert.deepEqual(types, ["ADDED", "MODIFIED", "DELETED"]);
    assert.ok(w.events.some((e) => e.type === "MODIFIED" && e.object.spec.replicas === 4));
    const rvs = w.events.map((e) => Number(e.object.metadata.resourceVersion));
    assert.deepEqual(
      rvs.slice(1),
      [...rvs.slice(1)].sort((a, b) => a - b),
      "resourceVersions increase",
    );
    w.abort();
  });

  it("resumes from a resourceVersion and filters by label selector (leaving the selection is a DELETED)", async () => {
    const list = await c.apps.listNamespacedDeployment({ namespace: "default" });
    const rv = list.metadata!.resourceVersion!;
    await c.apply(deployment("sel-a", { labels: { watch: "yes" } }));
    await c.apply(deployment("sel-b", { labels: { watch: "no" } }));
    const w = await collectWatch(c, "/apis/apps/v1/deployments", { resourceVersion: rv, labelSelector: "watch=yes" });
    await waitFor(() => w.events.length >= 1, 1000, "backlog");
    await c.apply(deployment("sel-a", { labels: { watch: "no" } }));
    await waitFor(() => w.events.some((e) => e.type === "DELETED"), 1000, "selector transition");
    assert.ok(w.events.every((e) => e.object.metadata.name === "sel-a"));
    assert.equal(w.events[0].type, "ADDED");
    const deleted = w.events.find((e) => e.type === "DELETED")!;
    assert.equal(deleted.object.metadata.labels.watch, "yes", "DELETED carries the last state that matched");
    w.abort();
  });

  it("sends BOOKMARKs when allowed", async () => {
    const w = await collectWatch(c, "/apis/apps/v1/namespaces/default/deployments", { allowWatchBookmarks: true, resourceVersion: c.emu.resourceVersion });
    await waitFor(() => w.events.some((e) => e.type === "BOOKMARK"), 1000, "bookmark");
    const bm = w.events.find((e) => e.type === "BOOKMARK")!;
    assert.deepEqual(Object.keys(bm.object).sort(), ["apiVersion", "kind", "metadata"]);
    assert.equal(bm.object.metadata.resourceVersion, c.emu.resourceVersion);
    w.abort();
  });

  it("answers a too-old resourceVersion with an ERROR event carrying 410 Expired", async () => {
    const old = c.emu.resourceVersion;
    // The history is 20 events per resource type, as the API server's watch cache is per resource:
    // churn of another type expires nothing.
    for (let i = 0; i < 25; i++) c.emu.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: `churn-${i}` } });
    const kept = await collectWatch(c, "/api/v1/configmaps", { resourceVersion: old });
    for (let i = 0; i < 25; i++) c.emu.put({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: `churn-${i}`, namespace: "default" } });
    await waitFor(() => kept.events.length === 25, 1000, "the configmaps watch sees the churn");
    assert.ok(kept.events.every((e) => e.type === "ADDED"));
    kept.abort();
    const w = await collectWatch(c, "/api/v1/configmaps", { resourceVersion: old });
    await waitFor(() => w.done, 1000, "watch end");
    assert.equal(w.events.length, 1);
    assert.equal(w.events[0].type, "ERROR");
    assert.equal(w.events[0].object.code, 410);
    assert.equal(w.events[0].object.reason, "Expired");
    assert.match(w.events[0].object.message, /too old resource version/);
  });

  it("ends the watch after timeoutSeconds", async () => {
    const openBefore = c.emu.openWatches;
    const started = Date.now();
    const w = await collectWatch(c, "/api/v1/namespaces", { timeoutSeconds: 1, resourceVersion: c.emu.resourceVersion });
    await waitFor(() => w.done, 1900, "timeout");
    assert.equal(w.error, null);
    assert.ok(Date.now() - started >= 900);
    assert.equal(c.emu.openWatches, openBefore);
  });

  it("sees writes made through the direct API", async () => {
    const w = await collectWatch(c, "/api/v1/namespaces", { fieldSelector: "metadata.name=direct", resourceVersion: c.emu.resourceVersion });
    c.emu.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: "direct" } });
    assert.equal(c.emu.delete("v1", "Namespace", "direct"), true);
    await waitFor(() => w.events.length >= 2, 1000, "direct events");
    assert.deepEqual(
      w.events.map((e) => e.type),
      ["ADDED", "DELETED"],
    );
    w.abort();
  });

  it("sends each event's object as a Table when asked for one (kubectl get -w), the column definitions only in the first", async () => {
    await c.apply(deployment("table-a", { labels: { printed: "yes" } }));
    await c.apply(deployment("table-b", { labels: { printed: "yes" } }));
    // The parameters in another order than kubectl's: the server reads them as a set.
    const accept = "application/json;as=Table;g=meta.k8s.io;v=v1";
    const watch = async (query: string) => {
      const res = await fetch(`${c.emu.url}/apis/apps/v1/namespaces/default/deployments?watch=true&timeoutSeconds=1&labelSelector=printed%3Dyes${query}`, {
        headers: { Accept: accept },
      });
      assert.equal(res.status, 200);
      return (await res.text())
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line));
    };
    const events = await watch("");
    assert.deepEqual(
      events.slice(0, 2).map((e) => [e.type, e.object.kind, e.object.rows.map((r: any) => r.cells[0])]),
      [
        ["ADDED", "Table", ["table-a"]],
        ["ADDED", "Table", ["table-b"]],
      ],
    );
    assert.deepEqual(
      events[0].object.columnDefinitions.slice(0, 5).map((d: any) => d.name),
      ["Name", "Ready", "Up-to-date", "Available", "Age"],
    );
    for (const e of events.slice(1)) assert.equal(e.object.columnDefinitions, null, "later events leave the columns out");
    const [first] = events[0].object.rows;
    // Pods never get ready here (rolloutDelayMs): READY 0/2; UP-TO-DATE and AVAILABLE are integers.
    assert.deepEqual(first.cells.slice(0, 2), ["table-a", "0/2"]);
    assert.deepEqual(
      first.cells.slice(2, 4).map((cell: unknown) => typeof cell),
      ["number", "number"],
    );
    assert.equal(events[0].object.metadata.resourceVersion, first.object.metadata.resourceVersion);
    // includeObject: Metadata by default; Object as kubectl asks; None.
    assert.equal(first.object.kind, "PartialObjectMetadata");
    assert.equal(first.object.apiVersion, "meta.k8s.io/v1");
    assert.equal(first.object.metadata.name, "table-a");
    assert.equal((await watch("&includeObject=Object"))[0].object.rows[0].object.spec.replicas, 2);
    assert.equal((await watch("&includeObject=None"))[0].object.rows[0].object, null);
    const bad = await fetch(`${c.emu.url}/apis/apps/v1/namespaces/default/deployments?watch=true&includeObject=All`, { headers: { Accept: accept } });
    assert.equal(bad.status, 400);
    assert.equal(
      ((await bad.json()) as any).message,
      "Unable to convert to Table as requested: includeObject: Invalid value: \"All\": must be 'Metadata', 'Object', 'None', or empty",
    );
  });

  it("drives the client informer (list, then watch from the list resourceVersion, re-list after a drop)", async () => {
    const informer = makeInformer<V1Deployment>(
      c.kc,
      "/apis/apps/v1/namespaces/default/deployments",
      () => c.apps.listNamespacedDeployment({ namespace: "default", labelSelector: "informer=yes" }),
      "informer=yes",
    );
    const seen: string[] = [];
    informer.on("add", (d) => seen.push(`add ${d.metadata?.name}`));
    informer.on("update", (d) => seen.push(`update ${d.metadata?.name}`));
    informer.on("delete", (d) => seen.push(`delete ${d.metadata?.name}`));
    await c.apply(deployment("inf-1", { labels: { informer: "yes" } }));
    await informer.start();
    await waitFor(() => seen.includes("add inf-1"), 1000, "informer add");
    await c.apply(deployment("inf-2", { labels: { informer: "yes" } }));
    await waitFor(() => seen.includes("add inf-2"), 1000, "informer add from watch");
    c.emu.faults.dropWatches();
    await c.apps.deleteNamespacedDeployment({ name: "inf-1", namespace: "default" });
    await waitFor(() => seen.includes("delete inf-1"), 1500, "informer delete after reconnect");
    assert.deepEqual(
      informer.list().map((d) => d.metadata?.name),
      ["inf-2"],
    );
    await informer.stop();
  });
});
