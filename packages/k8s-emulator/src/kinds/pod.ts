// core/v1 Pod, made by the rollout controller (workloads.ts) for a ReplicaSet:
// pkg/registry/core/pod/strategy.go (status subresource, PodToSelectableFields), columns
// from printPod.
import { CORE, openObject, resource } from "../openapi-schemas.ts";
import { field } from "../selectors.ts";
import { AGE, NAME, age, num, specOf, statusOf } from "../table.ts";
import type { JsonObject } from "../util.ts";
import { defineKind } from "./strategy.ts";

export const pods = defineKind({
  group: "",
  version: "v1",
  kind: "Pod",
  resource: "pods",
  namespaced: true,
  shortNames: ["po"],
  categories: ["all"],
  statusSubresource: true,
  definitions: {
    [`${CORE}.Pod`]: resource("Pod is a collection of containers that can run on a host.", `${CORE}.PodSpec`, `${CORE}.PodStatus`),
    [`${CORE}.PodStatus`]: openObject("The most recently observed status of the pod: phase, conditions, IPs and container statuses."),
  },
  printer: {
    columns: [
      NAME,
      { name: "Ready", type: "string", description: "The aggregate readiness state of this pod for accepting traffic.", priority: 0 },
      { name: "Status", type: "string", description: "The aggregate status of the containers in this pod.", priority: 0 },
      { name: "Restarts", type: "string", description: "The number of times the containers in this pod have been restarted.", priority: 0 },
      AGE,
      { name: "IP", type: "string", description: "IP address allocated to the pod.", priority: 1 },
      { name: "Node", type: "string", description: "Name of the Node this pod runs on.", priority: 1 },
      { name: "Nominated Node", type: "string", description: "Name of the node nominated to run this pod.", priority: 1 },
      { name: "Readiness Gates", type: "string", description: "Pod readiness gates.", priority: 1 },
    ],
    cells(o, now) {
      const containers = (specOf(o).containers ?? []) as JsonObject[];
      const statuses = (statusOf(o).containerStatuses ?? []) as JsonObject[];
      // printPod: the phase, unless a container is waiting or terminated with a reason.
      let reason = String(statusOf(o).reason ?? statusOf(o).phase ?? "Unknown");
      for (const c of statuses) {
        const state = (c.state ?? {}) as Record<string, JsonObject | undefined>;
        const why = state.waiting?.reason ?? state.terminated?.reason;
        if (typeof why === "string" && why !== "") reason = why;
      }
      if (o.metadata.deletionTimestamp) reason = "Terminating";
      return [
        o.metadata.name,
        `${statuses.filter((c) => c.ready === true).length}/${containers.length}`,
        reason,
        String(statuses.reduce((n, c) => n + num(c.restartCount), 0)),
        age(o, now),
        statusOf(o).podIP ?? "<none>",
        specOf(o).nodeName ?? "<none>",
        "<none>",
        "<none>",
      ];
    },
  },
  fieldLabels: {
    "spec.nodeName": field("spec", "nodeName"),
    "spec.restartPolicy": field("spec", "restartPolicy"),
    "spec.schedulerName": field("spec", "schedulerName"),
    "spec.serviceAccountName": field("spec", "serviceAccountName"),
    "status.phase": field("status", "phase"),
    "status.podIP": field("status", "podIP"),
  },
});
