// The status projection over observation sequences: phases, the no-flap rule, recovery
// from FAILED with no manual step.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { ResourceObservationSchema, type ResourceObservation } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { RolloutConditionSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
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
      : (rest.conditions ?? [{ type: "Progressing", status: "True", reason: "NewReplicaSetAvailable" }]),
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
  const policy = create(DesiredResourceSchema, {
    type: ResourceType.CILIUM_NETWORK_POLICY,
    id: "p",
    version: 5n,
    spec: { case: "ciliumNetworkPolicy", value: {} },
  });
  assert.equal(project({ desired: policy, observation: observation({ applied: 4 }), previous: undefined }).phase, Phase.PENDING);
  assert.equal(project({ desired: policy, observation: observation({ applied: 5 }), previous: undefined }).phase, Phase.RUNNING);
});

// kstatus' rules for a Deployment, with observations as an agent that reports generations sends them.
describe("RUNNING only when the rollout is complete (kstatus)", () => {
  const v = desired(7, "nginx:7", 3);
  const conditions = (...list: { type: string; status: string; reason: string; message: string }[]) => list.map((c) => create(RolloutConditionSchema, c));
  const progressing = conditions({ type: "Progressing", status: "True", reason: "ReplicaSetUpdated", message: 'ReplicaSet "web-abc" is progressing.' });
  const done = conditions(
    { type: "Available", status: "True", reason: "MinimumReplicasAvailable", message: "Deployment has minimum availability." },
    { type: "Progressing", status: "True", reason: "NewReplicaSetAvailable", message: 'ReplicaSet "web-abc" has successfully progressed.' },
  );
  const complete: Obs = {
    applied: 7,
    observedImage: "nginx:7",
    desiredReplicas: 3,
    generation: 4n,
    observedGeneration: 4n,
    replicas: 3,
    updatedReplicas: 3,
    readyReplicas: 3,
    availableReplicas: 3,
    conditions: done,
  };
  const phase = (obs: Obs, previous?: Projection) => project({ desired: v, observation: observation(obs), previous });

  test("complete: observed generation, every replica updated and available, no old one left", () => {
    assert.deepEqual(phase(complete), { phase: Phase.RUNNING, reason: "3/3 replicas ready" });
    assert.equal(phase({ ...complete, observedGeneration: 5n }).phase, Phase.RUNNING, "observedGeneration ≥ generation");
  });

  const notYet: [string, Obs, RegExp][] = [
    ["the controller has not seen the new generation", { ...complete, generation: 5n }, /^generation 5 not yet observed \(at 4\)/],
    [
      "2/3 updated, one old replica terminating",
      { ...complete, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2, conditions: progressing },
      /^2\/3 updated, 1 old replica terminating, 2\/3 available$/,
    ],
    ["all updated, old replicas still terminating", { ...complete, replicas: 5 }, /^2 old replicas terminating$/],
    ["updated but not yet available", { ...complete, availableReplicas: 2 }, /^2\/3 available$/],
    ["available but not ready", { ...complete, readyReplicas: 1 }, /^1\/3 available$/],
    ["scaling down: surplus updated replicas", { ...complete, replicas: 4, updatedReplicas: 4 }, /^scaling down, 1 surplus replica terminating$/],
    ["the old image still observed", { ...complete, observedImage: "nginx:6" }, /^rolling out nginx:7$/],
    ["nothing updated yet", { ...complete, replicas: 3, updatedReplicas: 0, conditions: progressing }, /^0\/3 updated, 3 old replicas terminating$/],
  ];
  for (const [name, obs, reason] of notYet) {
    test(`PROGRESSING, not RUNNING: ${name}`, () => {
      const got = phase(obs, { phase: Phase.RUNNING, reason: "3/3 replicas ready" });
      assert.equal(Phase[got.phase], "PROGRESSING", got.reason);
      assert.match(got.reason, reason);
    });
  }

  test("FAILED with Kubernetes' message on ProgressDeadlineExceeded of the current generation only", () => {
    const deadline = conditions({
      type: "Progressing",
      status: "False",
      reason: "ProgressDeadlineExceeded",
      message: 'ReplicaSet "web-abc" has timed out progressing.',
    });
    const failed = phase({ ...complete, updatedReplicas: 1, availableReplicas: 0, readyReplicas: 0, conditions: deadline });
    assert.deepEqual(failed, { phase: Phase.FAILED, reason: 'rollout deadline exceeded: ReplicaSet "web-abc" has timed out progressing.' });
    // A new spec the controller has not observed yet: the old deadline says nothing about it.
    const next = phase({ ...complete, generation: 5n, conditions: deadline }, failed);
    assert.equal(Phase[next.phase], "PROGRESSING", next.reason);
  });

  test("recovery and no flapping through a failed rollout and a fixed one", () => {
    const deadline = conditions({ type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded", message: "timed out" });
    const v8 = desired(8, "nginx:8", 3);
    const steps: { desired: DesiredResource; obs: Obs; want: Phase }[] = [
      { desired: v, obs: complete, want: Phase.RUNNING },
      { desired: v, obs: { ...complete, observedImage: "", conditions: [] }, want: Phase.RUNNING },
      { desired: v, obs: { ...complete, generation: 5n, updatedReplicas: 1, conditions: deadline }, want: Phase.PROGRESSING },
      {
        desired: v,
        obs: { ...complete, generation: 5n, observedGeneration: 5n, updatedReplicas: 1, availableReplicas: 0, conditions: deadline },
        want: Phase.FAILED,
      },
      {
        desired: v8,
        obs: {
          ...complete,
          applied: 8,
          observedImage: "nginx:8",
          generation: 6n,
          observedGeneration: 6n,
          replicas: 4,
          updatedReplicas: 2,
          availableReplicas: 2,
          conditions: progressing,
        },
        want: Phase.PROGRESSING,
      },
      { desired: v8, obs: { ...complete, applied: 8, observedImage: "nginx:8", generation: 6n, observedGeneration: 6n }, want: Phase.RUNNING },
      { desired: v8, obs: { ...complete, applied: 8, observedImage: "nginx:8", generation: 6n, observedGeneration: 6n }, want: Phase.RUNNING },
    ];
    run(steps);
  });

  test("observations of agents that predate generations keep their meaning", () => {
    // generation 0: replicas and availability are read from the updated and ready counts.
    assert.equal(phase({ applied: 7, observedImage: "nginx:7", desiredReplicas: 3, updatedReplicas: 3, readyReplicas: 3 }).phase, Phase.RUNNING);
    assert.equal(phase({ applied: 7, observedImage: "nginx:7", desiredReplicas: 3, updatedReplicas: 2, readyReplicas: 3 }).phase, Phase.PROGRESSING);
  });

  test("scaled to zero is STOPPED once no replica is ready, whatever the generation", () => {
    const zero = desired(9, "nginx:7", 0);
    const at = (obs: Obs) => project({ desired: zero, observation: observation({ ...obs, applied: 9 }), previous: undefined }).phase;
    assert.equal(at({ ...complete, replicas: 0, updatedReplicas: 0, readyReplicas: 0, availableReplicas: 0 }), Phase.STOPPED);
    assert.equal(at({ ...complete, readyReplicas: 2 }), Phase.PROGRESSING);
  });
});
