// Rollout analysis survives ctrl crashes: two ctrl processes share one MariaDB; scripted agents
// report observations and measurements to whichever replica is up. In each round the replica
// that drives (holds the rollout-driver lease) is killed with kill -9 twice while a wave's
// analysis is under way: after its first measurement, and right after the measurement that
// decides the wave was handed to it (so mid-judgement), then restarted. The agent hands the
// first measurement in again after the first kill, as one that never heard back does. From what
// is stored: every measurement kept once (nothing lost, no duplicate); each wave judged once
// (one transition out of its bake: the next wave's start-wave, succeeded or rolled-back); every
// transition a compare-and-set (generations consecutive); the verdict the measurements call for
// (good ones succeed, a failing one rolls the canary back and the second wave is never written).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { DescService } from "@bufbuild/protobuf";
import { fromBinary } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { ClusterService, type AnalysisTask } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { DesiredResourceSchema, ResourceType, RolloutState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Store } from "@flotilla/store";
import { ADMIN_TOKEN } from "@flotilla/testkit/ctrl";
import { alive, onLiveReplica, spawnCtrl, type CtrlProcess } from "@flotilla/testkit/ctrl-process";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";
import { waitFor } from "@flotilla/testkit/stack";

const REGIONS = ["canary", "eu"];
const COUNT = 3;
const mysql = (await testDatabases()).find((d) => d.db.name === "mysql")!;

