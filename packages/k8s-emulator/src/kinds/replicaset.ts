// apps/v1 ReplicaSet, made by the deployment controller (rollout/) for a Deployment:
// pkg/registry/apps/replicaset/strategy.go (status subresource, generation on spec changes,
// the status.replicas field label), columns from printReplicaSet.
import { APPS, CORE, META, int, obj, ref, resource } from "../openapi-schemas.ts";
import { field } from "../selectors.ts";
import { AGE, NAME, templateColumns, age, num, specOf, statusOf, templateCells } from "../table.ts";
import { replicasScale } from "./scale.ts";
import { defineKind } from "./strategy.ts";

export const replicaSets = defineKind({
  group: "apps",
  version: "v1",
  kind: "ReplicaSet",
  resource: "replicasets",
  namespaced: true,
  shortNames: ["rs"],
  categories: ["all"],
  statusSubresource: true,
  generation: "spec",
  scale: replicasScale,
  definitions: {
    [`${APPS}.ReplicaSet`]: resource(
      "ReplicaSet ensures that a specified number of pod replicas are running at any given time.",
      `${APPS}.ReplicaSetSpec`,
      `${APPS}.ReplicaSetStatus`,
    ),
    [`${APPS}.ReplicaSetSpec`]: obj(
      "ReplicaSetSpec is the specification of a ReplicaSet.",
      {
        minReadySeconds: int("Minimum number of seconds a new pod must be ready without crashing to be considered available. Defaults to 0."),
        replicas: int("Number of desired pods. Defaults to 1."),
        selector: ref(`${META}.LabelSelector`, "Label selector for pods. It must match the pod template's labels."),
        template: ref(`${CORE}.PodTemplateSpec`, "Template describes the pods that will be created."),
      },
      ["selector"],
    ),
    [`${APPS}.ReplicaSetStatus`]: obj("ReplicaSetStatus represents the current status of a ReplicaSet.", {
      replicas: int("The most recently observed number of replicas."),
      fullyLabeledReplicas: int("The number of pods that have labels matching the labels of the pod template of the replicaset."),
      readyReplicas: int("The number of pods targeted by this ReplicaSet with a Ready Condition."),
      availableReplicas: int("The number of available pods (ready for at least minReadySeconds) for this replica set."),
      observedGeneration: { type: "integer", format: "int64", description: "The most recent generation observed by the controller." },
    }),
  },
  printer: {
    columns: [
      NAME,
      { name: "Desired", type: "integer", description: "Number of desired pods.", priority: 0 },
      { name: "Current", type: "integer", description: "The most recently observed number of replicas.", priority: 0 },
      { name: "Ready", type: "integer", description: "The number of pods targeted by this ReplicaSet with a Ready Condition.", priority: 0 },
      AGE,
      ...templateColumns(
        "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
      ),
    ],
    cells: (o, now) => [
      o.metadata.name,
      num(specOf(o).replicas ?? 1),
      num(statusOf(o).replicas),
      num(statusOf(o).readyReplicas),
      age(o, now),
      ...templateCells(o),
    ],
  },
  fieldLabels: { "status.replicas": field("status", "replicas") },
});
