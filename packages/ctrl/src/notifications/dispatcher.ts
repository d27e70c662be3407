// Delivery of notifications (docs/guides/notifications.md; ARCHITECTURE §4). Every ctrl
// replica runs a dispatcher; they share the work through the database.
//
// A delivery (one event to one notifier, a row of notification_deliveries):
//
//   PENDING (generation g, next_attempt_at t)
//     ── claim: t ≤ now, CAS on g ─────────▶ PENDING (g+1, t := now + claim)  [being attempted]
//   PENDING (g+1) being attempted
//     ── 2xx ─────────────────────────────▶ DELIVERED (g+2)
//     ── failure, attempts+1 < max ───────▶ PENDING (g+2, t := now + backoff, ≥ Retry-After)
//     ── failure, attempts+1 = max ───────▶ DEAD (g+2)                        [dead-lettered]
//     ── the claimer dies (kill -9) ──────▶ stays PENDING (g+1): due again at its claim's end
//
// Invariants:
//   * A delivery is written with its event in the transaction of the transition that caused
//     it (store/notifications.ts): a committed transition owes every delivery, a rolled-back one
//     none. Nothing in memory is the only record of a delivery.
//   * Claims and outcomes are compare-and-sets on (id, generation): two replicas never claim the
//     same generation, and an outcome written by a claimer whose claim expired and was taken
//     over is dropped. So a delivery is sent twice only when a claim outlives its attempt (a
//     claim lasts the attempt's timeout plus a margin) — after a crash, or a database slower
//     than that margin: at least once, with the same webhook-id, which receivers dedupe on.
//   * Bounded: at most `concurrency` attempts in flight per replica and `perNotifierConcurrency`
//     per notifier, each attempt at most `timeoutMs`. A notifier whose receiver is slow or dead
//     holds its own slots only; the claim query skips notifiers at their limit, so others'
//     deliveries are claimed and sent meanwhile.
//   * Retries back off exponentially from `backoffMinMs` to `backoffMaxMs` with jitter (each
//     delay drawn from [½, 1] of its step), never sooner than the receiver's Retry-After (429,
//     503), at most `maxAttempts` attempts in all; then DEAD, kept for operators to see.
//   * The signing secret is read for the attempt and is never logged; nor is the URL.
//
// The dispatcher also notices lost agents: a region whose agent has not reported for
// `agentLostAfterMs` gets one agent.lost event per silence (a compare-and-set on its agent
// row, store/notifications.ts recordLostAgents), whichever replica notices it first.
import type { Logger } from "@flotilla/runtime";
import type { ClaimedDelivery, DeliveryOutcome, Store } from "@flotilla/store";
import type { AddressPolicy } from "./address.ts";
import { attempt } from "./attempt.ts";
import { body, signedHeaders } from "./payload.ts";

export interface DispatcherOptions extends AddressPolicy {
  /** One attempt's deadline (connect, send, answer). */
  timeoutMs: number;
  /** Attempts in all before a delivery is DEAD. */
  maxAttempts: number;
  /** Deliveries claimed per database round, at most. */
  batchSize: number;
  /** Attempts in flight in this replica, at most. */
  concurrency: number;
  /** Attempts in flight to one notifier in this replica, at most. */
  perNotifierConcurrency: number;
  backoffMinMs: number;
  backoffMaxMs: number;
  /** How often the database is asked for due deliveries when nothing wakes the dispatcher. */
  pollIntervalMs: number;
  /** An agent silent this long is lost (ctrl's --status-stale-after); 0: never looked for. */
  agentLostAfterMs: number;
}

export const DEFAULT_DISPATCHER_OPTIONS: DispatcherOptions = {
  timeoutMs: 10_000,
  maxAttempts: 12,
  batchSize: 100,
  concurrency: 32,
  perNotifierConcurrency: 4,
  backoffMinMs: 1_000,
  backoffMaxMs: 10 * 60_000,
  pollIntervalMs: 1_000,
  agentLostAfterMs: 30_000,
  allowPrivate: false,
};

/** How long past an attempt's timeout its claim holds: the time to write its outcome. */
export const CLAIM_MARGIN_MS = 5_000;
/** A Retry-After longer than this is read as this. */
export const MAX_RETRY_AFTER_MS = 60 * 60_000;

/** The delay before attempt `attempts + 1` (attempts ≥ 1 made): exponential, capped, jittered, ≥ Retry-After. */
export function retryDelay(
  options: Pick<DispatcherOptions, "backoffMinMs" | "backoffMaxMs">,
  attempts: number,
  retryAfterMs?: number,
  random = Math.random,
): number {
  const step = Math.min(options.backoffMaxMs, options.backoffMinMs * 2 ** Math.min(attempts - 1, 40));
  const jittered = Math.round(step * (0.5 + random() * 0.5));
  return Math.max(jittered, Math.min(retryAfterMs ?? 0, MAX_RETRY_AFTER_MS));
}

export interface DispatcherMetrics {
  delivered(notifier: string, outcome: DeliveryOutcome["kind"]): void;
  inFlight(n: number): void;
}