describe("rollout analysis on two ctrl replicas, the driving one killed with -9 mid-analysis (mysql)", { skip: mysql.skip }, () => {
  let store: Store;
  let url: string;
  let cleanup: () => Promise<void>;
  const replicas: CtrlProcess[] = [];
  const spawnReplica = () => spawnCtrl(url, ADMIN_TOKEN, ["--poll-interval", "100ms", "--rollout-lease-duration", "1s"]);

  before(async () => {
    ({ store, url, cleanup } = await freshStore(mysql.db));
    replicas.push(...(await Promise.all([spawnReplica(), spawnReplica()])));
    for (const name of REGIONS) {
      await on(RegionService, (c) => c.createRegion({ region: { name, metrics: { prometheus: { address: `http://prometheus.${name}:9090` } } } }));
    }
  });
  after(async () => {
    for (const r of replicas) await r.kill("SIGKILL");
    await cleanup?.();
  });

  /** Calls `call` on a replica that is up (`prefer` first), another when one fails to answer. */
  const on = <S extends DescService, T>(service: S, call: (c: Client<S>) => Promise<T>, prefer?: CtrlProcess): Promise<T> =>
    onLiveReplica(() => replicas, service, call, { token: ADMIN_TOKEN, prefer });
  /** The replica that drives rollouts now (its metrics say so). */
  const driver = async (): Promise<CtrlProcess> => {
    let found: CtrlProcess | undefined;
    await waitFor(async () => {
      for (const r of replicas.filter(alive)) {
        const text = await (await fetch(`${r.url}/metrics`)).text().catch(() => "");
        if (/^flotilla_ctrl_rollout_driver_leading 1$/m.test(text)) return Boolean((found = r));
      }
      return false;
    }, "a replica driving rollouts");
    return found!;
  };
  /** kill -9 of `replica`, and a new process in its place. */
  const crash = async (replica: CtrlProcess) => {
    await replica.kill("SIGKILL");
    replicas.splice(replicas.indexOf(replica), 1, await spawnReplica());
  };
  /** The scripted agent of `region` reports `id` RUNNING at the version it holds (nothing when it holds none). */
  const agentRuns = async (id: string, region: string) => {
    const row = await store.database.db
      .selectFrom("desired_resources")
      .innerJoin("regions", "regions.id", "desired_resources.region_id")
      .select(["desired_resources.version", "desired_resources.body"])
      .where("regions.name", "=", region)
      .where("resource_type", "=", ResourceType.DEPLOYMENT)
      .where("resource_id", "=", id)
      .executeTakeFirst();
    if (!row) return;
    const spec = fromBinary(DesiredResourceSchema, row.body).spec;
    const image = spec.case === "deployment" ? spec.value.workload?.image : "";
    const version = BigInt(row.version);
    await on(ClusterService, (c) =>
      c.reportObservedState({
        region,
        appliedVersion: version,
        observations: [
          { type: ResourceType.DEPLOYMENT, id, appliedVersion: version, observedImage: image, desiredReplicas: 1, readyReplicas: 1, updatedReplicas: 1 },
        ],
      }),
    );
  };
  const taskOf = async (id: string, region: string): Promise<AnalysisTask> => {
    let task: AnalysisTask | undefined;
    await waitFor(
      async () => Boolean((task = (await on(ClusterService, (c) => c.reportMeasurements({ region }))).tasks.find((t) => t.deployment === id))),
      `${region}'s task for ${id}`,
    );
    return task!;
  };
  const measure = (region: string, task: AnalysisTask, index: number, value: number, to?: CtrlProcess) =>
    on(
      ClusterService,
      (c) =>
        c.reportMeasurements({
          region,
          measurements: [
            {
              task: task.id,
              index,
              revision: task.revision,
              takenAt: { seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 },
              result: { case: "value", value },
            },
          ],
        }),
      to,
    );
  const stateOf = async (id: string) => (await store.rollouts.get(id).catch(() => undefined))?.state;

  /** `id`'s wave bakes in `region`: measured COUNT times (`values`), the driver killed after the first measurement and right after the last. */
  const measureThroughCrashes = async (id: string, region: string, values: number[]) => {
    await agentRuns(id, region);
    const task = await taskOf(id, region);
    await measure(region, task, 0, values[0]!);
    await crash(await driver());
    // The agent never heard back about the first: it sends it again.
    await measure(region, task, 0, values[0]!);
    for (let i = 1; i < COUNT - 1; i++) await measure(region, task, i, values[i]!);
    const deciding = await driver();
    await measure(region, task, COUNT - 1, values[COUNT - 1]!, deciding);
    await crash(deciding);
  };

  for (const [round, outcome] of (["succeeds", "rolled back", "succeeds"] as const).entries()) {
    test(`round ${round + 1}: the analysis ${outcome === "succeeds" ? "passes both waves" : "fails the canary"}; nothing lost, each wave judged once`, async () => {
      const id = `shop${round}`;
      await on(DeploymentService, (c) =>
        c.createDeployment({
          deployment: {
            id,
            namespace: "demo",
            image: "app:1",
            regions: REGIONS.map((region) => ({ region, replicas: 1 })),
            strategy: {
              waves: [{ name: "canary", regions: ["canary"], bake: { seconds: 1n } }, { name: "rest" }],
              analysis: [
                {
                  name: "errors",
                  provider: { case: "prometheus", value: { query: 'sum(rate(http_requests_total{deployment="{{deployment}}",code="500"}[1m]))' } },
                  count: COUNT,
                  interval: { seconds: 1n },
                  failureCondition: "result > 0.05",
                },
              ],
            },
          },
        }),
      );
      const rollout = `${id}-1`;
      await measureThroughCrashes(id, "canary", outcome === "succeeds" ? [0, 0.01, 0.02] : [0, 0.01, 0.5]);
      if (outcome === "succeeds") {
        await waitFor(async () => (await store.rollouts.get(rollout)).currentWave === 1, `${rollout} at wave rest`, 30_000);
        await measureThroughCrashes(id, "eu", [0, 0, 0]);
      }
      const expected = outcome === "succeeds" ? RolloutState.SUCCEEDED : RolloutState.ROLLED_BACK;
      await waitFor(async () => (await stateOf(rollout)) === expected, `${rollout} ${RolloutState[expected]}`, 30_000);

      const measurements = await store.database.db.selectFrom("analysis_measurements").select(["region", "idx"]).where("rollout_id", "=", rollout).execute();
      const waves = outcome === "succeeds" ? REGIONS : ["canary"];
      assert.deepEqual(
        measurements.map((m) => `${m.region}/${m.idx}`).sort(),
        waves.flatMap((region) => Array.from({ length: COUNT }, (_, i) => `${region}/${i}`)).sort(),
        "every measurement kept, once",
      );
      const transitions = await store.rollouts.transitions(rollout);
      assert.deepEqual(
        transitions.map((t) => t.generation),
        transitions.map((_, i) => i + 1),
        `generations consecutive: ${transitions.map((t) => `${t.generation}:${t.action}`).join(" ")}`,
      );
      assert.deepEqual(
        transitions.filter((t) => ["start-wave", "succeeded", "rolled-back", "failed"].includes(t.action)).map((t) => `${t.wave}:${t.action}`),
        outcome === "succeeds" ? ["0:start-wave", "1:start-wave", "1:succeeded"] : ["0:start-wave", "0:rolled-back"],
        "each wave started once and judged once",
      );
      if (outcome === "rolled back") {
        assert.equal(
          await store.database.db.selectFrom("desired_resources").select("version").where("resource_id", "=", id).executeTakeFirst(),
          undefined,
          "a first deployment rolled back: the canary no longer runs it, eu never did",
        );
      }
    });
  }
});
