// Analysis measured in the region (ClusterService.ReportMeasurements), with scripted agents: a
// region's agent is told what to measure once its wave bakes (the query's templates filled in
// for it, its Region's Prometheus address); a measurement of another revision than the task's is
// ignored; one sent twice is kept once; good measurements pass the wave, a bad one rolls it back
// (eu and us never written). Bad analyses and addresses are refused naming the field, nothing
// written.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { fromBinary } from "@bufbuild/protobuf";
import { ClusterService, type AnalysisTask } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { AnalysisPhase, DesiredResourceSchema, ResourceType, RolloutState, type Rollout } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

const secs = (s: number) => ({ seconds: BigInt(s), nanos: 0 });
const QUERY = 'sum(rate(http_requests_total{namespace="{{namespace}}",deployment="{{deployment}}",revision="{{revision}}",code="500"}[1m]))';

for (const { db, skip } of await testDatabases()) {
  describe(`rollout analysis measured in the region (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    before(async () => {
      t = await startTestCtrl(db);
      for (const name of ["canary", "eu", "us"]) {
        await t.client(RegionService).createRegion({ region: { name, metrics: { prometheus: { address: `http://prometheus.${name}:9090/` } } } });
      }
    });
    after(() => t.close());

    const desired = async (id: string) => {
      const rows = await t.store.database.db
        .selectFrom("desired_resources")
        .innerJoin("regions", "regions.id", "desired_resources.region_id")
        .select(["regions.name", "desired_resources.version", "desired_resources.body"])
        .where("resource_id", "=", id)
        .execute();
      return Object.fromEntries(
        rows.map((r) => {
          const spec = fromBinary(DesiredResourceSchema, r.body).spec;
          return [r.name, { version: Number(r.version), image: spec.case === "deployment" ? spec.value.workload!.image : "" }];
        }),
      ) as Record<string, { version: number; image: string }>;
    };
    const agentsRun = async (id: string) => {
      for (const [region, d] of Object.entries(await desired(id))) {
        await t.client(ClusterService).reportObservedState({
          region,
          appliedVersion: BigInt(d.version),
          observations: [
            {
              type: ResourceType.DEPLOYMENT,
              id,
              appliedVersion: BigInt(d.version),
              observedImage: d.image,
              desiredReplicas: 1,
              readyReplicas: 1,
              updatedReplicas: 1,
            },
          ],
        });
      }
    };
    const rollout = async (id: string): Promise<Rollout> => (await t.client(RolloutService).getRollout({ id })).rollout!;
    const until = async (id: string, state: RolloutState): Promise<Rollout> => {
      for (const deadline = Date.now() + 15_000; ; await sleep(50)) {
        const r = await rollout(id);
        if (r.state === state) return r;
        if (Date.now() > deadline) throw new Error(`rollout of ${id} is ${RolloutState[r.state]} (${r.reason}), not ${RolloutState[state]}`);
      }
    };
    /** What `region`'s agent is told to measure, after handing in `measurements`. */
    const exchange = (region: string, measurements: object[] = []) =>
      t.client(ClusterService).reportMeasurements({ region, measurements: measurements as never });
    const tasksOf = async (region: string, deployment: string): Promise<AnalysisTask[]> => {
      for (const deadline = Date.now() + 10_000; ; await sleep(50)) {
        const tasks = (await exchange(region)).tasks.filter((x) => x.deployment === deployment);
        if (tasks.length > 0) return tasks;
        if (Date.now() > deadline) throw new Error(`no task for ${deployment} in ${region}`);
      }
    };
    const measured = (task: AnalysisTask, index: number, value: number, revision = task.revision) => ({
      task: task.id,
      index,
      revision,
      result: { case: "value", value },
    });
    const shop = (id: string, image: string) => ({
      deployment: {
        id,
        namespace: "demo",
        image,
        regions: ["canary", "eu", "us"].map((region) => ({ region, replicas: 1 })),
        strategy: {
          waves: [{ name: "canary", regions: ["canary"] }, { name: "rest" }],
          analysis: [
            {
              name: "errors",
              provider: { case: "prometheus" as const, value: { query: QUERY } },
              count: 2,
              interval: secs(1),
              successCondition: "",
              failureCondition: "result > 0.05",
            },
          ],
        },
      },
    });

    test("the canary's agent measures its revision; an older revision's measurement is ignored; good ones pass the wave, once each", async () => {
      await t.client(DeploymentService).createDeployment(shop("web", "nginx:1.27"));
      assert.deepEqual((await exchange("canary")).tasks, [], "nothing to measure before the bake");
      await agentsRun("web");
      const [task] = await tasksOf("canary", "web");
      assert.equal(task!.revision, 1n);
      const analysis = task!.analysis!;
      assert.equal(analysis.provider.case, "prometheus");
      assert.equal(analysis.provider.value!.query, 'sum(rate(http_requests_total{namespace="demo",deployment="web",revision="1",code="500"}[1m]))');
      assert.equal((await exchange("canary")).prometheusAddress, "http://prometheus.canary:9090", "the region's address, without its trailing slash");
      assert.deepEqual((await exchange("eu")).tasks, [], "eu's wave has not started: nothing to measure there");

      await exchange("canary", [measured(task!, 0, 0.0, 0n), measured(task!, 1, 0.0, 7n)]);
      assert.match(await t.ctrl.metrics.registry.metrics(), /^flotilla_ctrl_analysis_measurements_total\{result="ignored"\} 2$/m);
      assert.equal((await rollout("web")).currentWave, 0, "measurements of another revision pass nothing");

      await exchange("canary", [measured(task!, 0, 0.01)]);
      await exchange("canary", [measured(task!, 0, 0.01)]);
      assert.match(await t.ctrl.metrics.registry.metrics(), /^flotilla_ctrl_analysis_measurements_total\{result="duplicate"\} 1$/m);
      assert.equal((await exchange("canary", [measured(task!, 1, 0.02)])).tasks.length, 0, "its verdict is in: no longer listed");
      for (const deadline = Date.now() + 10_000; !(await desired("web")).eu; await sleep(25)) assert.ok(Date.now() < deadline, "the next wave starts");
      await agentsRun("web");
      const [euTask] = await tasksOf("eu", "web");
      await exchange("eu", [measured(euTask!, 0, 0), measured(euTask!, 1, 0)]);
      const [usTask] = await tasksOf("us", "web");
      await exchange("us", [measured(usTask!, 0, 0), measured(usTask!, 1, 0)]);
      await until("web", RolloutState.SUCCEEDED);
    });

    test("a failed measurement in the canary rolls it back; eu and us are never written", async () => {
      await t.client(DeploymentService).createDeployment(shop("api", "nginx:1.27"));
      await agentsRun("api");
      await exchange("canary", [measured((await tasksOf("canary", "api"))[0]!, 0, 0), measured((await tasksOf("canary", "api"))[0]!, 1, 0)]);
      for (const deadline = Date.now() + 10_000; !(await desired("api")).us; await sleep(25)) assert.ok(Date.now() < deadline);
      await agentsRun("api");
      for (const region of ["eu", "us"]) {
        const [task] = await tasksOf(region, "api");
        await exchange(region, [measured(task!, 0, 0), measured(task!, 1, 0)]);
      }
      await until("api", RolloutState.SUCCEEDED);
      const before = await desired("api");

      await t.client(DeploymentService).updateDeployment({ deployment: shop("api", "nginx:err").deployment });
      await agentsRun("api");
      const [task] = await tasksOf("canary", "api");
      assert.equal(task!.revision, 2n);
      await exchange("canary", [measured(task!, 0, 0.2)]);
      const failed = await until("api", RolloutState.ROLLED_BACK);
      assert.match(
        failed.reason,
        /^wave canary: analysis errors in canary failed: 1 failed measurement \(failureLimit 0\); last result 0\.2 FAILED \(failure when result > 0\.05\)$/,
      );
      const after = await desired("api");
      assert.deepEqual([after.eu, after.us], [before.eu, before.us], "eu and us never left revision 1");
      assert.equal(after.canary!.image, "nginx:1.27", "the canary runs revision 1's spec again");

      // As a view shows it: the canary rolled back, running revision 3 (revision 1's spec, written
      // on the way back), never revision 2; the analysis with its measurement and its condition.
      const canary = failed.waves[0]!.regions[0]!;
      assert.deepEqual([canary.region, canary.moved, canary.rolledBack, canary.revision], ["canary", true, true, 3n]);
      assert.ok(
        failed.waves[1]!.regions.every((r) => !r.rolledBack && r.revision === 1n),
        "eu and us run revision 1, never moved",
      );
      const [errors] = failed.waves[0]!.analyses;
      assert.deepEqual([errors!.name, errors!.successCondition, errors!.failureCondition], ["errors", "", "result > 0.05"]);
      assert.deepEqual(
        errors!.regions.map((r) => [
          r.region,
          AnalysisPhase[r.phase],
          r.measurements.map((m) => [m.index, m.revision, AnalysisPhase[m.phase], m.result.value]),
        ]),
        [["canary", "FAILED", [[0, 2n, "FAILED", 0.2]]]],
      );
      assert.deepEqual(failed.waves[1]!.analyses, [], "analyses are shown for the current wave only");
    });

    test("an inconclusive measurement pauses the rollout with the reason; resume bakes again, measured anew", async () => {
      const d = shop("cart", "nginx:1.27");
      d.deployment.strategy.analysis[0]!.successCondition = "result < 0.01";
      await t.client(DeploymentService).createDeployment(d);
      await agentsRun("cart");
      const [first] = await tasksOf("canary", "cart");
      await exchange("canary", [measured(first!, 0, 0.03)]);
      const paused = await until("cart", RolloutState.PAUSED);
      assert.match(
        paused.reason,
        /^wave canary: analysis errors in canary inconclusive: 1 inconclusive measurement \(inconclusiveLimit 0\); last result 0\.03 INCONCLUSIVE/,
      );
      assert.deepEqual(
        (await exchange("canary")).tasks.filter((x) => x.deployment === "cart"),
        [],
        "nothing to measure while paused",
      );
      await t.client(RolloutService).resumeRollout({ id: "cart" });
      const [again] = await tasksOf("canary", "cart");
      assert.notEqual(again!.id, first!.id, "a new bake, a new task");
      await exchange("canary", [measured(first!, 1, 0), measured(again!, 0, 0), measured(again!, 1, 0)]);
      for (const deadline = Date.now() + 10_000; !(await desired("cart")).eu; await sleep(25)) assert.ok(Date.now() < deadline, "the next wave starts");
    });

    test("bad analyses and addresses are refused, naming the field; nothing is written", async () => {
      const bad = (analysis: object) => {
        const d = shop("bad", "nginx:1.27");
        d.deployment.strategy.analysis = [analysis as (typeof d.deployment.strategy.analysis)[number]];
        return d;
      };
      const ok = { name: "errors", provider: { case: "prometheus", value: { query: "up" } }, successCondition: "result == 1" };
      for (const [analysis, field, message] of [
        [{ ...ok, successCondition: "result <" }, "deployment.strategy.analysis[0].success_condition", /unexpected end/],
        [{ ...ok, successCondition: "", failureCondition: "" }, "deployment.strategy.analysis[0]", /needs a success_condition, a failure_condition or both/],
        [{ ...ok, provider: { case: undefined } }, "deployment.strategy.analysis[0]", /needs a provider/],
        [
          { ...ok, provider: { case: "prometheus", value: { query: "up{x='{{cluster}}'}" } } },
          "deployment.strategy.analysis[0].prometheus.query",
          /unknown template \{\{cluster\}\}/,
        ],
        [{ ...ok, provider: { case: "web", value: { url: "ftp://x", jsonPath: "$.v" } } }, "deployment.strategy.analysis[0].web.url", /http or https/],
        [
          { ...ok, provider: { case: "web", value: { url: "http://x/{{region}}", jsonPath: "v" } } },
          "deployment.strategy.analysis[0].web.json_path",
          /like \$\.data\.value/,
        ],
        [{ ...ok, count: 0 }, "deployment.strategy.analysis[0].count", /from 1 to 100/],
        [{ ...ok, interval: { seconds: 0n, nanos: 5_000_000 } }, "deployment.strategy.analysis[0].interval", /from 1s/],
        [{ ...ok, consecutiveErrorLimit: -1 }, "deployment.strategy.analysis[0].consecutive_error_limit", /from 0 to 100/],
        [{ ...ok, name: "Errors!" }, "deployment.strategy.analysis[0].name", /./],
      ] as const) {
        const error = await t
          .client(DeploymentService)
          .createDeployment(bad(analysis))
          .then(
            () => undefined,
            (e: unknown) => ConnectError.from(e),
          );
        assert.equal(error?.code, Code.InvalidArgument, `${field}: ${error?.message}`);
        assert.ok(error!.rawMessage.startsWith(`${field}:`), `names ${field}: ${error!.rawMessage}`);
        assert.match(error!.rawMessage, message);
      }
      const twice = shop("bad", "nginx:1.27");
      (twice.deployment.strategy.waves[0] as { analysis?: object[] }).analysis = [twice.deployment.strategy.analysis[0]!];
      await assert.rejects(t.client(DeploymentService).createDeployment(twice), /names two analyses of the wave/);
      await assert.rejects(t.client(DeploymentService).getDeployment({ id: "bad" }), (e: unknown) => ConnectError.from(e).code === Code.NotFound);
      for (const address of ["prometheus:9090", "ftp://p", "http://user:pw@p:9090", "http://p:9090/?x=1"]) {
        await assert.rejects(
          t.client(RegionService).updateRegion({ region: { name: "eu", metrics: { prometheus: { address } } } }),
          (e: unknown) => ConnectError.from(e).code === Code.InvalidArgument && /region\.metrics\.prometheus\.address/.test(ConnectError.from(e).rawMessage),
          address,
        );
      }
      assert.equal((await t.client(RegionService).getRegion({ name: "eu" })).region!.metrics?.prometheus?.address, "http://prometheus.eu:9090", "unchanged");
    });
  });
}
