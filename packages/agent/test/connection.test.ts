// The connection lifecycle against a scripted ctrl: the watch always carries version_last_seen,
// resumes from the last version received after an error, treats a silent stream as dead, and
// runs a full sync on RESYNC_REQUIRED and periodically; the secret values a snapshot leaves out
// are fetched until every one is answered.
import { describe, test } from "node:test";
import { createSecretKey, randomBytes } from "node:crypto";
import { silentLogger } from "@flotilla/runtime";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { ClusterService, type WatchDeploymentChangesRequest } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentSpecSchema, DesiredResourceSchema, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { packValues, sealValue, secretEnvContext } from "@flotilla/runtime/sealed-values";
import { ErrorInfoSchema } from "@flotilla/proto/google/rpc/error_details_pb.js";
import { Connection, secretEnvSealFetch } from "../src/connection.ts";
import { DesiredTable, desiredResource } from "../src/desired-table.ts";
import { openSecretEnv } from "../src/sealed-secrets.ts";
import { AgentMetrics } from "../src/metrics.ts";
import { waitFor } from "@flotilla/testkit/stack";

const resource = (id: string, version: number) =>
  create(DesiredResourceSchema, { type: ResourceType.DEPLOYMENT, id, version: BigInt(version), namespace: "n" });

/** Never yields; ends when the call is aborted. */
function hangUntil(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => signal.addEventListener("abort", () => reject(new ConnectError("aborted", Code.Canceled)), { once: true }));
}

type Step = (signal: AbortSignal) => AsyncGenerator<unknown>;

/**
 * A snapshot ctrl sends: its resources, then the ids in `removals` (deleted while it was
 * read); `breakAfterBatch`: the stream fails before the complete marker, `announce`: a wrong count.
 */
type Snapshot = { version: number; resources: ReturnType<typeof resource>[]; removals?: string[]; breakAfterBatch?: boolean; announce?: number };

/** GetSecretEnvSeals' answer to the deployments asked for (or its failure). */
type SealsAnswer = (deployments: { id: string; version: bigint }[]) => { seals: { id: string; sealed: Uint8Array }[]; answered: number };

function scriptedCtrl(snapshots: Snapshot[], watches: Step[], { keys = [], seals }: { keys?: { id: string; key: Uint8Array }[]; seals?: SealsAnswer } = {}) {
  const watchedFrom: (bigint | undefined)[] = [];
  const syncsWithSeals: boolean[] = [];
  let syncs = 0;
  const client = {
    async *syncDesiredState(request: { withSecretEnvSeals: boolean }) {
      syncsWithSeals.push(request.withSecretEnvSeals);
      const snapshot = snapshots[Math.min(syncs++, snapshots.length - 1)]!;
      yield { message: { case: "batch", value: { resources: snapshot.resources } } };
      if (snapshot.breakAfterBatch) throw new ConnectError("connection reset", Code.Unavailable);
      const removals = (snapshot.removals ?? []).map((id) => ({ type: ResourceType.DEPLOYMENT, id, namespace: "n", name: id }));
      if (removals.length > 0) yield { message: { case: "removals", value: { resources: removals } } };
      const resourceCount = BigInt(snapshot.announce ?? snapshot.resources.length);
      yield { message: { case: "complete", value: { version: BigInt(snapshot.version), resourceCount, removalCount: BigInt(removals.length) } } };
    },
    async getSecretKeys() {
      return { keys };
    },
    async getSecretEnvSeals({ deployments }: { deployments: { id: string; version: bigint }[] }) {
      if (!seals) throw new ConnectError("no seals scripted", Code.Unimplemented);
      return seals(deployments);
    },
    watchDeploymentChanges(request: WatchDeploymentChangesRequest, options: { signal: AbortSignal }) {
      watchedFrom.push(request.versionLastSeen);
      const step =
        watches[watchedFrom.length - 1] ??
        // biome-ignore lint/correctness/useYield: a watch that sends nothing until it is aborted
        async function* (signal: AbortSignal) {
          await hangUntil(signal);
        };
      return step(options.signal);
    },
  } as unknown as Client<typeof ClusterService>;
  return { client, watchedFrom, syncsWithSeals, syncs: () => syncs };
}

function connect(client: Client<typeof ClusterService>, overrides: { fullSyncIntervalMs?: number } = {}) {
  const changed: string[] = [];
  const table = new DesiredTable((key) => changed.push(key));
  const metrics = new AgentMetrics();
  metrics.collectFrom({ queueDepth: () => 0, desiredCounts: () => table.counts() });
  let pruned = 0;
  const connection = new Connection({
    client,
    region: "east",
    table,
    metrics,
    afterSnapshot: async () => void pruned++,
    fullSyncIntervalMs: overrides.fullSyncIntervalMs ?? 60_000,
    bookmarkIntervalMs: 20,
    reconnectBackoff: { minMs: 5, maxMs: 10 },
    log: silentLogger,
  });
  const stop = new AbortController();
  const running = connection.run(stop.signal);
  return {
    table,
    changed,
    metrics,
    connection,
    pruned: () => pruned,
    async stop() {
      stop.abort();
      await running;
    },
  };
}

