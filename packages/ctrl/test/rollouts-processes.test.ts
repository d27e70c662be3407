// Staged rollouts (ARCHITECTURE §9) with real agents: ctrl, and per region its own Kubernetes
// emulator and an agent process. What each region's cluster received is read from its
// emulator's request log and objects, what ctrl decided from the stored rollout:
//   * the second wave receives no write of the new spec before every first-wave region has
//     been RUNNING at the new revision for the bake (running_since + bake, as stored);
//   * a failing image fails the first wave: the regions it moved run the previous spec again,
//     the second wave's clusters received no write at all;
//   * an agent killed during its wave: the wave's deadline fails the rollout and the policy
//     applies (ROLLBACK restores the other moved regions; PAUSE freezes it FAILED).
// Both databases. The test with two ctrl replicas killed mid-rollout is rollouts-replicas.test.ts.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { RolloutFailurePolicy, RolloutState, type Rollout } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { spawnAgent, type AgentProcess } from "@flotilla/testkit/agent-process";
import { startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { testDatabases } from "@flotilla/testkit/databases";
import { startCluster, type Cluster } from "@flotilla/testkit/emulator";
import { BOOKMARK_MS, deploymentOf, imageOf, waitFor } from "@flotilla/testkit/stack";

/** Region → its tier label: the first wave selects tier=canary. */
const REGIONS = { canary: "canary", eu: "prod", us: "prod" } as const;
type RegionName = keyof typeof REGIONS;
const NAMESPACE = "shop";
const WRITES = new Set(["create", "apply", "update", "patch", "delete"]);
const secs = (s: number) => ({ seconds: BigInt(Math.floor(s)), nanos: Math.round((s % 1) * 1e9) });

interface RegionUnderTest {
  cluster: Cluster;
  token: string;
  kubeconfig: string;
  agent: AgentProcess | undefined;
}

for (const { db, skip } of await testDatabases()) {
  describe(`staged rollouts with agent processes, one emulator per region (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    let dir: string;
    const regions = {} as Record<RegionName, RegionUnderTest>;

    const startAgentOf = async (name: RegionName) => {
      const r = regions[name];
      r.agent = await spawnAgent(r.token, [
        ...["--ctrl-url", t.url, "--region", name, "--kubeconfig", r.kubeconfig],
        ...["--bookmark-interval", `${BOOKMARK_MS}ms`, "--report-interval", "50ms", "--heartbeat-interval", "100ms", "--settle", "0"],
      ]);
    };

    before(async () => {
      t = await startTestCtrl(db, { pollIntervalMs: 50, stream: { bookmarkIntervalMs: BOOKMARK_MS } });
      dir = await mkdtemp(join(tmpdir(), "flotilla-rollouts-"));
      for (const [name, tier] of Object.entries(REGIONS) as [RegionName, string][]) {
        await t.client(RegionService).createRegion({ region: { name, labels: { tier } } });
        const { token } = await t.client(RegionService).createAgentToken({ region: name });
        const cluster = await startCluster();
        const kubeconfig = join(dir, `${name}.kubeconfig`);
        await writeFile(kubeconfig, cluster.emu.kubeconfigYaml());
        regions[name] = { cluster, token, kubeconfig, agent: undefined };
      }
      await Promise.all((Object.keys(REGIONS) as RegionName[]).map(startAgentOf));
    });
    after(async () => {
      for (const r of Object.values(regions)) {
        r.cluster.emu.faults.clear();
        await r.agent?.kill("SIGKILL");
        await r.cluster.emu.stop();
      }
      await t?.close();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    const emulator = (region: RegionName) => regions[region].cluster.emu;
    /** The image of Deployment `id` in the region's cluster. */
    const imageIn = (region: RegionName, id: string) => imageOf(deploymentOf(emulator(region), NAMESPACE, id));
    /** Writes the region's cluster received since `since` (ms), optionally of one resource. */
    const writesTo = (region: RegionName, since: number, resource?: string) =>
      emulator(region).requestLog.filter((e) => WRITES.has(e.verb ?? "") && Date.parse(e.time) >= since && (resource === undefined || e.resource === resource));
    const rollout = async (id: string): Promise<Rollout> => (await t.client(RolloutService).getRollout({ id })).rollout!;
    const until = async (id: string, state: RolloutState, timeoutMs = 30_000): Promise<Rollout> => {
      let last: Rollout | undefined;
      await waitFor(
        async () => (last = await rollout(id)).state === state,
        `rollout of ${id} ${RolloutState[state]}`,
        timeoutMs,
        () => last && `${RolloutState[last.state]}: ${last.reason}`,
      );
      return last!;
    };
    const spec = (id: string, image: string, strategy: object | undefined) => ({
      deployment: {
        id,
        namespace: NAMESPACE,
        image,
        regions: (Object.keys(REGIONS) as RegionName[]).map((region) => ({ region, replicas: 1 })),
        strategy,
      },
    });

    test("two waves, 2 s bake: no write of the new spec reaches a second-wave region before the first wave ran the new revision for 2 s", async () => {
      const BAKE_MS = 2000;
      const strategy = { waves: [{ name: "canary", selector: "tier=canary", bake: secs(BAKE_MS / 1000) }, { name: "rest" }] };
      const deployments = t.client(DeploymentService);
      // The first rollout brings the deployment to every region; the second changes what they run.
      for (const [image, change] of [
        ["nginx:1.27", () => deployments.createDeployment(spec("web", "nginx:1.27", strategy))],
        ["nginx:1.28", () => deployments.updateDeployment(spec("web", "nginx:1.28", strategy))],
      ] as const) {
        await change();
        const done = await until("web", RolloutState.SUCCEEDED);
        for (const region of Object.keys(REGIONS) as RegionName[]) {
          await waitFor(() => imageIn(region, "web") === image, `${region} runs ${image}`);
        }
        const stored = await t.store.rollouts.get(done.id);
        const [first, second] = stored.waves;
        assert.deepEqual(
          stored.waves.map((w) => w.regions.map((r) => r.region)),
          [["canary"], ["eu", "us"]],
        );
        const runningSince = first!.runningSince!;
        assert.ok(runningSince !== undefined, "the first wave's bake start is stored");
        const canaryWrite = writesTo("canary", stored.createTime, "deployments")[0];
        assert.ok(canaryWrite && Date.parse(canaryWrite.time) < runningSince, "the first wave was written, then ran");
        for (const region of ["eu", "us"] as const) {
          const firstWrite = writesTo(region, stored.createTime, "deployments")[0];
          assert.ok(firstWrite, `${region} received ${image}`);
          const at = Date.parse(firstWrite.time);
          assert.ok(
            at >= runningSince + BAKE_MS,
            `${image}: ${region}'s first write at ${firstWrite.time}, ${at - runningSince} ms after the first wave ran the new revision (bake ${BAKE_MS} ms)`,
          );
        }
        assert.ok(second!.startTime! >= runningSince + BAKE_MS, "the stored second wave starts after the bake");
        const starts = (await t.store.rollouts.transitions(done.id)).filter((x) => x.action === "start-wave").map((x) => x.wave);
        assert.deepEqual(starts, [0, 1], "each wave started once");
      }
    });

    test("a failing image: the first wave fails, the region it moved runs the previous spec again, the second wave's clusters received no write", async () => {
      const strategy = { waves: [{ name: "canary", regions: ["canary"], bake: secs(1) }, { name: "rest" }], onFailure: RolloutFailurePolicy.ROLLBACK };
      const since = Date.now();
      await t.client(DeploymentService).updateDeployment(spec("web", "nginx:fail", strategy));
      // The emulator never makes it ready; the Deployment passes its progress deadline, the agent reports FAILED.
      const back = await until("web", RolloutState.ROLLED_BACK);
      assert.match(back.reason, /^canary: FAILED/);
      assert.ok(writesTo("canary", since, "deployments").length > 0, "canary received the failing image");
      await waitFor(
        () => imageIn("canary", "web") === "nginx:1.28",
        "canary runs nginx:1.28 again",
        20_000,
        () => imageIn("canary", "web"),
      );
      const { deployment } = await t.client(DeploymentService).getDeployment({ id: "web" });
      assert.equal(deployment!.image, "nginx:1.28");
      // Late writes would show by now: canary's agent has applied the way back meanwhile.
      await sleep(500);
      for (const region of ["eu", "us"] as const) {
        assert.deepEqual(
          writesTo(region, since).map((e) => `${e.time} ${e.verb} ${e.path}`),
          [],
          `${region} received no write at all`,
        );
        assert.equal(imageIn(region, "web"), "nginx:1.28");
      }
    });

    for (const onFailure of [RolloutFailurePolicy.ROLLBACK, RolloutFailurePolicy.PAUSE]) {
      test(`an agent killed during its wave: the wave's deadline fails the rollout, onFailure ${RolloutFailurePolicy[onFailure]}`, async () => {
        const id = `killed-${RolloutFailurePolicy[onFailure].toLowerCase()}`;
        const deadline = 4;
        const strategy = { waves: [{ name: "first", regions: ["canary", "eu"], progressDeadline: secs(deadline) }, { name: "rest" }], onFailure };
        const deployments = t.client(DeploymentService);
        await deployments.createDeployment(spec(id, "nginx:1", undefined));
        for (const region of Object.keys(REGIONS) as RegionName[]) await waitFor(() => imageIn(region, id) === "nginx:1", `${region} runs nginx:1`);
        // eu's agent is killed while it applies the change: its apply is held until then.
        const release = emulator("eu").faults.hold("apply");
        try {
          const since = Date.now();
          await deployments.updateDeployment(spec(id, "nginx:2", strategy));
          await waitFor(() => imageIn("canary", id) === "nginx:2", "canary runs nginx:2");
          await sleep(300); // eu's agent got the change with canary's, and waits on its apply
          await regions.eu.agent!.kill("SIGKILL");
          const ended = await until(id, onFailure === RolloutFailurePolicy.ROLLBACK ? RolloutState.ROLLED_BACK : RolloutState.FAILED, 30_000);
          assert.match(ended.reason, new RegExp(`wave first not RUNNING within ${deadline}s: eu: `));
          const stored = await t.store.rollouts.get(ended.id);
          assert.ok(Date.now() >= stored.waves[0]!.startTime! + deadline * 1000);
          if (onFailure === RolloutFailurePolicy.ROLLBACK) {
            await waitFor(() => imageIn("canary", id) === "nginx:1", "canary runs nginx:1 again", 20_000);
            const { deployment } = await deployments.getDeployment({ id });
            assert.equal(deployment!.image, "nginx:1", "eu, whose agent is gone, is to run nginx:1 again too");
          } else {
            await sleep(500);
            assert.equal(imageIn("canary", id), "nginx:2", "frozen where it is");
            assert.equal((await rollout(id)).state, RolloutState.FAILED);
          }
          assert.deepEqual(
            writesTo("us", since).map((e) => `${e.time} ${e.verb} ${e.path}`),
            [],
            "the second wave received no write at all",
          );
        } finally {
          release();
        }
        await startAgentOf("eu");
      });
    }
  });
}
