// The status projection over observation sequences: phases, the no-flap rule, recovery
// from FAILED with no manual step.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { ResourceObservationSchema, type ResourceObservation } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DesiredResourceSchema, Phase, ResourceType, type DesiredResource } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { project, type Projection } from "../src/status/projection.ts";

const desired = (version: number, image: string, replicas: number): DesiredResource =>
  create(DesiredResourceSchema, {
    type: ResourceType.DEPLOYMENT,
    id: "web",
    version: BigInt(version),
    namespace: "demo",
    spec: { case: "deployment", value: { workload: { image }, replicas } },
  });

type Obs = Partial<Omit<ResourceObservation, "appliedVersion" | "$typeName" | "$unknown">> & { applied?: number; deadline?: boolean };
const observation = ({ applied = 0, deadline, ...rest }: Obs): ResourceObservation =>
  create(ResourceObservationSchema, {
    type: ResourceType.DEPLOYMENT,
    id: "web",
    appliedVersion: BigInt(applied),
    conditions: deadline
      ? [{ type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded", message: "deadline" }]
      : rest.conditions ?? [{ type: "Progressing", status: "True", reason: "NewReplicaSetAvailable" }],
    ...rest,
  });

/** Runs a sequence, feeding each projection back as the previous one. */
function run(steps: { desired: DesiredResource | undefined; obs: Obs | undefined; want: Phase }[]): void {
  let previous: Projection | undefined;
  steps.forEach((step, i) => {
    const got = project({ desired: step.desired, observation: step.obs && observation(step.obs), previous });
    assert.equal(Phase[got.phase], Phase[step.want], `step ${i}: ${got.reason}`);
    previous = got;
  });
}

const v1 = desired(1, "nginx:1", 2);
const v2 = desired(2, "nginx:2", 2);
const running1: Obs = { applied: 1, observedImage: "nginx:1", desiredReplicas: 2, readyReplicas: 2, updatedReplicas: 2 };

test("create → pending → progressing → running", () => {
  run([
    { desired: v1, obs: undefined, want: Phase.PENDING },
    { desired: v1, obs: { applied: 0, missing: true, conditions: [] }, want: Phase.PENDING },
    { desired: v1, obs: { applied: 1, observedImage: "nginx:1", desiredReplicas: 2, readyReplicas: 0, updatedReplicas: 2 }, want: Phase.PROGRESSING },
    { desired: v1, obs: running1, want: Phase.RUNNING },
  ]);
});

test("a failing rollout is FAILED, and a fixed one RUNNING again with no manual step", () => {
  run([
    { desired: v1, obs: running1, want: Phase.RUNNING },
    { desired: v2, obs: running1, want: Phase.PENDING },
    { desired: v2, obs: { applied: 2, observedImage: "nginx:2", desiredReplicas: 2, readyReplicas: 0, deadline: true }, want: Phase.FAILED },
    { desired: v2, obs: { applied: 2, observedImage: "nginx:2", desiredReplicas: 2, readyReplicas: 0, deadline: true }, want: Phase.FAILED },
    { desired: desired(3, "nginx:3", 2), obs: { applied: 3, observedImage: "nginx:3", readyReplicas: 2, updatedReplicas: 2 }, want: Phase.RUNNING },
  ]);
});

test("an apply error is FAILED until an apply succeeds", () => {
  run([
    { desired: v2, obs: { ...running1, lastApplyError: "422 Invalid: spec.replicas" }, want: Phase.FAILED },
    { desired: v2, obs: { ...running1, applied: 2, observedImage: "nginx:2" }, want: Phase.RUNNING },
  ]);
});

test("no flapping: one partial observation keeps RUNNING; a real regression does not", () => {
  run([
    { desired: v1, obs: running1, want: Phase.RUNNING },
    { desired: v1, obs: { applied: 1, conditions: [] }, want: Phase.RUNNING },
    { desired: v1, obs: running1, want: Phase.RUNNING },
    { desired: v1, obs: { ...running1, readyReplicas: 1 }, want: Phase.PROGRESSING },
  ]);
  // With no RUNNING before it, a partial observation is just progress.
  run([{ desired: v1, obs: { applied: 1, conditions: [] }, want: Phase.PROGRESSING }]);
});

test("stopped, scaled to zero, and not desired in the region", () => {
  run([
    { desired: desired(4, "nginx:1", 0), obs: { ...running1, applied: 4, readyReplicas: 2 }, want: Phase.PROGRESSING },
    { desired: desired(4, "nginx:1", 0), obs: { ...running1, applied: 4, readyReplicas: 0, desiredReplicas: 0 }, want: Phase.STOPPED },
    { desired: undefined, obs: running1, want: Phase.PROGRESSING },
    { desired: undefined, obs: { missing: true }, want: Phase.STOPPED },
    { desired: undefined, obs: undefined, want: Phase.STOPPED },
  ]);
});

test("network policies are RUNNING once applied", () => {
  const policy = create(DesiredResourceSchema, { type: ResourceType.CILIUM_NETWORK_POLICY, id: "p", version: 5n, spec: { case: "ciliumNetworkPolicy", value: {} } });
  assert.equal(project({ desired: policy, observation: observation({ applied: 4 }), previous: undefined }).phase, Phase.PENDING);
  assert.equal(project({ desired: policy, observation: observation({ applied: 5 }), previous: undefined }).phase, Phase.RUNNING);
});
