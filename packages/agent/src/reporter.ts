// The reporter: sends ctrl what the agent observes (ReportObservedState), independent of
// reconciliation (a failing report never holds up an apply).
//
// * Only changed observations are sent: keys are marked by touch() when something about them
//   may have changed, and an observation equal to the last one sent for its key is dropped.
// * Calls are batched (≤ maxBatch observations) and rate-limited (≤ one per reportIntervalMs).
// * With nothing to send, a heartbeat (no observations) goes out every heartbeatIntervalMs; every
//   call carries the agent's cursor as its applied version.
// * requestFullSet() (after each (re)connect to ctrl) resends every observation once, marked
//   `full_set`, in batches.
// * A failed call is retried with backoff; its observations stay pending meanwhile.
// * With leader election, every call carries the leader's epoch; ctrl refusing it as FENCED (a
//   newer leader exists) ends the run through onFenced, and the observations stay pending.
import { createHash } from "node:crypto";
import type { Logger } from "@flotilla/runtime";
import { toBinary } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { ConnectError, type Client } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@flotilla/proto/google/rpc/error_details_pb.js";
import { FENCED } from "@flotilla/runtime";
import { ResourceObservationSchema, type ClusterService, type ResourceObservation } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { backoffDelay, sleep } from "./backoff.ts";
import { keyedStrings, type KeyedStrings } from "./keyed-strings.ts";
import type { ReportingLeader } from "./leadership.ts";
import type { AgentMetrics } from "./metrics.ts";
import type { ObservationSource } from "./observation.ts";

export interface ReporterOptions {
  client: Client<typeof ClusterService>;
  region: string;
  source: ObservationSource;
  /** The agent's applied version: the region version its desired table is complete up to. */
  cursor: () => number;
  /** At most one call per this interval. */
  reportIntervalMs: number;
  /** A call (a heartbeat if nothing changed) at least this often. */
  heartbeatIntervalMs: number;
  /** Deadline of a call. */
  callTimeoutMs: number;
  /** Observations per call. Default 500. */
  maxBatch?: number;
  metrics: AgentMetrics;
  log: Logger;
  /** The leader this agent reports as (leader election on), sent for ctrl's fencing. */
  leader?: () => ReportingLeader | undefined;
  /** ctrl refused a report as FENCED: this agent is no longer the leader. */
  onFenced?: (message: string) => void;
  /** Where the digest of each key's last observation sent is kept; default: a map of the reporter's own. */
  sent?: KeyedStrings;
  /** After each call that carried observations. */
  onSent?: () => void;
}

export const DEFAULT_MAX_BATCH = 500;

export class Reporter {
  readonly #options: ReporterOptions;
  readonly #maxBatch: number;
  /** Keys whose observation may differ from the last one sent. */
  readonly #dirty = new Set<string>();
  /**
   * The digest of the last observation sent per key (its encoding without the timestamp; see
   * digestOf(), held in the key's table entry by the agent): one per resource, so kept small — the packed encoding took
   * about 100 B more. The encoding is deterministic (no map fields), so equal observations have
   * equal digests.
   */
  readonly #sent: KeyedStrings;
  /** Keys of a full set still to send (sent even if unchanged); undefined when none is due. */
  #fullSet: Set<string> | undefined;
  #fullSetDue = true;
  #wakeUp = new AbortController();

  constructor(options: ReporterOptions) {
    this.#options = options;
    this.#maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH;
    this.#sent = options.sent ?? keyedStrings();
  }

  /** Something about `key` may have changed. */
  touch(key: string): void {
    this.#dirty.add(key);
    this.#wake();
  }

  /** Resend every observation once, marked as the full set (ctrl may have missed changes). */
  requestFullSet(): void {
    this.#fullSetDue = true;
    this.#wake();
  }

  /** Ends the current wait, once: abort() makes its reason (a DOMException, with a stack) even when already aborted. */
  #wake(): void {
    if (!this.#wakeUp.signal.aborted) this.#wakeUp.abort();
  }

