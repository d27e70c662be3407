// A minimal agent-side consumer for tests: snapshot, then watch from its version, rebuilding
// the region's desired state and recording every version it was sent.
import assert from "node:assert/strict";
import { equals, fromBinary } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import type { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DesiredResourceSchema, type DesiredResource } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Store } from "@flotilla/store";

export const keyOf = (r: { type: number; id: string }) => `${r.type}/${r.id}`;

export class Follower {
  readonly state = new Map<string, DesiredResource>();
  /** Versions received on the watch, in arrival order. */
  readonly versions: number[] = [];
  snapshotVersion = -1;
  cursor = -1;
  readonly #abort = new AbortController();
  #watching: Promise<void> | undefined;
  error: unknown;

  readonly client: Client<typeof ClusterService>;
  readonly region: string;

  constructor(client: Client<typeof ClusterService>, region: string) {
    this.client = client;
    this.region = region;
  }

  /** Reads a full snapshot; `afterMessage` runs after each message (a slow client). */
  async snapshot(afterMessage?: () => Promise<void>): Promise<void> {
    this.state.clear();
    let sent = 0;
    let removed = 0;
    let complete: { resourceCount: bigint; removalCount: bigint } | undefined;
    for await (const res of this.client.syncDesiredState({ region: this.region })) {
      const { message } = res;
      if (message.case === "batch") {
        for (const r of message.value.resources) this.state.set(keyOf(r), r);
        sent += message.value.resources.length;
      } else if (message.case === "removals") {
        for (const r of message.value.resources) this.state.delete(keyOf(r));
        removed += message.value.resources.length;
      } else if (message.case === "complete") {
        this.snapshotVersion = this.cursor = Number(message.value.version);
        complete = message.value;
      }
      await afterMessage?.();
    }
    if (Number(complete?.resourceCount) !== sent || Number(complete?.removalCount) !== removed) {
      throw new Error(`snapshot: complete says ${complete?.resourceCount}/${complete?.removalCount}, got ${sent}/${removed}`);
    }
  }

  /** Watches from the cursor until stop(); `onMessage` sees each response. */
  watch(onMessage?: (events: number, version: number) => void): void {
    this.#watching = (async () => {
      try {
        const stream = this.client.watchDeploymentChanges({ region: this.region, versionLastSeen: BigInt(this.cursor) }, { signal: this.#abort.signal });
        for await (const res of stream) {
          for (const e of res.events) {
            const v = Number(e.version);
            this.versions.push(v);
            if (e.change.case === "upsert") this.state.set(keyOf(e.change.value), e.change.value);
            else if (e.change.case === "delete") this.state.delete(keyOf(e.change.value));
          }
          this.cursor = Number(res.version);
          onMessage?.(res.events.length, this.cursor);
        }
      } catch (error) {
        if (!this.#abort.signal.aborted) this.error = error;
      }
    })();
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#watching;
  }

  /** A follower that carries on from this one's state and cursor, through `client`. */
  continueOn(client: Client<typeof ClusterService>): Follower {
    const next = new Follower(client, this.region);
    for (const [k, v] of this.state) next.state.set(k, v);
    next.snapshotVersion = this.snapshotVersion;
    next.cursor = this.cursor;
    next.versions.push(...this.versions);
    return next;
  }

  /** Waits until the cursor reaches `version` (or fails after `timeoutMs`). */
  async reach(version: number, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.cursor < version) {
      if (this.error) throw this.error;
      if (Date.now() > deadline) throw new Error(`follower of ${this.region} stuck at ${this.cursor}, want ${version}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

/** The database's current desired state of a region, keyed like Follower.state. */
export async function desiredInDatabase(store: Store, region: string): Promise<{ head: number; state: Map<string, DesiredResource> }> {
  const r = await store.regions.resolve(region);
  const rows = await store.database.db
    .selectFrom("desired_resources")
    .select(["resource_type", "resource_id", "version", "body"])
    .where("region_id", "=", r.id)
    .execute();
  const state = new Map<string, DesiredResource>();
  for (const row of rows) {
    const resource = fromBinary(DesiredResourceSchema, row.body);
    resource.version = BigInt(row.version);
    state.set(keyOf(resource), resource);
  }
  return { head: r.headVersion, state };
}

/** The region's desired state at `version`, replayed from its outbox (which must hold every change). */
export async function desiredAtVersion(store: Store, region: string, version: number): Promise<Map<string, DesiredResource>> {
  const { id } = await store.regions.resolve(region);
  const state = new Map<string, DesiredResource>();
  for (let cursor = 0; cursor < version; ) {
    const changes = (await store.changes.read(id, cursor, 1000)).filter((c) => c.version <= version);
    assert.equal(changes[0]?.version, cursor + 1, `the outbox of ${region} lacks version ${cursor + 1}`);
    for (const { event } of changes) {
      if (event.change.case === "upsert") state.set(keyOf(event.change.value), { ...event.change.value, version: event.version });
      else if (event.change.case === "delete") state.delete(keyOf(event.change.value));
    }
    cursor = changes.at(-1)!.version;
  }
  return state;
}

/**
 * Asserts the follower caught up with the database: same state, and every version from its
 * first one to the head received exactly once, in order.
 */
export async function assertCaughtUp(follower: Follower, store: Store): Promise<void> {
  const expected = await desiredInDatabase(store, follower.region);
  await follower.reach(expected.head);
  await follower.stop();
  assert.equal(stateDiff(follower.state, expected.state), "");
  const first = follower.versions[0]!;
  assert.deepEqual(
    follower.versions,
    Array.from({ length: expected.head - first + 1 }, (_, i) => first + i),
  );
}

/** Describes how two states differ ("" when equal). */
export function stateDiff(actual: Map<string, DesiredResource>, expected: Map<string, DesiredResource>): string {
  const problems: string[] = [];
  for (const [k, v] of expected) {
    const a = actual.get(k);
    if (!a) problems.push(`missing ${k}@${v.version}`);
    else if (!equals(DesiredResourceSchema, a, v)) problems.push(`differs ${k}: have @${a.version}, want @${v.version}`);
  }
  for (const k of actual.keys()) if (!expected.has(k)) problems.push(`extra ${k}`);
  return problems.slice(0, 10).join("; ");
}
