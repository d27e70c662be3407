// Staged rollouts survive ctrl crashes (ARCHITECTURE §9): two ctrl processes share one
// MariaDB while several deployments roll out wave after wave, each change as soon as the one
// before succeeded; scripted agents report through ReportObservedState to whichever replica
// is up. Round after round, the replica that last ended a wave is killed with kill -9 (at a
// stored due time, so mid-transition, or at a random moment, mid-bake; every third round
// both), then restarted. From what is stored: every rollout SUCCEEDED, each wave started
// exactly once (rollout_transitions, action start-wave), every transition a compare-and-set
// (generations consecutive), no bake shortened (each wave starts ≥ the previous wave's
// running_since + bake), and each region written once per change.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { fromBinary } from "@bufbuild/protobuf";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { DesiredResourceSchema, ResourceType, RolloutState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Store, StoredRollout } from "@flotilla/store";
import { ADMIN_TOKEN } from "@flotilla/testkit/ctrl";
import { alive, onLiveReplica, spawnCtrl, type CtrlProcess } from "@flotilla/testkit/ctrl-process";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";
import { waitFor } from "@flotilla/testkit/stack";

const REGIONS = ["r1", "r2", "r3", "r4"];
const DEPLOYMENTS = ["d0", "d1", "d2", "d3"];
/** Changes per deployment at least (a create, then updates), each a rollout of its own; more until MIN_ROUNDS kills. */
const MIN_CHANGES = 2;
const BAKE_MS = 1000;
const MIN_ROUNDS = 6;
const STRATEGY = {
  waves: [{ name: "one", regions: ["r1"], bake: { seconds: 1n } }, { name: "two", regions: ["r2"], bake: { seconds: 1n } }, { name: "rest" }],
};
const WAVE_ENDED = "flotilla_ctrl_rollout_wave_duration_seconds_count";

const mysql = (await testDatabases()).find((d) => d.db.name === "mysql")!;

