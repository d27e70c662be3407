// ObjectCache: what the observer keeps of an object is exactly what status, drift checks and
// applies read — nothing of managedFields, other labels and annotations, or the rest of the spec —
// and it finds each object by location and by resource key.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ObjectCache } from "../src/cached-object.ts";
import { CILIUM_NETWORK_POLICIES, DEPLOYMENTS, SERVICES } from "../src/watched-kinds.ts";
import type { KubeObject } from "../src/manifests.ts";

const labels: Record<string, string> = {
  "app.kubernetes.io/managed-by": "flotilla",
  "flotilla.dev/region": "east",
  "flotilla.dev/resource-type": "deployment",
  "flotilla.dev/resource-id": "web",
};

test("a Deployment keeps identity, the agent's labels and annotation, replicas, image, status counters and the reported conditions", () => {
  const live: KubeObject = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: {
      name: "web",
      namespace: "shop",
      resourceVersion: "42",
      generation: 3,
      uid: "u-1",
      labels: { ...labels, team: "a" },
      annotations: { "flotilla.dev/desired-version": "7", "deployment.kubernetes.io/revision": "2" },
      managedFields: [{ manager: "flotilla-agent", fieldsV1: { "f:spec": {} } }],
    },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: "web" } },
      template: { spec: { containers: [{ name: "app", image: "web:1", env: [{ name: "A", value: "1" }] }] } },
    },
    status: {
      observedGeneration: 3,
      replicas: 2,
      updatedReplicas: 2,
      readyReplicas: 1,
      availableReplicas: 1,
      unavailableReplicas: 1,
      conditions: [
        {
          type: "Available",
          status: "False",
          reason: "MinimumReplicasUnavailable",
          message: "Deployment does not have minimum availability.",
          lastUpdateTime: "t",
        },
        { type: "Progressing", status: "True", reason: "ReplicaSetUpdated", message: 'ReplicaSet "web-1" is progressing.', lastTransitionTime: "t" },
        { type: "ReplicaFailure", status: "True", reason: "FailedCreate", message: "quota" },
      ],
    },
  };
  const cache = new ObjectCache([DEPLOYMENTS]);
  cache.set(DEPLOYMENTS, live);
  assert.deepEqual(cache.get(DEPLOYMENTS, "shop", "web"), {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: "shop", resourceVersion: "42", generation: 3, labels, annotations: { "flotilla.dev/desired-version": "7" } },
    spec: { replicas: 2, template: { spec: { containers: [{ image: "web:1" }] } } },
    status: {
      observedGeneration: 3,
      replicas: 2,
      updatedReplicas: 2,
      readyReplicas: 1,
      availableReplicas: 1,
      conditions: [
        { type: "Available", status: "False", reason: "MinimumReplicasUnavailable", message: "Deployment does not have minimum availability." },
        { type: "Progressing", status: "True", reason: "ReplicaSetUpdated", message: 'ReplicaSet "web-1" is progressing.' },
      ],
    },
  });
});

test("a Service keeps only identity, labels and annotation; each read is a new object", () => {
  const cache = new ObjectCache([DEPLOYMENTS, SERVICES]);
  cache.set(SERVICES, {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "web", namespace: "shop", resourceVersion: "9", labels, annotations: { "flotilla.dev/desired-version": "5" } },
    spec: { ports: [{ port: 80 }], clusterIP: "10.0.0.1" },
  });
  const object = cache.get(SERVICES, "shop", "web")!;
  assert.deepEqual(object, {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "web", namespace: "shop", resourceVersion: "9", labels, annotations: { "flotilla.dev/desired-version": "5" } },
  });
  object.metadata.labels!.extra = "x";
  assert.equal(cache.get(SERVICES, "shop", "web")!.metadata.labels!.extra, undefined);
});

const service = (namespace: string, name: string, objectLabels: Record<string, string>, resourceVersion = "1"): KubeObject => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name, namespace, resourceVersion, labels: objectLabels },
});

test("objects are found by location and by resource key, also when named otherwise, relabelled, or without a key", () => {
  const cache = new ObjectCache([DEPLOYMENTS, SERVICES]);
  cache.set(SERVICES, service("shop", "web", labels));
  // Someone's object labelled as resource web, under another name and in another namespace.
  cache.set(SERVICES, service("other", "copy", labels));
  const unkeyed = { ...labels, "flotilla.dev/resource-type": "unknown" };
  cache.set(SERVICES, service("shop", "stray", unkeyed));
  assert.deepEqual([...cache.keys(SERVICES)], ["deployment/web"]);
  assert.deepEqual(
    cache.objectsOf(SERVICES, "deployment/web").map((o) => `${o.metadata.namespace}/${o.metadata.name}`),
    ["shop/web", "other/copy"],
  );
  assert.equal(cache.get(SERVICES, "other", "copy")?.metadata.labels?.["flotilla.dev/resource-id"], "web");
  assert.deepEqual(cache.get(SERVICES, "shop", "stray")?.metadata.labels, unkeyed);
  assert.equal(cache.get(SERVICES, "shop", "copy"), undefined, "a location is namespace and name");
  assert.deepEqual([...cache.locations(SERVICES)].sort(), [
    ["other", "copy"],
    ["shop", "stray"],
    ["shop", "web"],
  ]);
  assert.deepEqual(
    [...cache.keyed(SERVICES)].map(({ key, namespace, name }) => `${key} ${namespace}/${name}`).sort(),
    ["deployment/web other/copy", "deployment/web shop/web"],
    "keyed(): the objects with a resource key, with it",
  );
  assert.deepEqual([...cache.keyed(DEPLOYMENTS)], []);

  // Relabelled as another resource: it leaves its old key.
  const api = { ...labels, "flotilla.dev/resource-id": "api" };
  cache.set(SERVICES, service("other", "copy", api, "2"));
  assert.deepEqual(
    cache.objectsOf(SERVICES, "deployment/web").map((o) => o.metadata.name),
    ["web"],
  );
  assert.deepEqual(
    cache.objectsOf(SERVICES, "deployment/api").map((o) => o.metadata.resourceVersion),
    ["2"],
  );

  assert.equal(cache.delete(SERVICES, "shop", "web")?.metadata.name, "web");
  assert.equal(cache.delete(SERVICES, "shop", "web"), undefined);
  assert.equal(cache.delete(SERVICES, "other", "copy")?.metadata.labels?.["flotilla.dev/resource-id"], "api");
  assert.equal(cache.delete(SERVICES, "shop", "stray")?.metadata.name, "stray");
  assert.deepEqual([...cache.keys(SERVICES)], []);
  assert.deepEqual([...cache.locations(SERVICES)], []);
  assert.deepEqual([...cache.keyed(SERVICES)], []);
});