export class NotificationDispatcher {
  readonly #store: Store;
  readonly #options: DispatcherOptions;
  readonly #log: Logger;
  readonly #metrics: DispatcherMetrics | undefined;
  /** Attempts in flight, by notifier. */
  readonly #busy = new Map<string, number>();
  readonly #running = new Set<Promise<void>>();
  #inFlight = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopped = true;
  #round: Promise<void> | undefined;
  #again = false;
  #lastLostCheck = 0;

  constructor(store: Store, options: Partial<DispatcherOptions>, log: Logger, metrics?: DispatcherMetrics) {
    this.#store = store;
    this.#options = { ...DEFAULT_DISPATCHER_OPTIONS, ...options };
    this.#log = log;
    this.#metrics = metrics;
  }

  get options(): Readonly<DispatcherOptions> {
    return this.#options;
  }

  start(): void {
    this.#stopped = false;
    this.#schedule(0);
  }

  /** Looks for due deliveries now (a local commit may have written some). */
  wake(): void {
    if (this.#stopped) return;
    if (this.#round !== undefined) {
      this.#again = true;
      return;
    }
    this.#schedule(0);
  }

  /** Stops claiming and waits for the attempts in flight (their outcomes are written). */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#round;
    await Promise.all(this.#running);
  }

  #schedule(ms: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#round = this.#claimRound().finally(() => {
        this.#round = undefined;
        if (this.#stopped) return;
        const again = this.#again;
        this.#again = false;
        this.#schedule(again ? 0 : this.#options.pollIntervalMs);
      });
    }, ms);
    this.#timer.unref();
  }

  async #claimRound(): Promise<void> {
    const now = Date.now();
    try {
      if (this.#options.agentLostAfterMs > 0 && now - this.#lastLostCheck >= Math.min(this.#options.agentLostAfterMs / 2, 5_000)) {
        this.#lastLostCheck = now;
        if ((await this.#store.notifications.recordLostAgents(now - this.#options.agentLostAfterMs, now)) > 0) this.#again = true;
      }
      const free = Math.min(this.#options.batchSize, this.#options.concurrency - this.#inFlight);
      if (free <= 0) return;
      const claimMs = this.#options.timeoutMs + CLAIM_MARGIN_MS;
      const claimed = await this.#store.notifications.claim(free, this.#options.perNotifierConcurrency, this.#busy, claimMs, now);
      for (const delivery of claimed) this.#launch(delivery);
      // A full batch: more may be due.
      if (claimed.length === free && this.#inFlight < this.#options.concurrency) this.#again = true;
    } catch (error) {
      this.#log.error(`notifications: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  #launch(delivery: ClaimedDelivery): void {
    const name = delivery.notifier.name;
    this.#busy.set(name, (this.#busy.get(name) ?? 0) + 1);
    this.#inFlight++;
    this.#metrics?.inFlight(this.#inFlight);
    const run = this.#send(delivery)
      .catch((error) => this.#log.error(`notifier ${name}: delivery ${delivery.id}: ${error instanceof Error ? error.message : String(error)}`))
      .finally(() => {
        const n = (this.#busy.get(name) ?? 1) - 1;
        if (n <= 0) this.#busy.delete(name);
        else this.#busy.set(name, n);
        this.#inFlight--;
        this.#metrics?.inFlight(this.#inFlight);
        this.#running.delete(run);
        this.wake();
      });
    this.#running.add(run);
  }

  async #send(delivery: ClaimedDelivery): Promise<void> {
    const payload = body(delivery.notifier.format, delivery);
    const headers = signedHeaders(delivery.secret, delivery.eventId, payload, new Date());
    const result = await attempt(delivery.notifier.url, headers, payload, this.#options.timeoutMs, this.#options);
    const now = Date.now();
    const attempts = delivery.attempts + 1;
    let outcome: DeliveryOutcome;
    if (result.error === undefined) outcome = { kind: "delivered", status: result.status };
    else if (attempts >= this.#options.maxAttempts)
      outcome = { kind: "dead", status: result.status, error: `${result.error} (attempt ${attempts} of ${this.#options.maxAttempts}: dead-lettered)` };
    else outcome = { kind: "retry", status: result.status, error: result.error, at: now + retryDelay(this.#options, attempts, result.retryAfterMs) };
    const written = await this.#store.notifications.complete(delivery.id, delivery.generation, outcome, now);
    this.#metrics?.delivered(delivery.notifier.name, outcome.kind);
    const where = `notifier ${delivery.notifier.name}: delivery ${delivery.id} (${delivery.eventId}) attempt ${attempts}`;
    if (!written) this.#log.warn(`${where}: its claim was taken over meanwhile; outcome dropped`);
    else if (outcome.kind === "dead") this.#log.warn(`${where}: ${outcome.error}`);
    else if (outcome.kind === "retry") this.#log.info(`${where}: ${outcome.error}; next attempt in ${outcome.at - now} ms`);
  }
}
