// CachedObject: what the observer keeps of an object is exactly what status, drift checks and
// applies read — nothing of managedFields, other labels and annotations, or the rest of the spec.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CachedObject } from "../src/cached-object.ts";
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
  assert.deepEqual(new CachedObject(live).toObject(), {
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
  const cached = new CachedObject({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "web", namespace: "shop", resourceVersion: "9", labels, annotations: { "flotilla.dev/desired-version": "5" } },
    spec: { ports: [{ port: 80 }], clusterIP: "10.0.0.1" },
  });
  const object = cached.toObject();
  assert.deepEqual(object, {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "web", namespace: "shop", resourceVersion: "9", labels, annotations: { "flotilla.dev/desired-version": "5" } },
  });
  object.metadata.labels!.extra = "x";
  assert.equal(cached.toObject().metadata.labels!.extra, undefined);
});
