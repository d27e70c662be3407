// Staged rollouts (ARCHITECTURE §9) with scripted agents reporting through ReportObservedState:
// a region's desired state moves only when its wave starts; a wave is done after every region
// of it ran RUNNING at the new revision for its bake; a failure rolls back exactly the regions
// moved (later waves never written); an older RUNNING observation never passes the gate; a
// region removed from the placement leaves at once; the operators' controls and their roles;
// the deadline, falling due with no observation; rollouts due at once moving on in one
// transaction per batch.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { fromBinary } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { OperatorService, Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { DesiredResourceSchema, ResourceType, RolloutFailurePolicy, RolloutState, type Rollout } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { StatusService, type WatchStatusResponse } from "@flotilla/proto/ctrl/v1/status_pb.js";
import { storeDecisions, testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl, testLogger, type TestCtrl } from "@flotilla/testkit/ctrl";
import { Store } from "@flotilla/store";
import { startCtrl, type Ctrl } from "../src/server.ts";
import { spawnCtrl } from "@flotilla/testkit/ctrl-process";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const CTRL_MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url));
const REGIONS = { canary: "canary", eu: "prod", us: "prod" } as const;
type RegionName = keyof typeof REGIONS;
const secs = (s: number) => ({ seconds: BigInt(Math.floor(s)), nanos: Math.round((s % 1) * 1e9) });