describe("staged rollouts on two ctrl replicas, killed with -9 mid-bake and mid-transition (mysql)", { skip: mysql.skip }, () => {
  let store: Store;
  let url: string;
  let cleanup: () => Promise<void>;
  /** The two replicas' slots; a killed one is replaced by a restarted process. */
  const replicas: (CtrlProcess | undefined)[] = [undefined, undefined];
  /** Every replica process started, killed ones included: their logs explain a rollout that did not end. */
  const started: CtrlProcess[] = [];
  const spawnReplica = async () => {
    const replica = await spawnCtrl(url, ADMIN_TOKEN, ["--poll-interval", "100ms"]);
    started.push(replica);
    return replica;
  };
  const rolloutErrors = () =>
    started
      .flatMap((r) => r.log().split("\n"))
      .filter((line) => / ERROR .*rollout/.test(line))
      .slice(-5);

  before(async () => {
    ({ store, url, cleanup } = await freshStore(mysql.db));
    for (const region of REGIONS) await store.regions.create(region);
    [replicas[0], replicas[1]] = await Promise.all([spawnReplica(), spawnReplica()]);
  });
  after(async () => {
    for (const replica of replicas) await replica?.kill("SIGKILL");
    await cleanup?.();
  });

  /** Calls `call` on a replica that is up, the other one when it fails to answer (killed meanwhile). */
  const onAnyReplica = <S extends DescService, T>(service: S, call: (client: Client<S>) => Promise<T>): Promise<T> =>
    onLiveReplica(() => replicas, service, call, { token: ADMIN_TOKEN, giveUpMs: 60_000 });

  /**
   * Scripted agents: every region reports each of its deployments RUNNING at the version it
   * holds, once per version (and a heartbeat now and then), through whichever replica is up.
   */
  const reportErrors: string[] = [];
  const runAgents = (signal: AbortSignal) =>
    (async () => {
      const reported = new Map<string, number>();
      let heartbeatAt = 0;
      while (!signal.aborted) {
        const rows = await store.database.db
          .selectFrom("desired_resources")
          .innerJoin("regions", "regions.id", "desired_resources.region_id")
          .select(["regions.name", "desired_resources.resource_id", "desired_resources.version", "desired_resources.body"])
          .where("resource_type", "=", ResourceType.DEPLOYMENT)
          .execute();
        const heartbeat = Date.now() - heartbeatAt > 1000;
        for (const region of REGIONS) {
          const held = rows.filter((r) => r.name === region);
          if (!heartbeat && held.every((r) => reported.get(`${region}/${r.resource_id}`) === Number(r.version))) continue;
          const observations = held.map((r) => {
            const spec = fromBinary(DesiredResourceSchema, r.body).spec;
            return {
              type: ResourceType.DEPLOYMENT,
              id: r.resource_id,
              appliedVersion: BigInt(r.version),
              observedImage: spec.case === "deployment" ? spec.value.workload?.image : "",
              desiredReplicas: 1,
              readyReplicas: 1,
              updatedReplicas: 1,
            };
          });
          const appliedVersion = held.reduce((max, r) => Math.max(max, Number(r.version)), 0);
          try {
            await onAnyReplica(ClusterService, (c) => c.reportObservedState({ region, appliedVersion: BigInt(appliedVersion), observations }));
            for (const r of held) reported.set(`${region}/${r.resource_id}`, Number(r.version));
          } catch (error) {
            // Reported again on the next turn; shown if a rollout does not end.
            reportErrors.push(`${region}: ${error instanceof Error ? error.message : String(error)}`);
          }
        }
        if (heartbeat) heartbeatAt = Date.now();
        await sleep(50);
      }
    })();

  const kills: string[] = [];
  /** Rollouts (changes) made per deployment. */
  const changed = new Map<string, number>();
  /** One deployment's changes, each once the rollout of the one before SUCCEEDED, until enough kills happened. */
  const changeAll = async (id: string) => {
    for (let revision = 1; revision <= MIN_CHANGES || kills.length < MIN_ROUNDS; revision++) {
      changed.set(id, revision);
      const deployment = { id, namespace: "demo", image: `app:${revision}`, regions: REGIONS.map((region) => ({ region, replicas: 1 })), strategy: STRATEGY };
      await onAnyReplica(DeploymentService, async (c) => {
        try {
          await (revision === 1 ? c.createDeployment({ deployment }) : c.updateDeployment({ deployment }));
        } catch (error) {
          // A create that committed on a replica killed before it answered.
          if (ConnectError.from(error).code !== Code.AlreadyExists) throw error;
        }
      });
      let last: StoredRollout | undefined;
      await waitFor(
        async () => (last = await store.rollouts.get(`${id}-${revision}`).catch(() => undefined))?.state === RolloutState.SUCCEEDED,
        `rollout ${id}-${revision} SUCCEEDED`,
        60_000,
        () =>
          last &&
          `${RolloutState[last.state]} at wave ${last.currentWave}: ${last.reason}; failed reports: ${reportErrors.slice(-5).join("; ")}; ctrl: ${rolloutErrors().join("; ")}`,
      );
    }
  };

  /** How many waves the replica has ended (its metrics); undefined when it does not answer. */
  const wavesEnded = async (replica: CtrlProcess): Promise<number | undefined> => {
    try {
      const text = await (await fetch(`${replica.url}/metrics`)).text();
      return text
        .split("\n")
        .filter((line) => line.startsWith(`${WAVE_ENDED} `) || line.startsWith(`${WAVE_ENDED}{`))
        .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(" ") + 1)), 0);
    } catch {
      return undefined;
    }
  };

  test(`${DEPLOYMENTS.length} deployments, ≥ ${MIN_CHANGES} rollouts each of 3 waves (${BAKE_MS} ms bakes); the driving replica killed ≥ ${MIN_ROUNDS} times`, async (t) => {
    const agents = new AbortController();
    const reporting = runAgents(agents.signal);
    let finished = false;
    const changes = Promise.all(DEPLOYMENTS.map(changeAll)).finally(() => {
      finished = true;
    });
    /** Waves each replica process had ended at the last round: who ended one since drives. */
    const seen = new Map<CtrlProcess, number>();
    const restarts: Promise<void>[] = [];
    try {
      for (let round = 0; !finished; round++) {
        // A replica killed is restarted in the background (a start takes seconds here); the next round waits for one that runs.
        await waitFor(() => finished || replicas.some(alive), "a replica up", 60_000);
        if (finished) break;
        const active = (
          await store.database.db.selectFrom("rollouts").select(["due_at", "plan", "current_wave"]).where("state", "=", RolloutState.PROGRESSING).execute()
        ).map((r) => ({
          due: r.due_at === null ? undefined : Number(r.due_at),
          baking: (JSON.parse(r.plan) as StoredRollout["waves"])[r.current_wave]?.runningSince !== undefined,
        }));
        const due = active.map((r) => r.due).filter((d): d is number => d !== undefined && d > Date.now() && d < Date.now() + 3000);
        const atTransition = round % 2 === 0 && due.length > 0;
        // Mid-transition: as a bake's end falls due (the next wave's start being written); else mid-bake, at a random moment.
        await sleep(atTransition ? Math.min(...due) - Date.now() + Math.random() * 20 : 300 + Math.random() * 700);
        const up = [0, 1].filter((slot) => alive(replicas[slot]));
        if (up.length === 0) continue;
        const ended = await Promise.all(up.map(async (slot) => ({ slot, waves: await wavesEnded(replicas[slot]!) })));
        const drivers = ended.filter((e) => (e.waves ?? 0) > (seen.get(replicas[e.slot]!) ?? 0)).map((e) => e.slot);
        const victims = round % 3 === 2 ? up : [drivers.length === 1 ? drivers[0]! : up[round % up.length]!];
        const baking = active.filter((r) => r.baking).length;
        kills.push(`round ${round}: ${atTransition ? "at a due time" : "at random"}, ${baking} baking, killed ${victims.join("+")} of ${up.join("+")}`);
        for (const e of ended) seen.set(replicas[e.slot]!, e.waves ?? 0);
        await Promise.all(victims.map((slot) => replicas[slot]!.kill("SIGKILL")));
        for (const slot of victims) {
          restarts.push(
            spawnReplica().then((replica) => {
              replicas[slot] = replica;
            }),
          );
        }
      }
      await changes;
    } finally {
      agents.abort();
      await reporting.catch(() => undefined);
      await Promise.allSettled(restarts);
    }
    t.diagnostic(`${[...changed.values()].reduce((a, b) => a + b)} rollouts, kills:\n${kills.join("\n")}`);

    for (const id of DEPLOYMENTS) {
      for (let revision = 1; revision <= changed.get(id)!; revision++) {
        const rollout = await store.rollouts.get(`${id}-${revision}`);
        const what = `${rollout.id} (kills:\n${kills.join("\n")})`;
        assert.equal(rollout.state, RolloutState.SUCCEEDED, what);
        const transitions = await store.rollouts.transitions(rollout.id);
        assert.deepEqual(
          transitions.filter((x) => x.action === "start-wave").map((x) => x.wave),
          [0, 1, 2],
          `${what}: each wave started exactly once`,
        );
        assert.deepEqual(
          transitions.map((x) => x.generation),
          transitions.map((_, i) => i + 1),
          `${what}: every transition a compare-and-set on the generation before`,
        );
        for (let wave = 1; wave < rollout.waves.length; wave++) {
          const before = rollout.waves[wave - 1]!;
          const started = rollout.waves[wave]!.startTime!;
          assert.ok(before.runningSince !== undefined, `${what}: wave ${wave - 1} baked`);
          assert.ok(
            started >= before.runningSince + before.bakeMs,
            `${what}: wave ${wave} started ${started - before.runningSince} ms after wave ${wave - 1} ran (bake ${before.bakeMs} ms)`,
          );
        }
      }
    }
    // Each region was written once per change: no wave's regions moved twice.
    const rows = await store.database.db
      .selectFrom("deployment_changes")
      .innerJoin("regions", "regions.id", "deployment_changes.region_id")
      .select(["regions.name", "deployment_changes.resource_id"])
      .execute();
    for (const id of DEPLOYMENTS) {
      for (const region of REGIONS) {
        assert.equal(rows.filter((r) => r.name === region && r.resource_id === id).length, changed.get(id), `${id} in ${region}: one write per change`);
      }
    }
  });
});