async function reconnects(metrics: AgentMetrics): Promise<Record<string, number>> {
  // (Every reason is exported from the start, at zero: only the counted ones are compared.)
  return Object.fromEntries((await metrics.reconnects.get()).values.filter((v) => v.value > 0).map((v) => [v.labels.reason, v.value]));
}

describe("Connection", () => {
  test("resumes from the last version, detects a silent stream, resyncs on RESYNC_REQUIRED", async () => {
    const resync = new ConnectError("RESYNC_REQUIRED: too old", Code.FailedPrecondition, undefined, [
      { desc: ErrorInfoSchema, value: { reason: "RESYNC_REQUIRED", domain: "flotilla.dev" } },
    ]);
    const ctrl = scriptedCtrl(
      [
        { version: 5, resources: [resource("a", 5)] },
        { version: 9, resources: [resource("a", 8)] },
      ],
      [
        async function* () {
          yield { events: [{ version: 6n, change: { case: "upsert", value: resource("b", 6) } }], version: 6n };
          throw new ConnectError("connection reset", Code.Unavailable);
        },
        async function* (signal) {
          yield { events: [], version: 7n };
          await hangUntil(signal);
        },
        async function* () {
          yield* [];
          throw resync;
        },
      ],
    );
    const agent = connect(ctrl.client);
    await waitFor(() => ctrl.watchedFrom.length >= 4, "four watches");
    await agent.stop();
    assert.deepEqual(ctrl.watchedFrom, [5n, 6n, 7n, 9n], "always sets version_last_seen; resumes from the last version received");
    assert.equal(ctrl.syncs(), 2);
    assert.equal(agent.pruned(), 2, "prune after each complete snapshot");
    assert.deepEqual(await reconnects(agent.metrics), { error: 1, inactive: 1, resync_required: 1 });
    assert.equal(agent.table.get("deployment/a")?.version, 8);
    assert.equal(agent.table.get("deployment/b")?.desired.kind, "delete", "b is absent from the second snapshot");
    assert.equal(agent.connection.cursor, 9);
  });

  test("a periodic full sync replaces the stream without counting as a reconnect", async () => {
    const ctrl = scriptedCtrl([{ version: 0, resources: [] }], []);
    const agent = connect(ctrl.client, { fullSyncIntervalMs: 30 });
    await waitFor(() => ctrl.syncs() >= 3, "three full syncs");
    await agent.stop();
    assert.ok(
      ctrl.watchedFrom.every((v) => v === 0n),
      "version_last_seen is sent even when 0",
    );
    assert.deepEqual(await reconnects(agent.metrics), {});
  });

  test("changes committed while the snapshot was read: a resource sent again replaces the first, a removal takes one out", async () => {
    const ctrl = scriptedCtrl([{ version: 7, resources: [resource("a", 4), resource("b", 5), resource("b", 7)], removals: ["a"] }], []);
    const agent = connect(ctrl.client);
    await waitFor(() => ctrl.watchedFrom.length >= 1, "the watch after the snapshot");
    await agent.stop();
    assert.deepEqual(
      [...agent.table.entries()].map((e) => [e.key, e.desired.kind, e.version]),
      [["deployment/b", "upsert", 7]],
    );
    assert.equal(agent.connection.cursor, 7);
  });

  for (const [failure, broken] of [
    ["breaks before its complete marker", { breakAfterBatch: true }],
    ["announces another count than it sent", { announce: 3 }],
  ] as const) {
    test(`a full sync that ${failure} leaves the previous table intact and prunes nothing`, async () => {
      const ctrl = scriptedCtrl(
        [
          { version: 5, resources: [resource("a", 4), resource("b", 5)] },
          // Changes a, adds c and lacks b: none of it may reach the table.
          { version: 9, resources: [resource("a", 8), resource("c", 9)], ...broken },
        ],
        // Every periodic full sync after the first fails the same way.
        [],
      );
      const agent = connect(ctrl.client, { fullSyncIntervalMs: 20 });
      await waitFor(() => ctrl.syncs() >= 4, "failed full syncs after the first");
      await agent.stop();
      assert.equal(agent.pruned(), 1, "only the complete snapshot was followed by prune");
      assert.deepEqual(agent.changed.sort(), ["deployment/a", "deployment/b"], "only the first snapshot changed the table");
      assert.deepEqual(
        [...agent.table.entries()].map((e) => [e.key, e.desired.kind, e.version]),
        [
          ["deployment/a", "upsert", 4],
          ["deployment/b", "upsert", 5],
        ],
      );
      assert.equal(agent.connection.cursor, 5);
    });
  }

  const regionKey = { id: "k1/r7", key: randomBytes(32) };
  const sealOf = (id: string, value = `${id}-value`) =>
    sealValue(regionKey.id, createSecretKey(regionKey.key), randomBytes(12), secretEnvContext(id, ["DB_PASSWORD"]), packValues([Buffer.from(value)]));
  /** As a snapshot page delivers a deployment with one secret value: the name and the checksum, and the seal if `sealed`. */
  const paged = (id: string, { version = 5, checksum = "0123456789abcdef", sealed }: { version?: number; checksum?: string; sealed?: Uint8Array } = {}) => {
    const r = resource(id, version);
    r.spec = {
      case: "deployment",
      value: create(DeploymentSpecSchema, {
        workload: { image: "api:1", secretEnv: [{ name: "DB_PASSWORD" }], secretEnvChecksum: checksum, secretEnvSealed: sealed },
      }),
    };
    return r;
  };
  const heldValue = (agent: ReturnType<typeof connect>, id: string) => {
    const kept = desiredResource(agent.table.get(`deployment/${id}`)!.desired as { encoded: string });
    return openSecretEnv(kept.spec.case === "deployment" ? kept.spec.value.workload!.secretEnv : []).map((v) => v.toString());
  };

  test("a new agent asks for the values in the pages and fetches none; its next full sync asks without, and fetches only a value it lacks", async () => {
    const asked: string[][] = [];
    const ctrl = scriptedCtrl(
      [
        { version: 5, resources: [paged("a", { sealed: sealOf("a") }), paged("b", { sealed: sealOf("b") })] },
        { version: 8, resources: [paged("a"), paged("b", { version: 8, checksum: "fedcba9876543210" })] },
      ],
      [],
      {
        keys: [regionKey],
        seals: (deployments) => {
          asked.push(deployments.map((d) => `${d.id}@${d.version}`));
          return { seals: deployments.map(({ id }) => ({ id, sealed: sealOf(id, `${id}-changed`) })), answered: deployments.length };
        },
      },
    );
    const agent = connect(ctrl.client, { fullSyncIntervalMs: 30 });
    await waitFor(() => ctrl.syncs() >= 2 && agent.table.get("deployment/b")?.version === 8, "the second full sync staged");
    await agent.stop();
    assert.deepEqual(ctrl.syncsWithSeals.slice(0, 2), [true, false], "with the seals while it holds nothing, then without");
    assert.deepEqual(asked[0], ["b@8"], "the first sync fetched nothing; the second only the value whose checksum changed");
    assert.deepEqual(heldValue(agent, "a"), ["a-value"]);
    assert.deepEqual(heldValue(agent, "b"), ["b-changed"]);
  });

  test("the secret values a snapshot lacks are fetched, asked again for the part ctrl left; a fetch that fails fails the full sync, which runs again", async () => {
    const asked: string[][] = [];
    const ctrl = scriptedCtrl([{ version: 5, resources: [paged("a"), paged("b")] }], [], {
      keys: [regionKey],
      seals: (deployments) => {
        asked.push(deployments.map((d) => `${d.id}@${d.version}`));
        if (asked.length === 1) throw new ConnectError("ctrl went away", Code.Unavailable);
        // One deployment an answer, as with --secret-seals-max 1.
        return { seals: [{ id: deployments[0]!.id, sealed: sealOf(deployments[0]!.id) }], answered: 1 };
      },
    });
    const agent = connect(ctrl.client);
    await waitFor(() => ctrl.watchedFrom.length >= 1, "the watch after the snapshot");
    await agent.stop();
    assert.deepEqual(asked, [["a@5", "b@5"], ["a@5", "b@5"], ["b@5"]]);
    assert.equal(ctrl.syncs(), 2, "the failed fetch failed its full sync");
    assert.equal(agent.pruned(), 1);
    assert.deepEqual(await reconnects(agent.metrics), { error: 1 });
    for (const id of ["a", "b"]) assert.deepEqual(heldValue(agent, id), [`${id}-value`]);
  });
});

test("fetching secret values: a ctrl of an earlier version (no GetSecretEnvSeals) is a failure that says so; a credential refused values gets none", async () => {
  const fetchFrom = (getSecretEnvSeals?: () => never) =>
    secretEnvSealFetch(
      createClient(
        ClusterService,
        createRouterTransport(({ service }) => service(ClusterService, getSecretEnvSeals ? { getSecretEnvSeals } : {})),
      ),
      "east",
      {},
    );
  await assert.rejects(fetchFrom()([{ id: "api", version: 3n }]), /ctrl is of an earlier version, without GetSecretEnvSeals/);
  const refused = await fetchFrom(() => {
    throw new ConnectError("not this credential", Code.PermissionDenied);
  })([{ id: "api", version: 3n }]);
  assert.equal(refused.size, 0);
});