for (const { db, skip } of await testDatabases()) {
  describe(`staged rollouts (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    before(async () => {
      t = await startTestCtrl(db);
      for (const [name, tier] of Object.entries(REGIONS)) await t.client(RegionService).createRegion({ region: { name, labels: { tier } } });
    });
    after(() => t.close());

    /** What each region's agent is to run now: its desired version and image (absent: nothing). */
    const desired = async (id: string) => {
      const rows = await t.store.database.db
        .selectFrom("desired_resources")
        .innerJoin("regions", "regions.id", "desired_resources.region_id")
        .select(["regions.name", "desired_resources.version", "desired_resources.body"])
        .where("resource_id", "=", id)
        .execute();
      const body = (b: Uint8Array) => fromBinary(DesiredResourceSchema, b).spec;
      return Object.fromEntries(
        rows.map((r) => {
          const spec = body(r.body);
          return [r.name, { version: Number(r.version), image: spec.case === "deployment" ? spec.value.workload?.image : "" }];
        }),
      ) as Partial<Record<RegionName, { version: number; image: string }>>;
    };
    /** Outbox rows of `id` written to `region` so far. */
    const outboxRows = async (id: string, region: RegionName) =>
      (
        await t.store.database.db
          .selectFrom("deployment_changes")
          .innerJoin("regions", "regions.id", "deployment_changes.region_id")
          .select("deployment_changes.version")
          .where("regions.name", "=", region)
          .where("resource_id", "=", id)
          .execute()
      ).length;
    /** The region's agent reports `id` at `version`: RUNNING with `image` (2/2 ready), or FAILED with an apply error. */
    const report = (region: RegionName, id: string, version: number, image: string, outcome: "running" | "failed" = "running") =>
      t.client(ClusterService).reportObservedState({
        region,
        appliedVersion: BigInt(version),
        observations: [
          {
            type: ResourceType.DEPLOYMENT,
            id,
            appliedVersion: BigInt(version),
            observedImage: image,
            desiredReplicas: 2,
            readyReplicas: outcome === "running" ? 2 : 0,
            updatedReplicas: 2,
            lastApplyError: outcome === "failed" ? "ImagePullBackOff: image not found" : "",
          },
        ],
      });
    /** Every region that holds `id` reports it RUNNING at what it holds. */
    const agentsRun = async (id: string) => {
      for (const [region, d] of Object.entries(await desired(id))) await report(region as RegionName, id, d!.version, d!.image);
    };
    const rollout = async (id: string): Promise<Rollout> => (await t.client(RolloutService).getRollout({ id })).rollout!;
    const until = async (id: string, state: RolloutState, timeoutMs = 15_000): Promise<Rollout> => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const r = await rollout(id);
        if (r.state === state) return r;
        if (Date.now() > deadline) throw new Error(`rollout of ${id} is ${RolloutState[r.state]} (${r.reason}), not ${RolloutState[state]}`);
        await sleep(50);
      }
    };
    const deployment = (id: string, image: string, strategy: object) => ({
      deployment: {
        id,
        namespace: "demo",
        image,
        regions: (["canary", "eu", "us"] as const).map((region) => ({ region, replicas: 2 })),
        strategy,
      },
    });
    const twoWaves = (bake: number, onFailure = RolloutFailurePolicy.ROLLBACK) => ({
      waves: [{ name: "canary", selector: "tier=canary", bake: secs(bake) }, { name: "rest" }],
      onFailure,
    });

    test("a change moves wave by wave: the second wave is written only after the first ran the new revision for its bake", async () => {
      const deployments = t.client(DeploymentService);
      await deployments.createDeployment(deployment("shop", "shop:1", twoWaves(1)));
      assert.deepEqual(Object.keys(await desired("shop")), ["canary"], "only the first wave holds it");
      assert.equal(await outboxRows("shop", "eu"), 0);
      const created = await deployments.getDeployment({ id: "shop" });
      assert.equal(created.deployment!.rollout?.state, RolloutState.PROGRESSING);
      assert.match(await t.ctrl.metrics.registry.metrics(), /^flotilla_ctrl_rollouts_active\{state="PROGRESSING"\} 1$/m);
      // ctrl counts the bake from the report it stores, which is between the send and the answer.
      const reportSentAt = Date.now();
      await agentsRun("shop");
      while (!(await desired("shop")).eu) {
        assert.ok(Date.now() - reportSentAt < 10_000, "the second wave starts");
        await sleep(25);
      }
      assert.ok(Date.now() - reportSentAt >= 1000, `the second wave written ${Date.now() - reportSentAt} ms after the report was sent: before its 1 s bake`);
      const [canary, rest] = (await rollout("shop")).waves;
      const baked = timestampDate(rest!.startTime!).getTime() - timestampDate(canary!.runningSince!).getTime();
      assert.ok(baked >= 1000, `stored: the second wave started ${baked} ms after the first ran`);
      await agentsRun("shop");
      const done = await until("shop", RolloutState.SUCCEEDED);
      assert.deepEqual(
        done.waves.map((w) => [w.name, w.regions.map((r) => r.region)]),
        [
          ["canary", ["canary"]],
          ["rest", ["eu", "us"]],
        ],
      );
      // Each wave started exactly once, read from the stored transitions.
      const starts = (await t.store.rollouts.transitions(done.id)).filter((x) => x.action === "start-wave").map((x) => x.wave);
      assert.deepEqual(starts, [0, 1]);
      const metrics = await t.ctrl.metrics.registry.metrics();
      assert.match(metrics, /^flotilla_ctrl_rollouts_ended_total\{result="SUCCEEDED"\} 1$/m);
      assert.match(metrics, /^flotilla_ctrl_rollout_wave_duration_seconds_count 2$/m);
    });

    test("a region removed from the placement leaves at once, whatever its wave; the rest of the change waits for its wave", async () => {
      const deployments = t.client(DeploymentService);
      await deployments.createDeployment(deployment("basket", "basket:1", twoWaves(0)));
      await agentsRun("basket");
      while (!(await desired("basket")).us) await sleep(25);
      await agentsRun("basket");
      await until("basket", RolloutState.SUCCEEDED);
      const before = await desired("basket");
      const { deployment: shrunk } = deployment("basket", "basket:2", twoWaves(60));
      shrunk.regions = shrunk.regions.filter((r) => r.region !== "us");
      await deployments.updateDeployment({ deployment: shrunk });
      const now = await desired("basket");
      assert.equal(now.us, undefined, "us, of the second wave, no longer holds it");
      const tombstone = await t.store.database.db
        .selectFrom("deployment_changes")
        .innerJoin("regions", "regions.id", "deployment_changes.region_id")
        .select("deployment_changes.version")
        .where("regions.name", "=", "us")
        .where("resource_id", "=", "basket")
        .orderBy("deployment_changes.version", "desc")
        .executeTakeFirstOrThrow();
      assert.ok(Number(tombstone.version) > before.us!.version, "us's agent is sent the removal now");
      assert.equal(now.canary!.image, "basket:2", "the first wave moves");
      assert.deepEqual(now.eu, before.eu, "eu waits for its wave");
      assert.equal((await rollout("basket")).state, RolloutState.PROGRESSING);
    });

    test("a failing image: the first wave fails, the regions it moved run the previous spec again, the second wave is never written", async () => {
      const deployments = t.client(DeploymentService);
      const before = await desired("shop");
      const euRows = await outboxRows("shop", "eu");
      await deployments.updateDeployment(deployment("shop", "shop:broken", twoWaves(1)));
      const moved = await desired("shop");
      assert.equal(moved.canary!.image, "shop:broken");
      assert.deepEqual(moved.eu, before.eu, "eu keeps what it ran");
      // The stale-status trap: canary's last observation (of the previous version) says RUNNING; it does not pass the gate.
      await report("canary", "shop", before.canary!.version, "shop:1");
      await sleep(300);
      assert.equal((await rollout("shop")).state, RolloutState.PROGRESSING);
      assert.equal((await rollout("shop")).currentWave, 0);
      await report("canary", "shop", moved.canary!.version, "shop:broken", "failed");
      const back = await until("shop", RolloutState.ROLLED_BACK);
      assert.match(back.reason, /canary: FAILED: apply failed: ImagePullBackOff/);
      const after = await desired("shop");
      assert.equal(after.canary!.image, "shop:1", "canary runs the previous spec again");
      assert.equal(await outboxRows("shop", "eu"), euRows, "the second wave received no write at all");
      const { deployment: d } = await deployments.getDeployment({ id: "shop" });
      assert.equal(d!.image, "shop:1");
      const revisions = await t.store.deployments.revisions("shop", 1, "");
      assert.equal(revisions.items[0]!.actor, "rollout", "the way back is a revision by actor rollout");
      assert.match(revisions.items[0]!.message, /canary: FAILED/);
    });

    test("onFailure PAUSE freezes; a fixed image supersedes it and succeeds", async () => {
      const deployments = t.client(DeploymentService);
      await deployments.updateDeployment(deployment("shop", "shop:bad", twoWaves(0, RolloutFailurePolicy.PAUSE)));
      const moved = await desired("shop");
      await report("canary", "shop", moved.canary!.version, "shop:bad", "failed");
      const frozen = await until("shop", RolloutState.FAILED);
      assert.equal((await desired("shop")).canary!.image, "shop:bad", "frozen where it is");
      await deployments.updateDeployment(deployment("shop", "shop:2", twoWaves(0, RolloutFailurePolicy.PAUSE)));
      assert.equal((await t.store.rollouts.get(frozen.id)).state, RolloutState.SUPERSEDED);
      await agentsRun("shop");
      await until("shop", RolloutState.PROGRESSING);
      for (let i = 0; i < 100 && (await desired("shop")).eu?.image !== "shop:2"; i++) await sleep(50);
      await agentsRun("shop");
      await until("shop", RolloutState.SUCCEEDED);
    });

    test("an approval wave waits for a deployer (a viewer is refused); pause, resume and abort", async () => {
      const operators = t.client(OperatorService);
      const viewer = (await operators.createOperator({ name: "vic", role: Role.VIEWER })).token;
      const deployer = (await operators.createOperator({ name: "dee", role: Role.DEPLOYER })).token;
      const strategy = {
        waves: [
          { name: "canary", regions: ["canary"] },
          { name: "rest", approval: true },
        ],
      };
      await t.client(DeploymentService).updateDeployment(deployment("shop", "shop:3", strategy));
      await agentsRun("shop");
      const waiting = await until("shop", RolloutState.WAITING_APPROVAL);
      assert.equal((await desired("shop")).eu!.image, "shop:2", "the waiting wave is not written");
      await assert.rejects(
        t.client(RolloutService, { token: viewer }).approveRollout({ id: "shop" }),
        (e) => ConnectError.from(e).code === Code.PermissionDenied,
      );
      const paused = (await t.client(RolloutService, { token: deployer }).pauseRollout({ id: waiting.id, message: "freeze" })).rollout!;
      assert.equal(paused.state, RolloutState.PAUSED);
      await assert.rejects(
        t.client(RolloutService, { token: deployer }).approveRollout({ id: "shop" }),
        (e) => ConnectError.from(e).code === Code.FailedPrecondition,
      );
      assert.equal((await t.client(RolloutService, { token: deployer }).resumeRollout({ id: "shop" })).rollout!.state, RolloutState.WAITING_APPROVAL);
      const approved = (await t.client(RolloutService, { token: deployer }).approveRollout({ id: "shop" })).rollout!;
      assert.equal(approved.state, RolloutState.PROGRESSING);
      assert.equal((await desired("shop")).eu!.image, "shop:3");
      const aborted = (await t.client(RolloutService, { token: deployer }).abortRollout({ id: "shop", message: "changed my mind" })).rollout!;
      assert.equal(aborted.state, RolloutState.ABORTED);
      const after = await desired("shop");
      assert.deepEqual([after.canary!.image, after.eu!.image, after.us!.image], ["shop:2", "shop:2", "shop:2"], "every moved region is back");
      const transitions = await t.store.rollouts.transitions(waiting.id);
      assert.deepEqual(transitions.map((x) => [x.action, x.actor]).slice(-4), [
        ["paused", "dee"],
        ["resumed", "dee"],
        ["start-wave", "dee"],
        ["aborted", "dee"],
      ]);
    });

    test("a wave whose agent never reports fails at its deadline, with no observation to wake it", async () => {
      const strategy = { waves: [{ name: "canary", regions: ["canary"], progressDeadline: secs(1.5) }], onFailure: RolloutFailurePolicy.ROLLBACK };
      await t.client(DeploymentService).updateDeployment(deployment("shop", "shop:4", strategy));
      const back = await until("shop", RolloutState.ROLLED_BACK, 10_000);
      assert.match(back.reason, /wave canary not RUNNING within 1\.5s: canary: PENDING/);
      assert.equal((await desired("shop")).canary!.image, "shop:2");
    });

    test("the status stream sends a deployment's rollout with each of its transitions", async () => {
      const abort = new AbortController();
      const stream = t
        .client(StatusService)
        .watchStatus({ resourceType: ResourceType.DEPLOYMENT, id: "cart" }, { signal: abort.signal })
        [Symbol.asyncIterator]();
      const states: RolloutState[] = [];
      const seen = async (state: RolloutState) => {
        while (!states.includes(state)) {
          const r = (await stream.next()).value as WatchStatusResponse;
          if (r.event.case === "object" && r.event.value.rollout && states.at(-1) !== r.event.value.rollout.state) states.push(r.event.value.rollout.state);
        }
      };
      try {
        await t.client(DeploymentService).createDeployment(deployment("cart", "cart:1", twoWaves(0)));
        await seen(RolloutState.PROGRESSING);
        await agentsRun("cart");
        for (let i = 0; i < 100 && !(await desired("cart")).eu; i++) await sleep(20);
        await agentsRun("cart");
        await seen(RolloutState.SUCCEEDED);
      } finally {
        abort.abort();
      }
    });

    test("a strategy's mistakes are INVALID_ARGUMENT naming the field, and nothing is written", async () => {
      const bad: [object, RegExp][] = [
        [{ waves: [{ name: "a" }, { name: "a" }] }, /strategy\.waves\[1\]\.name/],
        [{ waves: [{ name: "a", regions: ["mars"] }] }, /strategy\.waves\[0\]\.regions\[0\]: "mars" is not one of/],
        [{ waves: [{ name: "a", selector: "tier in (" }] }, /strategy\.waves\[0\]\.selector/],
        [{ waves: [{ name: "a", maxParallel: "0" }] }, /strategy\.waves\[0\]\.max_parallel/],
        [{ waves: [{ name: "a", bake: secs(-1) }] }, /strategy\.waves\[0\]\.bake/],
      ];
      for (const [strategy, message] of bad) {
        await assert.rejects(
          t.client(DeploymentService).createDeployment(deployment("nope", "x:1", strategy)),
          (e) => ConnectError.from(e).code === Code.InvalidArgument && message.test(ConnectError.from(e).message),
        );
      }
      assert.equal((await t.store.database.db.selectFrom("rollouts").selectAll().where("deployment_id", "=", "nope").execute()).length, 0);
    });
  });
}

test("--default-rollout-strategy stages the changes of deployments without a strategy; a malformed one is a startup error naming the flag", async () => {
  const [{ db: sqlite }] = await testDatabases();
  const { url, drop } = await sqlite.create();
  const strategy = JSON.stringify({ waves: [{ name: "canary", selector: "tier=canary", bake: "60s" }] });
  const child = await spawnCtrl(url, ADMIN_TOKEN, ["--default-rollout-strategy", strategy]);
  try {
    const transport = createConnectTransport({
      baseUrl: child.url,
      httpVersion: "1.1",
      interceptors: [
        (next) => (req) => {
          req.header.set("authorization", `Bearer ${ADMIN_TOKEN}`);
          return next(req);
        },
      ],
    });
    const regions = createClient(RegionService, transport);
    await regions.createRegion({ region: { name: "canary", labels: { tier: "canary" } } });
    await regions.createRegion({ region: { name: "eu" } });
    const deployments = createClient(DeploymentService, transport);
    await deployments.createDeployment({
      deployment: {
        id: "web",
        namespace: "demo",
        image: "web:1",
        regions: [
          { region: "canary", replicas: 1 },
          { region: "eu", replicas: 1 },
        ],
      },
    });
    const { deployment } = await deployments.getDeployment({ id: "web" });
    assert.equal(deployment!.strategy, undefined, "the deployment keeps no strategy of its own");
    assert.deepEqual(
      deployment!.rollout!.waves.map((w) => [w.name, w.regions.map((r) => [r.region, r.moved])]),
      [
        ["canary", [["canary", true]]],
        ["rest", [["eu", false]]],
      ],
    );
  } finally {
    assert.equal(await child.kill("SIGTERM"), 0, child.log());
    await drop();
  }
  const bad = spawnSync(process.execPath, [CTRL_MAIN, "--database-url", url, "--default-rollout-strategy", '{"waves":[{"name":"Canary"}]}'], {
    encoding: "utf8",
    env: { ...process.env, FLOTILLA_CTRL_ADMIN_TOKEN: ADMIN_TOKEN },
  });
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /--default-rollout-strategy: .*strategy\.waves\[0\]\.name: "Canary" is not a DNS-1123 label/);
});

for (const { db, skip } of await testDatabases()) {
  test(`one replica drives rollouts, holding the rollout-driver lease; when it stops, another takes over (${db.name})`, { skip }, async () => {
    const LEASE_MS = 900;
    const a = await startTestCtrl(db, { rolloutLeaseMs: LEASE_MS });
    const bStore = await Store.open(a.databaseUrl, { rollouts: storeDecisions });
    const b = await startCtrl({
      store: bStore,
      adminToken: ADMIN_TOKEN,
      port: 0,
      shutdownGraceMs: 500,
      log: testLogger(),
      memoryReleaseGrowthBytes: 0,
      rolloutLeaseMs: LEASE_MS,
    });
    const leading = async (ctrl: Ctrl) => /^flotilla_ctrl_rollout_driver_leading 1$/m.test(await ctrl.metrics.registry.metrics());
    const leaders = async () => [(await leading(a.ctrl)) ? "a" : "", (await leading(b)) ? "b" : ""].filter(Boolean);
    try {
      let now = await leaders();
      for (let i = 0; i < 100 && now.length === 0; i++) {
        await sleep(20);
        now = await leaders();
      }
      // Renewals over several lease periods never make two drivers.
      for (let i = 0; i < 3 * (LEASE_MS / 100); i++) {
        assert.equal((await leaders()).length, 1, `one driver at a time: ${await leaders()}`);
        await sleep(100);
      }
      const [first] = await leaders();
      await (first === "a" ? a.ctrl : b).shutdown();
      const survivor = first === "a" ? b : a.ctrl;
      const stoppedAt = Date.now();
      while (!(await leading(survivor))) {
        assert.ok(Date.now() - stoppedAt < 3 * LEASE_MS, "the other replica drives once the lease is given up");
        await sleep(20);
      }
    } finally {
      await b.shutdown().catch(() => {});
      await bStore.close();
      await a.close();
    }
  });
}

for (const { db, skip } of await testDatabases()) {
  for (const batchSize of [undefined, 2]) {
    test(`rollouts due at once move on in one transaction per batch of --rollout-batch-size (${batchSize ?? "default"}) (${db.name})`, { skip }, async () => {
      const t = await startTestCtrl(db, { rolloutBatchSize: batchSize });
      try {
        await t.client(RegionService).createRegion({ region: { name: "canary" } });
        await t.client(RegionService).createRegion({ region: { name: "eu" } });
        const ids = ["a0", "a1", "a2", "a3", "a4"];
        const strategy = { waves: [{ name: "canary", regions: ["canary"], bake: secs(1) }, { name: "rest" }] };
        for (const id of ids) {
          const regions = ["canary", "eu"].map((region) => ({ region, replicas: 1 }));
          await t.client(DeploymentService).createDeployment({ deployment: { id, namespace: "demo", image: `${id}:1`, regions, strategy } });
        }
        const canary = (await t.store.regions.resolve("canary")).id;
        const eu = (await t.store.regions.resolve("eu")).id;
        const held = await t.store.database.db.selectFrom("desired_resources").select(["resource_id", "version"]).where("region_id", "=", canary).execute();
        const commits: number[][] = [];
        const stop = t.store.onCommit((regions) => commits.push(regions));
        // One report says all five RUNNING: their bakes start in one look and end at the same time.
        await t.client(ClusterService).reportObservedState({
          region: "canary",
          appliedVersion: BigInt(Math.max(...held.map((r) => Number(r.version)))),
          observations: held.map((r) => ({
            type: ResourceType.DEPLOYMENT,
            id: r.resource_id,
            appliedVersion: BigInt(r.version),
            observedImage: `${r.resource_id}:1`,
            desiredReplicas: 1,
            readyReplicas: 1,
            updatedReplicas: 1,
          })),
        });
        const started = async () =>
          (await t.store.database.db.selectFrom("desired_resources").select("resource_id").where("region_id", "=", eu).execute()).length;
        const reportedAt = Date.now();
        while ((await started()) < ids.length) {
          assert.ok(Date.now() - reportedAt < 15_000, `the second waves start (${await started()} of ${ids.length})`);
          await sleep(50);
        }
        // The commit listeners run once the driver's commit has returned to it, which can be
        // after another connection already reads what it wrote.
        const batches = batchSize === 2 ? [1, 1, 1] : [1];
        while (commits.length < batches.length && Date.now() - reportedAt < 15_000) await sleep(10);
        stop();
        assert.deepEqual(
          commits.map((regions) => regions.length),
          batches,
          "one transaction per batch moved the second waves (eu's version taken once in each)",
        );
        const starts = await Promise.all(
          ids.map(async (id) => (await t.store.rollouts.transitions((await t.store.rollouts.get(id)).id)).filter((x) => x.action === "start-wave")),
        );
        assert.ok(
          starts.every((s) => s.length === 2),
          "each wave started once",
        );
        assert.equal(new Set(starts.map((s) => s[1]!.time)).size, batchSize === 2 ? 3 : 1, "the second waves' starts written together");
      } finally {
        await t.close();
      }
    });
  }
}

for (const { db, skip } of await testDatabases()) {
  // SQLite runs one writer at a time: a held row lock is MariaDB's.
  test(`a look whose write waits on a row lock holds another rollout's hand-off back no longer (${db.name})`, {
    skip: skip || (db.name !== "mysql" && "row locks"),
  }, async () => {
    const t = await startTestCtrl(db, { rolloutBatchSize: 1 });
    let release = () => {};
    let holding: Promise<void> | undefined;
    try {
      await t.client(RegionService).createRegion({ region: { name: "canary" } });
      await t.client(RegionService).createRegion({ region: { name: "eu" } });
      const strategy = { waves: [{ name: "canary", regions: ["canary"] }, { name: "rest" }] };
      for (const id of ["held", "free"]) {
        const regions = ["canary", "eu"].map((region) => ({ region, replicas: 1 }));
        await t.client(DeploymentService).createDeployment({ deployment: { id, namespace: "demo", image: `${id}:1`, regions, strategy } });
      }
      const canary = (await t.store.regions.resolve("canary")).id;
      const eu = (await t.store.regions.resolve("eu")).id;
      const running = async (id: string) => {
        const row = await t.store.database.db
          .selectFrom("desired_resources")
          .select("version")
          .where("region_id", "=", canary)
          .where("resource_id", "=", id)
          .executeTakeFirstOrThrow();
        await t.client(ClusterService).reportObservedState({
          region: "canary",
          appliedVersion: BigInt(row.version),
          observations: [
            {
              type: ResourceType.DEPLOYMENT,
              id,
              appliedVersion: BigInt(row.version),
              observedImage: `${id}:1`,
              desiredReplicas: 1,
              readyReplicas: 1,
              updatedReplicas: 1,
            },
          ],
        });
      };
      const inEu = async (id: string) =>
        (await t.store.database.db.selectFrom("desired_resources").select("resource_id").where("region_id", "=", eu).where("resource_id", "=", id).execute())
          .length === 1;
      // Another transaction holds held's rollout row: the look that moves held on waits for it.
      const released = new Promise<void>((resolve) => {
        release = resolve;
      });
      let locked = () => {};
      const isLocked = new Promise<void>((resolve) => {
        locked = resolve;
      });
      holding = t.store.database.db.transaction().execute(async (tx) => {
        await tx.selectFrom("rollouts").select("id").where("deployment_id", "=", "held").forUpdate().execute();
        locked();
        await released;
      });
      await isLocked;
      await running("held");
      await sleep(300);
      await running("free");
      const reportedAt = Date.now();
      while (!(await inEu("free"))) {
        assert.ok(Date.now() - reportedAt < 10_000, "free's second wave starts while held's look waits");
        await sleep(50);
      }
      assert.equal(await inEu("held"), false, "held's look still waits");
      release();
      await holding;
      while (!(await inEu("held"))) {
        assert.ok(Date.now() - reportedAt < 20_000, "held's second wave starts once the lock is gone");
        await sleep(50);
      }
      for (const id of ["held", "free"]) {
        const transitions = await t.store.rollouts.transitions((await t.store.rollouts.get(id)).id);
        assert.equal(transitions.filter((x) => x.action === "start-wave").length, 2, `${id}: each wave started once`);
      }
    } finally {
      release();
      await holding?.catch(() => {});
      await t.close();
    }
  });
}
