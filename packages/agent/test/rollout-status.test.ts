// Status as kubectl means it, end to end: the agent reports the Deployment's generation,
// observedGeneration, replica counts and conditions; ctrl's phase is RUNNING only once the
// rollout is complete (kstatus), sampled all through a slow rollout.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { deploymentOf, REGION, startStack, statusOf, waitFor, waitForPhase, type RegionPhase, type Stack } from "@flotilla/testkit/stack";

const [sqlite] = await testDatabases();

const web = (image: string, replicas = 3) => ({ id: "web", namespace: "rollout", image, regions: [{ region: REGION, replicas }] });

interface LiveStatus {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  availableReplicas?: number;
}

/** Whether the emulator's Deployment is complete in kstatus' sense. */
function complete(stack: Stack, want: number, image: string): boolean {
  const live = deploymentOf(stack.emulator, "rollout", "web");
  const status = (live?.status ?? {}) as LiveStatus;
  const spec = live?.spec as { template: { spec: { containers: { image: string }[] } } } | undefined;
  return (
    (status.observedGeneration ?? 0) >= Number(live?.metadata.generation ?? 1) &&
    status.updatedReplicas === want &&
    status.availableReplicas === want &&
    status.replicas === want &&
    spec?.template.spec.containers[0]?.image === image
  );
}

/** Samples the projected phase until RUNNING, failing if it says RUNNING before the rollout is complete. */
async function sampleUntilRunning(stack: Stack, want: number, image: string): Promise<RegionPhase[]> {
  const samples: RegionPhase[] = [];
  await waitFor(
    async () => {
      const status = await statusOf(stack, "web");
      if (!status) return false;
      if (samples.at(-1)?.reason !== status.reason) samples.push(status);
      if (status.phase !== "RUNNING") return false;
      assert.ok(
        complete(stack, want, image),
        `RUNNING before the rollout completed: ${JSON.stringify(deploymentOf(stack.emulator, "rollout", "web")?.status)}`,
      );
      return true;
    },
    "RUNNING",
    30_000,
    () => samples,
  );
  return samples;
}

describe("rollout status against the emulator", () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack(sqlite!.db, { emulator: { rolloutDelayMs: 1000 } });
    const agent = await stack.agent();
    await agent.ready;
  });
  after(() => stack?.close());

  test("RUNNING is never projected before the rollout completes; the observation carries what kstatus needs", async () => {
    const deployments = stack.t.client(DeploymentService);
    await deployments.createDeployment({ deployment: web("app:1") });
    const first = await sampleUntilRunning(stack, 3, "app:1");
    assert.ok(
      first.some((s) => s.phase === "PROGRESSING"),
      `progress seen: ${JSON.stringify(first)}`,
    );

    await deployments.updateDeployment({ deployment: web("app:2") });
    const second = await sampleUntilRunning(stack, 3, "app:2");
    assert.ok(
      second.some((s) => s.phase === "PROGRESSING"),
      `progress seen: ${JSON.stringify(second)}`,
    );

    const [input] = await stack.t.store.observations.inputs(ResourceType.DEPLOYMENT, ["web"]);
    const observation = input!.stored!.observation;
    const live = deploymentOf(stack.emulator, "rollout", "web")!;
    assert.equal(observation.generation, BigInt(live.metadata.generation as number));
    assert.equal(observation.observedGeneration, observation.generation);
    assert.deepEqual([observation.replicas, observation.updatedReplicas, observation.readyReplicas, observation.availableReplicas], [3, 3, 3, 3]);
    const progressing = observation.conditions.find((c) => c.type === "Progressing");
    assert.equal(progressing?.reason, "NewReplicaSetAvailable");
    assert.ok(progressing?.message, "the condition's message is reported");
    assert.ok(observation.conditions.some((c) => c.type === "Available"));
  });

  test("a stepped rollout reads PROGRESSING with old replicas terminating; an unready image ends FAILED with Kubernetes' message", async () => {
    const deployments = stack.t.client(DeploymentService);
    await deployments.updateDeployment({ deployment: web("app:3") });
    const samples = await sampleUntilRunning(stack, 3, "app:3");
    assert.ok(
      samples.some((s) => /\d\/3 updated, \d old replicas? terminating/.test(s.reason)),
      JSON.stringify(samples),
    );
    await deployments.updateDeployment({ deployment: web("app:fail-4") });
    const failed = await waitForPhase(stack, "web", "FAILED");
    assert.match(failed.reason, /rollout deadline exceeded: ReplicaSet "web-[a-z0-9]+" has timed out progressing/);
    await deployments.updateDeployment({ deployment: web("app:5") });
    await sampleUntilRunning(stack, 3, "app:5");
  });

  test("probes reach the container with Kubernetes' defaults; RUNNING waits for readiness; a readiness that never passes ends FAILED naming the probe", async () => {
    const deployments = stack.t.client(DeploymentService);
    const probed = (image: string) => ({
      ...web(image, 2),
      readinessProbe: { handler: { case: "httpGet" as const, value: { path: "/healthz", port: 80 } }, initialDelaySeconds: 2, periodSeconds: 5 },
      livenessProbe: { handler: { case: "tcpSocket" as const, value: { port: 80 } } },
    });
    const started = Date.now();
    await deployments.updateDeployment({ deployment: probed("app:6") });
    await sampleUntilRunning(stack, 2, "app:6");
    assert.ok(Date.now() - started >= 2000, `RUNNING ${Date.now() - started} ms after the change: before the readiness probe's 2 s initial delay`);
    const container = (deploymentOf(stack.emulator, "rollout", "web")!.spec as { template: { spec: { containers: Record<string, unknown>[] } } }).template.spec
      .containers[0]!;
    assert.deepEqual(container.readinessProbe, {
      httpGet: { path: "/healthz", port: 80, scheme: "HTTP" },
      initialDelaySeconds: 2,
      timeoutSeconds: 1,
      periodSeconds: 5,
      successThreshold: 1,
      failureThreshold: 3,
    });
    assert.deepEqual(container.livenessProbe, { tcpSocket: { port: 80 }, timeoutSeconds: 1, periodSeconds: 10, successThreshold: 1, failureThreshold: 3 });
    await deployments.updateDeployment({ deployment: probed("app:fail-7") });
    const failed = await waitForPhase(stack, "web", "FAILED");
    assert.match(failed.reason, /rollout deadline exceeded: .*\(new pods not ready under the readiness probe HTTP GET :80\/healthz\)$/);
  });
});
