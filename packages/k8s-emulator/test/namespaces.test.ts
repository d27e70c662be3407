// Namespace lifecycle: Terminating with the kubernetes finalizer, the 403 on
// new content, the 409 on a second delete, then the namespace and its content go.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { collectWatch, deployment, expectApiError, startCluster, waitFor, type Cluster } from "@flotilla/testkit/emulator";

describe("namespace lifecycle", () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({ namespaceDeletionDelayMs: 400 });
  });
  after(() => c.emu.stop());

  it("DELETE makes the namespace Terminating; new content is forbidden; then content and namespace go", async () => {
    const created: any = await c.core.createNamespace({ body: { metadata: { name: "doomed" } } });
    assert.deepEqual(created.spec.finalizers, ["kubernetes"]);
    assert.equal(created.status.phase, "Active");
    await c.apply(deployment("web", { namespace: "doomed" }));
    const w = await collectWatch(c, "/api/v1/namespaces", { fieldSelector: "metadata.name=doomed", resourceVersion: c.emu.resourceVersion });

    // Held in Terminating while the test looks, however long that takes on a loaded machine.
    const release = c.emu.holdNamespaceDeletion();
    // Plain HTTP: the typed client would read the body as a V1Status.
    const res = await fetch(`${c.emu.url}/api/v1/namespaces/doomed`, { method: "DELETE" });
    assert.equal(res.status, 200);
    const deleted: any = await res.json();
    assert.equal(deleted.kind, "Namespace");
    assert.equal(deleted.status.phase, "Terminating");
    assert.ok(deleted.metadata.deletionTimestamp);
    assert.deepEqual(deleted.spec.finalizers, ["kubernetes"]);

    const read: any = await c.core.readNamespace({ name: "doomed" });
    assert.equal(read.status.phase, "Terminating");
    const remaining = await waitFor(
      () => {
        const ns: any = c.emu.get("v1", "Namespace", "doomed");
        return ns?.status?.conditions?.find((x: any) => x.type === "NamespaceContentRemaining");
      },
      10_000,
      "deletion conditions",
    );
    // The Deployment, and what its rollout made of it: a ReplicaSet, its pods and their Events.
    assert.match(
      remaining.message,
      /^Some resources are remaining: deployments\.apps has 1 resource instances, events has \d+ resource instances, pods has \d+ resource instances, replicasets\.apps has 1 resource instances$/,
    );

    // NamespaceLifecycle admission: 403 with the NamespaceTerminating cause, for create and for apply-create.
    const err = await expectApiError(
      c.core.createNamespacedService({
        namespace: "doomed",
        body: { metadata: { name: "svc" }, spec: { ports: [{ port: 80 }] } },
      }),
      403,
    );
    assert.equal(err.reason, "Forbidden");
    assert.equal(err.message, 'services "svc" is forbidden: unable to create new content in namespace doomed because it is being terminated');
    assert.deepEqual(err.details, {
      name: "svc",
      group: "",
      kind: "services",
      causes: [{ reason: "NamespaceTerminating", message: "namespace doomed is being terminated", field: "metadata.namespace" }],
    });
    const applyErr = await expectApiError(c.apply(deployment("other", { namespace: "doomed" })), 403);
    assert.match(applyErr.message, /^deployments\.apps "other" is forbidden: unable to create new content in namespace doomed/);
    // Existing content can still be changed.
    await c.apply(deployment("web", { namespace: "doomed", replicas: 3 }));

    const again = await expectApiError(c.core.deleteNamespace({ name: "doomed" }), 409);
    assert.equal(
      again.message,
      'Operation cannot be fulfilled on namespaces "doomed": The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system.',
    );

    release();
    await waitFor(() => w.events.some((e) => e.type === "DELETED"), 10_000, "namespace DELETED");
    w.abort();
    assert.deepEqual(c.emu.list("apps/v1", "deployments", "doomed"), []);
    await expectApiError(c.core.readNamespace({ name: "doomed" }), 404);
    // It can be created again afterwards.
    await c.core.createNamespace({ body: { metadata: { name: "doomed" } } });
  });

  it("a namespace created anew after a held deletion keeps its content (the controller empties only a Terminating one)", async () => {
    // Someone else's finalizer keeps it Terminating: the controller looks at it again and again.
    await c.core.createNamespace({ body: { metadata: { name: "reborn", finalizers: ["example.com/hold"] } } });
    await fetch(`${c.emu.url}/api/v1/namespaces/reborn`, { method: "DELETE" });
    await waitFor(() => !(c.emu.get("v1", "Namespace", "reborn") as any)?.spec?.finalizers?.length, 10_000, "kubernetes finalizer removed");
    // The finalizer's owner lets go (the namespace goes at once) and the namespace is created anew,
    // with content, while the controller's next look at the old one is still due.
    assert.ok(c.emu.delete("v1", "Namespace", "reborn"));
    await c.core.createNamespace({ body: { metadata: { name: "reborn" } } });
    await c.apply(deployment("web", { namespace: "reborn" }));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    assert.equal((c.emu.get("v1", "Namespace", "reborn") as any)?.status.phase, "Active");
    assert.ok(c.emu.get("apps/v1", "Deployment", "reborn", "web"), "the new namespace's content stays");
  });

  it("the immortal namespaces cannot be deleted", async () => {
    for (const name of ["default", "kube-system", "kube-public"]) {
      const err = await expectApiError(c.core.deleteNamespace({ name }), 403);
      assert.equal(err.message, `namespaces "${name}" is forbidden: this namespace may not be deleted`);
    }
  });

  it("a dry-run DELETE changes nothing", async () => {
    await c.core.createNamespace({ body: { metadata: { name: "kept" } } });
    const res: any = await c.core.deleteNamespace({ name: "kept", dryRun: "All" });
    assert.equal(res.status.phase, "Terminating");
    assert.equal((c.emu.get("v1", "Namespace", "kept") as any).status.phase, "Active");
  });
});