test("values are kept as they were: empty strings, separators and markers in a message, unexpected types, absent fields", () => {
  const cache = new ObjectCache([DEPLOYMENTS]);
  const message = "line 1\nline 2 \u0001\u0002\u0003\u0004\u0005 \u00e9\u4e2d";
  cache.set(DEPLOYMENTS, {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: "", resourceVersion: "7", generation: "2" as unknown as number, labels: { ...labels, "flotilla.dev/region": "" } },
    spec: { template: { spec: { containers: [{ image: "" }] } } },
    status: {
      replicas: 0,
      readyReplicas: null,
      conditions: [{ type: "Progressing", status: "True", message }, { type: "Available" }],
    },
  });
  assert.deepEqual(cache.get(DEPLOYMENTS, "", "web"), {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: "", resourceVersion: "7", generation: "2", labels: { ...labels, "flotilla.dev/region": "" } },
    spec: { template: { spec: { containers: [{ image: "" }] } } },
    status: {
      replicas: 0,
      readyReplicas: null,
      conditions: [
        { type: "Progressing", status: "True", reason: undefined, message },
        { type: "Available", status: undefined, reason: undefined, message: undefined },
      ],
    },
  });
});

test("a key's objects of several kinds are kept apart by kind", () => {
  const cache = new ObjectCache([DEPLOYMENTS, SERVICES]);
  const deployment: KubeObject = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "web", namespace: "shop", resourceVersion: "1", labels } };
  cache.set(DEPLOYMENTS, deployment);
  cache.set(SERVICES, service("shop", "web", labels, "2"));
  assert.deepEqual([...cache.keys(DEPLOYMENTS)], ["deployment/web"]);
  assert.deepEqual([...cache.keys(SERVICES)], ["deployment/web"]);
  assert.equal(cache.get(DEPLOYMENTS, "shop", "web")?.kind, "Deployment");
  assert.deepEqual(
    cache.objectsOf(SERVICES, "deployment/web").map((o) => [o.kind, o.metadata.resourceVersion]),
    [["Service", "2"]],
  );
  assert.equal(cache.delete(DEPLOYMENTS, "shop", "web")?.metadata.resourceVersion, "1");
  assert.deepEqual([...cache.keys(DEPLOYMENTS)], []);
  assert.equal(cache.get(SERVICES, "shop", "web")?.metadata.resourceVersion, "2", "the Service stays");
  assert.throws(() => cache.get(CILIUM_NETWORK_POLICIES, "shop", "web"), /does not hold cilium.io\/v2 CiliumNetworkPolicy/);
  const eleven = Array.from({ length: 11 }, (_, index) => ({ apiVersion: "example.com/v1", kind: `Kind${index}` }));
  assert.throws(() => new ObjectCache(eleven), /at most 10 kinds/);
});

test("a held digest stays with its object; Progressing messages naming a ReplicaSet share one template", () => {
  const cache = new ObjectCache([DEPLOYMENTS, SERVICES]);
  const progressing = (name: string, hash: string, tail = " has successfully progressed.") => ({
    type: "Progressing",
    status: "True",
    reason: "NewReplicaSetAvailable",
    message: `ReplicaSet "${name}-${hash}"${tail}`,
  });
  const deployment = (name: string, condition: ReturnType<typeof progressing>): KubeObject => ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: "shop", resourceVersion: "1", labels: { ...labels, "flotilla.dev/resource-id": name } },
    status: { conditions: [condition] },
  });
  const messages = [progressing("web", "5d8f7c9b6"), progressing("api", "66b9d"), progressing("db", "7f_x", ": {odd} web-1")];
  for (const condition of messages) cache.set(DEPLOYMENTS, deployment(condition.message.split('"')[1]!.split("-")[0]!, condition), "digest-of-it");
  for (const condition of messages) {
    const name = condition.message.split('"')[1]!.split("-")[0]!;
    const found = cache.find(DEPLOYMENTS, "shop", name);
    assert.deepEqual((found!.object.status as { conditions: unknown[] }).conditions, [condition], `${name}: the message as it was`);
    assert.equal(found?.held, "digest-of-it");
  }
  cache.set(SERVICES, service("shop", "web", labels, "2"));
  assert.equal(cache.find(SERVICES, "shop", "web")?.held, undefined, "set without a digest: holds nothing known");
});
