// Shared by burst-sqlite.test.ts and burst-mysql.test.ts.
// A burst of 10,000 updates to 100 deployments collapses: while the target is held, changes
// pile up in the desired table, and once released each key is applied at most once more than
// it was in flight: applies ≤ distinct final states + concurrency. Never two applies of one
// object at once (the target is instrumented).
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { create } from "@bufbuild/protobuf";
import { DeploymentSchema, type DesiredResource, type ResourceTombstone } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { testDatabases } from "@flotilla/testkit/databases";
import { desiredInDatabase } from "@flotilla/testkit/follower";
import { resourceKey } from "../src/keys.ts";
import type { Target } from "../src/target.ts";
import { KubernetesTarget } from "../src/targets/kubernetes.ts";
import { REGION, startStack, waitConverged, waitFor, type Stack } from "@flotilla/testkit/stack";

const DEPLOYMENTS = 100;
const UPDATES_EACH = 100;
const CONCURRENCY = 8;
const WRITERS = 4;

/** Wraps a target: counts applies, tracks applies in flight per key, and can hold every call. */
class InstrumentedTarget implements Target {
  readonly #inner: Target;
  applies = 0;
  maxInFlightPerKey = 0;
  readonly #inFlight = new Map<string, number>();
  #held: Promise<void> | undefined;
  #release: () => void = () => {};

  constructor(inner: Target) {
    this.#inner = inner;
  }

  hold(): void {
    this.#held = new Promise((resolve) => (this.#release = resolve));
  }

  release(): void {
    this.#held = undefined;
    this.#release();
  }

  async apply(resource: DesiredResource): Promise<void> {
    const key = resourceKey(resource.type, resource.id);
    this.applies++;
    const running = (this.#inFlight.get(key) ?? 0) + 1;
    this.#inFlight.set(key, running);
    this.maxInFlightPerKey = Math.max(this.maxInFlightPerKey, running);
    try {
      await this.#held;
      await this.#inner.apply(resource);
    } finally {
      this.#inFlight.set(key, this.#inFlight.get(key)! - 1);
    }
  }

  delete(tombstone: ResourceTombstone): Promise<void> {
    return this.#inner.delete(tombstone);
  }

  listManaged() {
    return this.#inner.listManaged();
  }
}

/** The burst suite on one database (one file per database keeps each file within its time budget). */
export async function burstSuite(database: "sqlite" | "mysql"): Promise<void> {
  const { db, skip } = (await testDatabases()).find(({ db }) => db.name === database)!;
  describe(`burst of updates (${db.name})`, { skip }, () => {
    let stack: Stack;
    before(async () => {
      stack = await startStack(db);
    });
    after(() => stack?.close());

    test(`${DEPLOYMENTS * UPDATES_EACH} updates to ${DEPLOYMENTS} deployments: coalesced, one apply at a time per object`, async () => {
      const target = new InstrumentedTarget(new KubernetesTarget({ kubeClient: stack.kubeClient, region: REGION }));
      const agent = await stack.agent({ target, concurrency: CONCURRENCY });
      await agent.ready;
      const deployments = stack.t.client(DeploymentService);
      const spec = (i: number, image: string) => ({ id: `b${i}`, namespace: "burst", image, regions: [{ region: REGION, replicas: 1 }] });
      await Promise.all(Array.from({ length: DEPLOYMENTS }, (_, i) => deployments.createDeployment({ deployment: spec(i, "app:0") })));
      await waitConverged(stack);

      target.hold();
      target.applies = 0;
      // Straight to ctrl's store (the operator API's write path minus RPC overhead), so the burst
      // fits the test's time budget.
      const started = Date.now();
      // A few writers (each owning some deployments) beat one per deployment: every write
      // takes the region's row lock, so more writers only add lock contention.
      await Promise.all(
        Array.from({ length: WRITERS }, async (_, writer) => {
          for (let u = 1; u <= UPDATES_EACH; u++) {
            for (let i = writer; i < DEPLOYMENTS; i += WRITERS) {
              await stack.t.store.deployments.update(create(DeploymentSchema, spec(i, `app:${u}`)));
              // A turn of the event loop per write, as between the operator API's requests:
              // SQLite's driver answers without I/O, so the writers would otherwise hold ctrl's
              // stream to the agent back until the whole burst is written, and the agent would
              // then have all 10,000 changes to catch up on (longer than the wait on a loaded machine).
              await new Promise((resolve) => setImmediate(resolve));
            }
          }
        }),
      );
      const writeMs = Date.now() - started;
      const { head } = await desiredInDatabase(stack.t.store, REGION);
      await waitFor(async () => (await agent.metrics.versionLastSeen.get()).values[0]?.value === head, "the agent's cursor at the head");
      assert.ok(target.applies <= CONCURRENCY, `only the keys in flight started while held (${target.applies})`);
      target.release();
      await waitConverged(stack);

      assert.ok(target.applies <= DEPLOYMENTS + CONCURRENCY, `${target.applies} applies for ${DEPLOYMENTS} final states`);
      assert.ok(target.applies >= DEPLOYMENTS, "every final state applied");
      assert.equal(target.maxInFlightPerKey, 1, "never two applies of one object at once");
      const coalesced = (await agent.metrics.coalesced.get()).values[0]?.value ?? 0;
      assert.ok(coalesced > DEPLOYMENTS * UPDATES_EACH * 0.9, `changes were coalesced (${coalesced}; burst written in ${writeMs} ms)`);
    });
  });
}