  /** Runs until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const { reportIntervalMs, heartbeatIntervalMs, metrics, log } = this.#options;
    let lastCall = 0;
    let failures = 0;
    while (!signal.aborted) {
      if (!this.#hasWork()) {
        await sleep(lastCall + heartbeatIntervalMs - Date.now(), AbortSignal.any([signal, this.#wakeUp.signal]));
        if (this.#wakeUp.signal.aborted) this.#wakeUp = new AbortController();
      }
      await sleep(lastCall + reportIntervalMs - Date.now(), signal);
      if (signal.aborted) break;
      const batch = this.#nextBatch();
      const heartbeatDue = Date.now() - lastCall >= heartbeatIntervalMs;
      if (batch.observations.length === 0 && !heartbeatDue) {
        // Nothing changed after all (or nothing observable yet): wait without calling.
        if (this.#hasWork()) await sleep(reportIntervalMs, signal);
        continue;
      }
      const leader = this.#options.leader?.();
      if (this.#options.leader && !leader) {
        // The term ended (its signal aborts at once): never report without the epoch.
        this.#requeue(batch);
        break;
      }
      lastCall = Date.now();
      try {
        await this.#send(batch, leader, signal);
        failures = 0;
        if (batch.observations.length > 0) this.#options.onSent?.();
      } catch (error) {
        if (signal.aborted) break;
        metrics.reportErrors.inc();
        this.#requeue(batch);
        if (isFenced(error)) {
          this.#options.onFenced?.(ConnectError.from(error).message);
          break;
        }
        const delay = backoffDelay(failures++, { minMs: reportIntervalMs, maxMs: Math.max(reportIntervalMs, heartbeatIntervalMs) });
        if (failures <= 3 || failures % 10 === 0)
          log.warn(`report to ctrl failed (retry in ${Math.round(delay)} ms): ${error instanceof Error ? error.message : String(error)}`);
        await sleep(delay, signal);
      }
    }
  }

  /** Keys waiting to be reported: changed ones and the rest of a full set. */
  get backlog(): number {
    return this.#dirty.size + (this.#fullSet?.size ?? 0);
  }

  #hasWork(): boolean {
    return this.#fullSetDue || (this.#fullSet?.size ?? 0) > 0 || this.#dirty.size > 0;
  }

  /** Up to maxBatch observations: the rest of a due full set first, else changed ones. */
  #nextBatch(): Batch {
    const { source } = this.#options;
    if (this.#fullSetDue) {
      this.#fullSetDue = false;
      this.#fullSet = new Set([...source.keys(), ...[...this.#sent.entries()].map(([key]) => key)]);
    }
    const observations: Observed[] = [];
    if (this.#fullSet && this.#fullSet.size > 0) {
      for (const key of this.#fullSet) {
        if (observations.length >= this.#maxBatch) break;
        const observation = source.observe(key);
        if (!observation) continue;
        this.#fullSet.delete(key);
        this.#dirty.delete(key);
        observations.push({ key, observation, digest: digestOf(observation) });
      }
      if (observations.length > 0 || this.#fullSet.size > 0) return { observations, fullSet: true };
    }
    for (const key of this.#dirty) {
      if (observations.length >= this.#maxBatch) break;
      const observation = source.observe(key);
      if (!observation) continue;
      this.#dirty.delete(key);
      const digest = digestOf(observation);
      if (this.#sent.get(key) === digest) continue;
      observations.push({ key, observation, digest });
    }
    return { observations, fullSet: false };
  }

  async #send(batch: Batch, leader: ReportingLeader | undefined, signal: AbortSignal): Promise<void> {
    const { client, region, cursor, source, metrics } = this.#options;
    const now = timestampFromMs(Date.now());
    // The batch's own messages go into the request (stamped, not copied): a batch is held for a
    // whole round trip, and with 100,000 resources copies of it were much of the agent's garbage.
    for (const { observation } of batch.observations) observation.observedAt = now;
    await client.reportObservedState(
      {
        region,
        appliedVersion: BigInt(cursor()),
        observations: batch.observations.map(({ observation }) => observation),
        fullSet: batch.fullSet,
        leader: leader && { epoch: BigInt(leader.epoch), holderIdentity: leader.holderIdentity },
      },
      { signal, timeoutMs: this.#options.callTimeoutMs },
    );
    metrics.observationsSent.inc(batch.observations.length);
    for (const { key, observation, digest } of batch.observations) {
      // Once ctrl knows a key is gone for good, there is nothing more to say about it.
      this.#sent.set(key, observation.missing && !source.isKnown(key) ? undefined : digest);
    }
  }

  #requeue(batch: Batch): void {
    for (const { key } of batch.observations) {
      if (batch.fullSet) this.#fullSet?.add(key);
      else this.#dirty.add(key);
    }
  }
}

function isFenced(error: unknown): boolean {
  return error instanceof ConnectError && error.findDetails(ErrorInfoSchema).some((info) => info.reason === FENCED);
}

/** The first 8 bytes of SHA-1 as a one-byte string: compared only with the same key's last one, a false match has odds of 2^-64. */
function digestOf(observation: ResourceObservation): string {
  return createHash("sha1").update(toBinary(ResourceObservationSchema, observation)).digest().toString("latin1", 0, 8);
}

/** An observation to send; `digest` is that of its encoding without the timestamp (see #sent). */
interface Observed {
  key: string;
  observation: ResourceObservation;
  digest: string;
}

interface Batch {
  observations: Observed[];
  fullSet: boolean;
}
