import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { PatchStrategy, setHeaderOptions, type KubernetesObject } from "@kubernetes/client-node";
import { expectApiError, startCluster, type Cluster } from "@flotilla/testkit/emulator";

const GVR = { group: "cilium.io", version: "v2", plural: "ciliumnetworkpolicies" };

function policy(name: string, port = "8080"): KubernetesObject & { spec: unknown; metadata: { namespace: string } } {
  return {
    apiVersion: "cilium.io/v2",
    kind: "CiliumNetworkPolicy",
    metadata: { name, namespace: "default", labels: { "flotilla.dev/app": "web" } },
    spec: {
      endpointSelector: { matchLabels: { app: "web" } },
      ingress: [{ fromEndpoints: [{ matchLabels: { app: "gateway" } }], toPorts: [{ ports: [{ port, protocol: "TCP" }] }] }],
    },
  };
}

describe("CiliumNetworkPolicy", () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster();
  });
  after(() => c.emu.stop());

  it("works through CustomObjectsApi (create, get, list, apply, delete)", async () => {
    const created: any = await c.custom.createNamespacedCustomObject({ ...GVR, namespace: "default", body: policy("allow-gw") });
    assert.equal(created.metadata.generation, 1);
    const got: any = await c.custom.getNamespacedCustomObject({ ...GVR, namespace: "default", name: "allow-gw" });
    assert.equal(got.spec.endpointSelector.matchLabels.app, "web");

    const list: any = await c.custom.listNamespacedCustomObject({ ...GVR, namespace: "default", labelSelector: "flotilla.dev/app=web" });
    assert.equal(list.kind, "CiliumNetworkPolicyList");
    assert.equal(list.items[0].kind, "CiliumNetworkPolicy", "custom resource list items keep apiVersion/kind");

    const applied: any = await c.custom.patchNamespacedCustomObject(
      { ...GVR, namespace: "default", name: "allow-gw", body: policy("allow-gw", "9090"), fieldManager: "flotilla-agent", force: true },
      setHeaderOptions("Content-Type", PatchStrategy.ServerSideApply),
    );
    assert.equal(applied.spec.ingress[0].toPorts[0].ports[0].port, "9090");
    assert.equal(applied.metadata.generation, 2);

    // Custom resources do not support strategic merge patch, as upstream.
    await expectApiError(
      c.custom.patchNamespacedCustomObject(
        { ...GVR, namespace: "default", name: "allow-gw", body: { metadata: { labels: { x: "y" } } } },
        setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
      ),
      415,
    );

    await c.custom.deleteNamespacedCustomObject({ ...GVR, namespace: "default", name: "allow-gw" });
    await expectApiError(c.custom.getNamespacedCustomObject({ ...GVR, namespace: "default", name: "allow-gw" }), 404);
  });

  it("works through KubernetesObjectApi.patch with server-side apply (discovery of cilium.io/v2)", async () => {
    const created = await c.apply(policy("via-object-api"));
    assert.equal(created.metadata?.generation, 1);
    const again = await c.apply(policy("via-object-api"));
    assert.equal(again.metadata?.resourceVersion, created.metadata?.resourceVersion);
    const read = await c.objects.read({ apiVersion: "cilium.io/v2", kind: "CiliumNetworkPolicy", metadata: { name: "via-object-api", namespace: "default" } });
    assert.equal(read.metadata?.uid, created.metadata?.uid);
    assert.ok(
      c.emu.requestLog.some((e) => e.path === "/apis/cilium.io/v2" && e.method === "GET"),
      "client used discovery",
    );

    // PUT without resourceVersion is not allowed for custom resources.
    const body: any = policy("via-object-api");
    const err = await expectApiError(c.objects.replace(body), 422);
    assert.match(err.message, /metadata\.resourceVersion: Invalid value: 0x0|must be specified for an update/);
  });

  it("cannot be created in a missing namespace", async () => {
    const p = policy("orphan");
    p.metadata.namespace = "missing";
    const err = await expectApiError(c.apply(p), 404);
    assert.equal(err.message, 'namespaces "missing" not found');
  });

  describe("structural schema (subset of the real CRD)", () => {
    const post = async (body: unknown, query = "") => {
      const res = await fetch(`${c.emu.url}/apis/cilium.io/v2/namespaces/default/ciliumnetworkpolicies${query}`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as any, warnings: res.headers.get("warning") };
    };

    it("rejects wrong types, enums and patterns with 422 and one cause per field", async () => {
      const bad: any = policy("bad-types");
      bad.spec.ingress[0].toPorts[0].ports = [
        { port: 8080, protocol: "TCP" },
        { port: "no_such!", protocol: "FOO" },
      ];
      bad.spec.endpointSelector.matchExpressions = [{ key: "tier" }];
      const res = await post(bad);
      assert.equal(res.status, 422);
      assert.equal(res.body.reason, "Invalid");
      assert.deepEqual(
        res.body.details.causes.map((x: any) => [x.reason, x.field]),
        [
          ["FieldValueRequired", "spec.endpointSelector.matchExpressions[0].operator"],
          ["FieldValueInvalid", "spec.ingress[0].toPorts[0].ports[0].port"],
          ["FieldValueInvalid", "spec.ingress[0].toPorts[0].ports[1].port"],
          ["FieldValueNotSupported", "spec.ingress[0].toPorts[0].ports[1].protocol"],
        ],
      );
      assert.equal(res.body.details.kind, "CiliumNetworkPolicy");
      assert.equal(res.body.details.group, "cilium.io");
      assert.match(res.body.message, /^CiliumNetworkPolicy\.cilium\.io "bad-types" is invalid: \[/);
      assert.match(
        res.body.message,
        /spec\.ingress\[0\]\.toPorts\[0\]\.ports\[0\]\.port: Invalid value: "integer": spec\.ingress\[0\]\.toPorts\[0\]\.ports\[0\]\.port in body must be of type string: "integer"/,
      );
      assert.match(res.body.message, /protocol: Unsupported value: "FOO": supported values: "TCP", "UDP"/);
      assert.equal(c.emu.get("cilium.io/v2", "CiliumNetworkPolicy", "default", "bad-types"), undefined, "nothing was written");
    });

    it("needs exactly one of endpointSelector and nodeSelector", async () => {
      const none: any = policy("no-selector");
      delete none.spec.endpointSelector;
      const res = await post(none);
      assert.equal(res.status, 422);
      assert.deepEqual(
        res.body.details.causes.map((x: any) => x.field),
        ["spec"],
      );
      assert.match(res.body.message, /spec in body must validate one and only one schema \(oneOf\)\. Found none valid/);
    });

    it("prunes unknown fields: a warning by default, an error with fieldValidation=Strict", async () => {
      const extra: any = policy("extra");
      extra.spec.ingress[0].bogus = true;
      const strict = await post(extra, "?fieldValidation=Strict");
      assert.equal(strict.status, 400);
      assert.equal(
        strict.body.message,
        'CiliumNetworkPolicy in version "v2" cannot be handled as a CiliumNetworkPolicy: strict decoding error: unknown field "spec.ingress[0].bogus"',
      );
      const warned = await post(extra);
      assert.equal(warned.status, 201);
      assert.equal(warned.warnings, '299 - "unknown field \\"spec.ingress[0].bogus\\""');
      assert.equal("bogus" in warned.body.spec.ingress[0], false);
      const bad = await post(policy("x"), "?fieldValidation=Sometimes");
      assert.equal(bad.status, 422);
    });

    it("has a validated status subresource", async () => {
      await c.apply(policy("with-status"));
      const status = { conditions: [{ type: "Ready", status: "True", reason: "Enforced", message: "ok" }], derivativePolicies: {} };
      const written: any = await c.custom.patchNamespacedCustomObjectStatus(
        { ...GVR, namespace: "default", name: "with-status", body: { status } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      assert.deepEqual(written.status.conditions, status.conditions);
      assert.equal(written.metadata.generation, 1, "status writes do not bump the generation");
      // Main-resource writes ignore status.
      const main: any = policy("with-status");
      main.status = { conditions: [] };
      const applied: any = await c.apply(main);
      assert.deepEqual(applied.status.conditions, status.conditions);
      const err = await expectApiError(
        c.custom.patchNamespacedCustomObjectStatus(
          { ...GVR, namespace: "default", name: "with-status", body: { status: { conditions: [{ type: "Ready", status: "Maybe" }] } } },
          setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
        ),
        422,
      );
      assert.equal(err.details.causes[0].field, "status.conditions[0].status");
    });
  });
});
