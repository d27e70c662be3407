// The scale subresource of the workload kinds (Deployment, ReplicaSet), as their storages'
// ScaleREST (pkg/registry/apps/<kind>/storage/storage.go): an autoscaling/v1 Scale whose
// spec.replicas reads and writes the object's, what `kubectl scale` patches.
import type { JsonObject } from "../util.ts";
import type { ScaleRules } from "./strategy.ts";

export const replicasScale: ScaleRules = {
  toScale(o) {
    const { name, namespace, uid, resourceVersion, creationTimestamp } = o.metadata;
    const matchLabels = (((o.spec as JsonObject).selector as JsonObject | undefined)?.matchLabels ?? {}) as Record<string, string>;
    return {
      kind: "Scale",
      apiVersion: "autoscaling/v1",
      metadata: { name, namespace, uid, resourceVersion, creationTimestamp },
      spec: { replicas: (o.spec as JsonObject).replicas ?? 1 },
      status: {
        replicas: ((o.status ?? {}) as JsonObject).replicas ?? 0,
        selector: Object.entries(matchLabels)
          .map(([k, v]) => `${k}=${v}`)
          .join(","),
      },
    };
  },
  scaled(o, replicas) {
    const next = structuredClone(o);
    (next.spec as JsonObject).replicas = replicas;
    return next;
  },
};
