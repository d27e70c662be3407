import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { deployment, expectApiError, startCluster, waitFor, type Cluster } from "@flotilla/testkit/emulator";

describe("CRUD through the real client", () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster();
    await c.core.createNamespace({ body: { metadata: { name: "apps" } } });
  });
  after(() => c.emu.stop());

  it("server-side apply creates, bumps generation only on spec changes, and no-op applies keep the resourceVersion", async () => {
    const created = await c.apply(deployment("web", { namespace: "apps" }));
    assert.equal(created.metadata?.generation, 1);
    assert.ok(created.metadata?.uid);
    assert.ok(created.metadata?.creationTimestamp);
    const mf = created.metadata?.managedFields ?? [];
    assert.equal(mf.length, 1);
    assert.equal(mf[0].manager, "flotilla-agent");
    assert.equal(mf[0].operation, "Apply");
    assert.ok((mf[0].fieldsV1 as any)["f:spec"]["f:replicas"]);

    // Let the rollout controller finish its status writes, then apply the
    // same manifest again: nothing changes, not even the resourceVersion.
    const settled = await waitFor(() => {
      const d = c.emu.get("apps/v1", "Deployment", "apps", "web") as any;
      return d?.status?.conditions?.some((x: any) => x.reason === "NewReplicaSetAvailable") && d;
    });
    const again = await c.apply(deployment("web", { namespace: "apps" }));
    assert.equal(again.metadata?.resourceVersion, settled.metadata.resourceVersion);
    assert.equal(c.emu.resourceVersion, settled.metadata.resourceVersion);

    // Label change: new resourceVersion, same generation.
    const relabeled = await c.apply(deployment("web", { namespace: "apps", labels: { tier: "front" } }));
    assert.equal(relabeled.metadata?.generation, 1);
    assert.ok(Number(relabeled.metadata?.resourceVersion) > Number(settled.metadata.resourceVersion));

    // Spec change: generation 2.
    const scaled = await c.apply(deployment("web", { namespace: "apps", labels: { tier: "front" }, replicas: 3 }));
    assert.equal(scaled.metadata?.generation, 2);
    assert.equal((scaled as any).spec.replicas, 3);

    // Dropping a label from the applied config removes it (this manager owned it alone).
    const dropped = await c.apply(deployment("web", { namespace: "apps", replicas: 3 }));
    assert.deepEqual(dropped.metadata?.labels, { app: "web" });

    // Typed read agrees.
    const read = await c.apps.readNamespacedDeployment({ name: "web", namespace: "apps" });
    assert.equal(read.spec?.replicas, 3);
    assert.equal(read.spec?.template.spec?.containers[0].imagePullPolicy, "IfNotPresent"); // defaulted
  });

  it("apply conflicts with another manager without force (409) and takes ownership with force", async () => {
    await c.apply(deployment("contested", { namespace: "apps", replicas: 1 }), "owner-a");
    const body = await expectApiError(c.apply(deployment("contested", { namespace: "apps", replicas: 5 }), "owner-b"), 409);
    assert.equal(body.reason, "Conflict");
    assert.match(body.message, /Apply failed with 1 conflict: conflict with "owner-a" using apps\/v1: \.spec\.replicas/);
    assert.equal(body.details.causes[0].reason, "FieldManagerConflict");
    assert.equal(body.details.causes[0].field, ".spec.replicas");

    // Same values are shared, not conflicting.
    await c.apply(deployment("contested", { namespace: "apps", replicas: 1 }), "owner-b");

    const forced = await c.apply(deployment("contested", { namespace: "apps", replicas: 5 }), "owner-b", true);
    assert.equal((forced as any).spec.replicas, 5);
    const a = forced.metadata?.managedFields?.find((e) => e.manager === "owner-a");
    assert.equal((a?.fieldsV1 as any)?.["f:spec"]?.["f:replicas"], undefined, "owner-a lost spec.replicas");
  });

  it("apply without fieldManager is rejected", async () => {
    const body = await expectApiError(
      c.objects.patch(deployment("nofm", { namespace: "apps" }), undefined, undefined, undefined, undefined, PatchStrategy.ServerSideApply),
      422,
    );
    assert.match(body.message, /fieldManager: Required value/);
  });

  it("create, AlreadyExists, update with stale resourceVersion, merge and json patch", async () => {
    const svc = await c.core.createNamespacedService({
      namespace: "apps",
      body: { metadata: { name: "web", labels: { app: "web" } }, spec: { selector: { app: "web" }, ports: [{ port: 80 }] } },
    });
    assert.match(svc.spec?.clusterIP ?? "", /^10\.96\./);
    assert.equal(svc.spec?.ports?.[0].targetPort, 80);
    assert.equal(svc.metadata?.generation, undefined);

    const exists = await expectApiError(
      c.core.createNamespacedService({ namespace: "apps", body: { metadata: { name: "web" }, spec: { ports: [{ port: 80 }] } } }),
      409,
    );
    assert.equal(exists.reason, "AlreadyExists");
    assert.equal(exists.message, 'services "web" already exists');

    svc.metadata!.labels = { app: "web", v: "2" };
    const updated = await c.core.replaceNamespacedService({ name: "web", namespace: "apps", body: svc });
    assert.equal(updated.metadata?.labels?.v, "2");
    assert.equal(updated.spec?.clusterIP, svc.spec?.clusterIP);

    // svc still carries the old resourceVersion.
    const stale = await expectApiError(c.core.replaceNamespacedService({ name: "web", namespace: "apps", body: svc }), 409);
    assert.equal(stale.reason, "Conflict");
    assert.match(stale.message, /the object has been modified/);

    const merged = await c.core.patchNamespacedService(
      { name: "web", namespace: "apps", body: { metadata: { annotations: { note: "x" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    assert.equal(merged.metadata?.annotations?.note, "x");
    // The generated client defaults to JSON patch.
    const patched = await c.core.patchNamespacedService({
      name: "web",
      namespace: "apps",
      body: [{ op: "replace", path: "/metadata/labels/v", value: "3" }],
    });
    assert.equal(patched.metadata?.labels?.v, "3");
    const failed = await expectApiError(
      c.core.patchNamespacedService({ name: "web", namespace: "apps", body: [{ op: "test", path: "/metadata/labels/v", value: "nope" }] }),
      422,
    );
    assert.match(failed.message, /test failed/);
  });

  it("get/list with label and field selectors, all namespaces and pagination", async () => {
    for (const [name, tier] of [
      ["a1", "front"],
      ["a2", "back"],
      ["a3", "front"],
    ]) {
      await c.apply(deployment(name, { namespace: "apps", labels: { tier, group: "sel" } }));
    }
    await c.apply(deployment("d1", { namespace: "default", labels: { tier: "front", group: "sel" } }));
    const names = (l: { items: { metadata?: { name?: string } }[] }) => l.items.map((i) => i.metadata?.name);

    assert.deepEqual(names(await c.apps.listNamespacedDeployment({ namespace: "apps", labelSelector: "group=sel,tier==front" })), ["a1", "a3"]);
    assert.deepEqual(names(await c.apps.listNamespacedDeployment({ namespace: "apps", labelSelector: "group=sel,tier!=front" })), ["a2"]);
    assert.deepEqual(names(await c.apps.listDeploymentForAllNamespaces({ labelSelector: "group, tier in (front)" })), ["a1", "a3", "d1"]);
    assert.deepEqual(names(await c.apps.listDeploymentForAllNamespaces({ labelSelector: "group,tier notin (front)" })), ["a2"]);
    assert.deepEqual(names(await c.apps.listNamespacedDeployment({ namespace: "apps", labelSelector: "!group" })), ["contested", "web"]);
    assert.deepEqual(names(await c.apps.listDeploymentForAllNamespaces({ fieldSelector: "metadata.name=a2" })), ["a2"]);
    assert.deepEqual(names(await c.apps.listDeploymentForAllNamespaces({ labelSelector: "group=sel", fieldSelector: "metadata.namespace!=apps" })), ["d1"]);
    await expectApiError(c.apps.listDeploymentForAllNamespaces({ labelSelector: "tier in front" }), 400);
    await expectApiError(c.apps.listDeploymentForAllNamespaces({ fieldSelector: "spec.replicas=1" }), 400);

    // KubernetesObjectApi.list resolves the plural through discovery.
    const list = await c.objects.list("apps/v1", "Deployment", "apps", undefined, undefined, undefined, undefined, "group=sel");
    assert.equal(list.kind, "DeploymentList");
    assert.ok(Number(list.metadata?.resourceVersion) > 0);
    assert.equal(list.items.length, 3);

    const page1 = await c.apps.listNamespacedDeployment({ namespace: "apps", limit: 2 });
    assert.equal(page1.items.length, 2);
    assert.ok(page1.metadata?._continue);
    assert.equal(page1.metadata?.remainingItemCount, 3);
    const page2 = await c.apps.listNamespacedDeployment({ namespace: "apps", limit: 2, _continue: page1.metadata?._continue });
    const page3 = await c.apps.listNamespacedDeployment({ namespace: "apps", limit: 2, _continue: page2.metadata?._continue });
    assert.equal(page3.metadata?._continue, undefined);
    assert.deepEqual([...names(page1), ...names(page2), ...names(page3)], ["a1", "a2", "a3", "contested", "web"]);
  });

  it("pages with a selector stay in key order while objects come and go between pages", async () => {
    await c.core.createNamespace({ body: { metadata: { name: "paged" } } });
    for (const name of ["p1", "p2", "p3", "p4", "p5"]) await c.apply(deployment(name, { namespace: "paged", labels: { paged: name === "p3" ? "no" : "yes" } }));
    const page = (token?: string) => c.apps.listDeploymentForAllNamespaces({ labelSelector: "paged=yes", limit: 2, ...(token ? { _continue: token } : {}) });
    const names = (l: { items: { metadata?: { name?: string } }[] }) => l.items.map((i) => i.metadata?.name);
    const first = await page();
    assert.deepEqual(names(first), ["p1", "p2"]);
    assert.equal(first.metadata?.remainingItemCount, 2);
    // Added before and after the position, and one of the next page removed: the next page is read from the current objects.
    await c.apply(deployment("p0", { namespace: "paged", labels: { paged: "yes" } }));
    await c.apply(deployment("p6", { namespace: "paged", labels: { paged: "yes" } }));
    await c.apps.deleteNamespacedDeployment({ name: "p4", namespace: "paged" });
    const second = await page(first.metadata?._continue);
    assert.deepEqual(names(second), ["p5", "p6"]);
    assert.equal(second.metadata?._continue, undefined);
    assert.equal(second.metadata?.remainingItemCount, undefined);
  });

  it("the direct apply and create write what the API's apply and create write", async () => {
    // The same object in two namespaces, one applied through the API and one directly.
    const body = (namespace: string) => deployment("applied", { namespace, labels: { direct: "yes" } });
    const viaApi = await c.apply(body("apps"), "bench-manager");
    const direct = c.emu.apply(body("default") as Parameters<typeof c.emu.apply>[0], { manager: "bench-manager" });
    const fields = (o: { metadata?: { managedFields?: unknown[] } }) =>
      ((o.metadata?.managedFields ?? []) as { manager: string; operation: string; fieldsV1: unknown }[]).map(({ manager, operation, fieldsV1 }) => ({
        manager,
        operation,
        fieldsV1,
      }));
    assert.deepEqual(fields(direct), fields(viaApi));
    assert.deepEqual(direct.spec, JSON.parse(JSON.stringify(viaApi.spec)));
    // Once its rollout is done, applied again through the API by the same manager, the directly applied object does not change.
    const settled = await waitFor(() => {
      const d = c.emu.get("apps/v1", "Deployment", "default", "applied") as any;
      return d?.status?.conditions?.some((x: any) => x.reason === "NewReplicaSetAvailable") && d;
    });
    const again = await c.apply(body("default"), "bench-manager", true);
    assert.equal(again.metadata?.resourceVersion, settled.metadata.resourceVersion);
    // Another manager's values conflict unless forced, as through the API.
    const changed = deployment("applied", { namespace: "default", image: "other:2", labels: { direct: "yes" } }) as Parameters<typeof c.emu.apply>[0];
    assert.throws(() => c.emu.apply(changed, { manager: "someone-else" }), /conflict/);
    assert.equal((c.emu.apply(changed, { manager: "someone-else", force: true }) as any).spec.template.spec.containers[0].image, "other:2");

    const ns = c.emu.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "direct-ns" } }, { manager: "bench-manager" });
    assert.deepEqual(
      ns.metadata.managedFields?.map((e) => [e.manager, e.operation]),
      [["bench-manager", "Update"]],
    );
    assert.throws(() => c.emu.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: "direct-ns" } }, { manager: "bench-manager" }), /already exists/);
    assert.throws(() => c.emu.apply(deployment("nowhere", { namespace: "missing" }) as Parameters<typeof c.emu.apply>[0], { manager: "m" }), /not found/);
  });

  it("delete with propagationPolicy Background, then 404", async () => {
    await c.apply(deployment("doomed", { namespace: "apps" }));
    const status = await c.apps.deleteNamespacedDeployment({ name: "doomed", namespace: "apps", propagationPolicy: "Background" });
    assert.equal(status.status, "Success");
    assert.equal(status.details?.name, "doomed");
    const gone = await expectApiError(c.apps.readNamespacedDeployment({ name: "doomed", namespace: "apps" }), 404);
    assert.equal(gone.reason, "NotFound");
    assert.equal(gone.message, 'deployments.apps "doomed" not found');
    assert.deepEqual({ name: gone.details.name, group: gone.details.group, kind: gone.details.kind }, { name: "doomed", group: "apps", kind: "deployments" });
    await expectApiError(c.objects.delete(deployment("doomed", { namespace: "apps" })), 404);

    // DeleteOptions in the body work too.
    await c.apply(deployment("doomed2", { namespace: "apps" }));
    await c.apps.deleteNamespacedDeployment({ name: "doomed2", namespace: "apps", body: { propagationPolicy: "Foreground" } });
    assert.equal(c.emu.get("apps/v1", "Deployment", "apps", "doomed2"), undefined);
  });

  it("rejects invalid names with 422 and objects in missing namespaces with 404", async () => {
    // KubernetesObjectApi lowercases URLs, so an upper-case name would be a
    // name/URL mismatch (400); the typed API shows the 422.
    const bad = await expectApiError(c.apps.createNamespacedDeployment({ namespace: "apps", body: deployment("Bad_Name", { namespace: "apps" }) }), 422);
    assert.equal(bad.reason, "Invalid");
    assert.match(bad.message, /^Deployment\.apps "Bad_Name" is invalid: metadata\.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain/);
    assert.equal(bad.details.causes[0].field, "metadata.name");
    await expectApiError(c.apply(deployment("bad_name", { namespace: "apps" })), 422);
    const mismatch = await expectApiError(c.apply(deployment("Bad_Name", { namespace: "apps" })), 400);
    assert.match(mismatch.message, /does not match the name on the URL/);
    await expectApiError(c.core.createNamespace({ body: { metadata: { name: "a.b" } } }), 422); // namespaces are labels
    await expectApiError(c.core.createNamespacedService({ namespace: "apps", body: { metadata: { name: "1svc" }, spec: { ports: [{ port: 1 }] } } }), 422);
    const noSelector = deployment("nosel", { namespace: "apps" }) as any;
    delete noSelector.spec.selector;
    const sel = await expectApiError(c.apply(noSelector), 422);
    assert.match(sel.message, /spec\.selector: Required value/);

    const missing = await expectApiError(c.apply(deployment("web", { namespace: "nowhere" })), 404);
    assert.equal(missing.message, 'namespaces "nowhere" not found');
    await expectApiError(c.apps.createNamespacedDeployment({ namespace: "nowhere", body: deployment("web", { namespace: "nowhere" }) }), 404);
  });

  it("dryRun=All stores nothing", async () => {
    // Earlier tests' rollouts write status on their own: measure once every Deployment's is done.
    await waitFor(
      () =>
        c.emu
          .list("apps/v1", "Deployment")
          .every((d) => (d.status as { conditions?: { reason?: string }[] } | undefined)?.conditions?.some((x) => x.reason === "NewReplicaSetAvailable")),
      10_000,
      "earlier rollouts to finish",
    );
    const before = c.emu.resourceVersion;
    const dry = await c.objects.patch(deployment("dry", { namespace: "apps" }), undefined, "All", "m", undefined, PatchStrategy.ServerSideApply);
    assert.equal(dry.metadata?.name, "dry");
    assert.equal(c.emu.get("apps/v1", "Deployment", "apps", "dry"), undefined);
    await c.apps.deleteNamespacedDeployment({ name: "web", namespace: "apps", dryRun: "All" });
    assert.ok(c.emu.get("apps/v1", "Deployment", "apps", "web"));
    assert.equal(c.emu.resourceVersion, before);
  });

  it("deleting a namespace deletes its objects", async () => {
    await c.core.createNamespace({ body: { metadata: { name: "temp" } } });
    await c.apply(deployment("x", { namespace: "temp" }));
    const ns = await c.core.deleteNamespace({ name: "temp" });
    assert.equal((ns as any).status?.phase, "Terminating");
    await waitFor(() => c.emu.get("v1", "Namespace", "temp") === undefined, 3000, "namespace gone");
    assert.deepEqual(c.emu.list("apps/v1", "deployments", "temp"), []);
    await expectApiError(c.core.readNamespace({ name: "temp" }), 404);
  });

  it("status writes to the main resource are ignored; the status subresource writes them", async () => {
    const d = deployment("st", { namespace: "apps" }) as any;
    d.status = { replicas: 99 };
    const created = await c.apply(d);
    assert.notEqual((created as any).status?.replicas, 99);
    const patched = await c.apps.patchNamespacedDeploymentStatus(
      { name: "st", namespace: "apps", body: { status: { observedGeneration: 7 } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    assert.equal(patched.status?.observedGeneration, 7);
  });
});
