// The agent's connection to ctrl: SyncDesiredState, staged → replace the desired table →
// after-snapshot work (prune) → WatchDeploymentChanges from the snapshot's version, for as long
// as it lasts.
//
// * Before each stream, the keys that open the region's secret values (GetSecretKeys): a
//   rotation of ctrl's keys may have added one.
// * A snapshot's pages leave secret values out (unless the table is empty): those of a batch
//   that the table does not hold are fetched (GetSecretEnvSeals) while the next is read.
// * Any stream failure reconnects with capped exponential backoff and jitter, resuming the
//   watch from the last version received (no resync needed: the table already holds it).
// * RESYNC_REQUIRED (cursor past the outbox retention, or ahead of a restored database) → full sync.
// * No message at all (events or bookmarks) for 3× the bookmark interval → the stream is dead.
// * A full sync runs periodically anyway (jittered), as a safety net.
import type { Logger } from "@flotilla/runtime";
import type { CallOptions, Client } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { ErrorInfoSchema } from "@flotilla/proto/google/rpc/error_details_pb.js";
import { CONSUMER_TOO_SLOW, RESYNC_REQUIRED } from "@flotilla/runtime";
import { backoffDelay, jittered, sleep, type BackoffOptions } from "./backoff.ts";
import type { DesiredTable, SecretEnvSealFetch } from "./desired-table.ts";
import type { AgentMetrics, ReconnectReason } from "./metrics.ts";
import { Watchdog } from "./watchdog.ts";

export interface ConnectionOptions {
  client: Client<typeof ClusterService>;
  region: string;
  table: DesiredTable;
  metrics: AgentMetrics;
  /** Runs after each complete snapshot replaced the table, before the watch starts (prune). */
  afterSnapshot: (version: number) => Promise<void>;
  /** Runs when a watch stream delivered its first message (after every (re)connect). */
  onConnected?: () => void;
  /** Periodic full sync, jittered ±10%. */
  fullSyncIntervalMs: number;
  /** ctrl's bookmark interval: a stream silent for 3× this long is treated as dead. */
  bookmarkIntervalMs: number;
  reconnectBackoff: BackoffOptions;
  log: Logger;
}

/** Why we aborted a stream ourselves (the abort reason of its signal). */
class StreamInterrupted extends Error {
  readonly why: "full_sync" | "inactive";
  constructor(why: "full_sync" | "inactive") {
    super(why === "full_sync" ? "periodic full sync due" : "stream silent for too long");
    this.why = why;
  }
}

export class Connection {
  readonly #options: ConnectionOptions;
  /** Region version the desired table is complete up to. */
  #cursor = 0;
  #failures = 0;
  #fullSyncTimer: NodeJS.Timeout | undefined;
  /** Aborts the stream open now. */
  #current: AbortController | undefined;
  #connected = false;

  constructor(options: ConnectionOptions) {
    this.#options = options;
  }

  get cursor(): number {
    return this.#cursor;
  }

  /** Whether the last call to ctrl succeeded: a full sync completed or a watch stream delivered, and none failed since. */
  get connected(): boolean {
    return this.#connected;
  }

  /** Runs until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const { metrics, log, reconnectBackoff } = this.#options;
    let syncNeeded = true;
    try {
      while (!signal.aborted) {
        const stream = new AbortController();
        this.#current = stream;
        const stopStream = () => stream.abort(signal.reason);
        signal.addEventListener("abort", stopStream, { once: true });
        let reason: ReconnectReason;
        try {
          await this.#fetchSecretKeys(stream.signal);
          if (syncNeeded) {
            await this.#fullSync(stream.signal);
            syncNeeded = false;
            this.#connected = true;
          }
          await this.#watch(stream.signal);
          reason = "closed";
        } catch (error) {
          if (signal.aborted) break;
          const interrupted = stream.signal.reason instanceof StreamInterrupted ? stream.signal.reason.why : undefined;
          if (interrupted === "full_sync") {
            syncNeeded = true;
            continue;
          }
          reason = interrupted ?? classify(error);
          if (reason === "resync_required") syncNeeded = true;
          log.warn(`ctrl stream: ${reason}: ${error instanceof Error ? error.message : String(error)}`, { reason });
        } finally {
          signal.removeEventListener("abort", stopStream);
        }
        this.#connected = false;
        metrics.reconnects.inc({ reason });
        await sleep(backoffDelay(this.#failures++, reconnectBackoff), signal);
      }
    } finally {
      this.#connected = false;
      clearTimeout(this.#fullSyncTimer);
    }
  }

  async #fetchSecretKeys(signal: AbortSignal): Promise<void> {
    const { client, region, table } = this.#options;
    try {
      table.secretKeys.set((await client.getSecretKeys({ region }, { signal })).keys);
    } catch (error) {
      // A ctrl of an earlier version has no such call (it sends values in plain text). A
      // credential other than the region's agent token (the admin token, in a local stack) gets
      // no keys: a deployment with secret values then fails to apply, saying why.
      const code = ConnectError.from(error).code;
      if (code !== Code.Unimplemented && code !== Code.PermissionDenied) throw error;
      table.secretKeys.set([]);
    }
  }

  /** Snapshot into the table, then the after-snapshot work; the table is untouched unless the snapshot completes. */
  async #fullSync(signal: AbortSignal): Promise<void> {
    const { client, region, table, metrics, afterSnapshot, fullSyncIntervalMs } = this.#options;
    clearTimeout(this.#fullSyncTimer);
    const stopTimer = metrics.fullSyncDuration.startTimer();
    // Staged as they arrive (not collected first: 100,000 decoded messages took ~500 MB at peak).
    const snapshot = table.stage();
    let complete: { version: number; count: number; removals: number } | undefined;
    const watchdog = this.#watchdog();
    const fetchSeals = secretEnvSealFetch(client, region, { signal });
    try {
      // Holding nothing (its first sync since it started), it asks for the values in the pages:
      // one stream rather than a GetSecretEnvSeals call per batch. Holding them, it fetches the
      // ones it lacks; a ctrl of an earlier version ignores the field, and they are fetched too.
      for await (const response of client.syncDesiredState({ region, withSecretEnvSeals: table.size === 0 }, { signal })) {
        watchdog.reset();
        const { message } = response;
        // A batch's missing values are fetched while the next batch is read.
        if (message.case === "batch") await snapshot.addBatch(message.value.resources, fetchSeals);
        else if (message.case === "removals") {
          await snapshot.staged();
          for (const tombstone of message.value.resources) snapshot.remove(tombstone);
        } else if (message.case === "complete") {
          complete = { version: Number(message.value.version), count: Number(message.value.resourceCount), removals: Number(message.value.removalCount) };
        }
        watchdog.reset();
      }
    } finally {
      watchdog.stop();
    }
    await snapshot.staged();
    if (!complete) throw new Error("SyncDesiredState ended without its complete marker");
    if (complete.count !== snapshot.added || complete.removals !== snapshot.removed) {
      throw new Error(`snapshot announced ${complete.count} resources and ${complete.removals} removals but sent ${snapshot.added} and ${snapshot.removed}`);
    }
    table.replaceAll(snapshot, complete.version);
    this.#advance(complete.version);
    await afterSnapshot(complete.version);
    stopTimer();
    this.#fullSyncTimer = setTimeout(() => this.#current?.abort(new StreamInterrupted("full_sync")), jittered(fullSyncIntervalMs, 0.1));
    this.#fullSyncTimer.unref();
  }

  /** Follows changes after the cursor; returns when ctrl ends the stream. */
  async #watch(signal: AbortSignal): Promise<void> {
    const { client, region, table } = this.#options;
    const watchdog = this.#watchdog();
    try {
      // Always set, even to 0: "strictly after this version" (absent would mean "from the head").
      const stream = client.watchDeploymentChanges({ region, versionLastSeen: BigInt(this.#cursor) }, { signal });
      let first = true;
      for await (const response of stream) {
        watchdog.reset();
        if (first) {
          first = false;
          this.#connected = true;
          this.#options.onConnected?.();
        }
        for (const event of response.events) {
          const version = Number(event.version);
          if (event.change.case === "upsert") table.upsert(event.change.value, version);
          else if (event.change.case === "delete") table.remove(event.change.value, version);
        }
        this.#advance(Number(response.version));
      }
    } finally {
      watchdog.stop();
    }
  }

  #advance(version: number): void {
    this.#cursor = version;
    this.#failures = 0;
    this.#options.metrics.versionLastSeen.set(version);
  }

  /** Aborts the current stream as dead once no message came for 3× the bookmark interval. */
  #watchdog(): Watchdog {
    return new Watchdog(3 * this.#options.bookmarkIntervalMs, () => this.#current?.abort(new StreamInterrupted("inactive")));
  }
}

function classify(error: unknown): ReconnectReason {
  const reason = ConnectError.from(error).findDetails(ErrorInfoSchema)[0]?.reason;
  if (reason === RESYNC_REQUIRED) return "resync_required";
  if (reason === CONSUMER_TOO_SLOW) return "consumer_too_slow";
  return "error";
}

/**
 * GetSecretEnvSeals until every deployment asked for is answered. A credential other than the
 * region's agent token gets no values (PERMISSION_DENIED): the deployments then stay without,
 * and fail to apply saying why, as with GetSecretKeys. A ctrl of an earlier version lacks the
 * call (UNIMPLEMENTED): a failure that says so.
 */
export function secretEnvSealFetch(client: Client<typeof ClusterService>, region: string, options: CallOptions): SecretEnvSealFetch {
  return async (wanted) => {
    const seals = new Map<string, Uint8Array>();
    try {
      for (let rest = wanted; rest.length > 0; ) {
        const answer = await client.getSecretEnvSeals({ region, deployments: rest }, options);
        if (answer.answered === 0) throw new Error("GetSecretEnvSeals answered none of the deployments asked for");
        for (const { id, sealed } of answer.seals) seals.set(id, sealed);
        rest = rest.slice(answer.answered);
      }
    } catch (error) {
      const code = ConnectError.from(error).code;
      if (code === Code.Unimplemented) throw new Error("ctrl is of an earlier version, without GetSecretEnvSeals: the values come once it is upgraded");
      if (code !== Code.PermissionDenied) throw error;
    }
    return seals;
  };
}
