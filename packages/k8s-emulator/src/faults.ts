// Fault injection for API requests: errors (random or deterministic), 429s
// with Retry-After, added latency, and watch disruption. Faults apply to
// resource requests only (not discovery, /version or /_emulator), so that a
// test's "fail the next get" hits the request it means.
import { ApiError } from "./errors.ts";
import type { WatchHub } from "./watch.ts";

export type Verb = "get" | "list" | "watch" | "create" | "apply" | "update" | "patch" | "delete";
export type VerbPattern = Verb | "*";

export const ALL_VERBS: readonly Verb[] = ["get", "list", "watch", "create", "apply", "update", "patch", "delete"];

export interface ErrorRateRule {
  verb: VerbPattern;
  rate: number;
  status: number;
}

export interface FailNextRule {
  verb: VerbPattern;
  count: number;
  status: number;
  retryAfterSeconds?: number;
}

/** Requests with `verb` wait until `released` resolves. */
interface Hold {
  verb: VerbPattern;
  released: Promise<void>;
}

export interface LatencyRule {
  verb: VerbPattern;
  ms: number;
  /** Only requests for this resource (plural, e.g. "deployments"); all when absent. */
  resource?: string;
}

/** The JSON shape served and accepted by /_emulator/faults. */
export interface FaultConfig {
  errorRates: ErrorRateRule[];
  failNext: FailNextRule[];
  latency: LatencyRule[];
  watchDropIntervalMs: number;
  suppressWatchEvents: boolean;
  openWatches?: number;
}

const MESSAGES: Record<number, string> = {
  429: "Too many requests, please try again later.",
  500: "Internal error occurred: injected fault",
  503: "the server is currently unable to handle the request",
  504: "the server was unable to return a response in the time allotted, but may still be processing the request",
};

function checkVerb(verb: string): VerbPattern {
  if (verb !== "*" && !ALL_VERBS.includes(verb as Verb)) throw new TypeError(`unknown verb ${JSON.stringify(verb)}`);
  return verb as VerbPattern;
}

function checkStatus(status: number): number {
  if (!Number.isInteger(status) || status < 400 || status > 599) throw new TypeError(`fault status must be 400..599, got ${status}`);
  return status;
}

export class FaultInjector {
  /** Random source for error rates; replace for deterministic runs. */
  random: () => number = Math.random;
  private readonly watches: WatchHub;
  private errorRates: ErrorRateRule[] = [];
  private failNextRules: FailNextRule[] = [];
  private latency: LatencyRule[] = [];
  private holds: { hold: Hold; release: () => void }[] = [];
  private dropIntervalMs = 0;

  constructor(watches: WatchHub) {
    this.watches = watches;
  }

  /** Fail `rate` (0..1) of the requests with this verb with `status`. */
  setErrorRate(verb: VerbPattern, rate: number, status = 500): void {
    checkVerb(verb);
    checkStatus(status);
    if (!(rate >= 0 && rate <= 1)) throw new TypeError(`error rate must be within 0..1, got ${rate}`);
    this.errorRates = this.errorRates.filter((r) => r.verb !== verb);
    if (rate > 0) this.errorRates.push({ verb, rate, status });
  }

  /** Fail the next `count` requests with this verb (deterministic). */
  failNext(verb: VerbPattern, count: number, status = 500, retryAfterSeconds?: number): void {
    checkVerb(verb);
    checkStatus(status);
    if (count > 0) this.failNextRules.push({ verb, count, status, ...(retryAfterSeconds !== undefined ? { retryAfterSeconds } : {}) });
  }

  /** Answer the next `count` requests with this verb with 429 and a Retry-After header. */
  tooManyRequests(verb: VerbPattern, count: number, retryAfterSeconds = 1): void {
    this.failNext(verb, count, 429, retryAfterSeconds);
  }

  /** Delay responses to requests with this verb (for `resource`, or any) by `ms` (0 removes the delay). */
  latencyMs(verb: VerbPattern, ms: number, resource?: string): void {
    checkVerb(verb);
    this.latency = this.latency.filter((l) => l.verb !== verb || l.resource !== resource);
    if (ms > 0) this.latency.push({ verb, ms, ...(resource === undefined ? {} : { resource }) });
  }

  /**
   * Keeps requests with this verb waiting, unanswered, until the returned release (or clear()) is
   * called: a test can observe the state before them however slowly it runs.
   */
  hold(verb: VerbPattern): () => void {
    checkVerb(verb);
    const { promise, resolve } = Promise.withResolvers<void>();
    const entry = {
      hold: { verb, released: promise },
      release: () => {
        this.holds = this.holds.filter((h) => h !== entry);
        resolve();
      },
    };
    this.holds.push(entry);
    return entry.release;
  }

  /** Resolves once no hold applies to requests with this verb. */
  async released(verb: Verb): Promise<void> {
    for (let h = this.holdFor(verb); h; h = this.holdFor(verb)) {
      this.#waiting++;
      try {
        await h.released;
      } finally {
        this.#waiting--;
      }
    }
  }

  /** Requests kept waiting by a hold now (their bodies read): a test knows one is in flight. */
  get held(): number {
    return this.#waiting;
  }

  #waiting = 0;

  private holdFor(verb: Verb): Hold | undefined {
    return this.holds.find(({ hold }) => hold.verb === verb || hold.verb === "*")?.hold;
  }

  /** Closes all open watch connections now; returns how many were closed. */
  dropWatches(): number {
    return this.watches.dropAll();
  }

  /** Closes all open watches every `ms` milliseconds (0 disables). */
  setWatchDropIntervalMs(ms: number): void {
    this.dropIntervalMs = Math.max(0, ms);
    this.watches.setDropInterval(this.dropIntervalMs);
  }

  /** Keep watches open but deliver no events on them. */
  suppressWatchEvents(on: boolean): void {
    this.watches.suppressed = on;
  }

  clear(): void {
    this.errorRates = [];
    this.failNextRules = [];
    this.latency = [];
    for (const { release } of this.holds) release();
    this.setWatchDropIntervalMs(0);
    this.suppressWatchEvents(false);
  }

  snapshot(): FaultConfig {
    return {
      errorRates: this.errorRates.map((r) => ({ ...r })),
      failNext: this.failNextRules.map((r) => ({ ...r })),
      latency: this.latency.map((l) => ({ ...l })),
      watchDropIntervalMs: this.dropIntervalMs,
      suppressWatchEvents: this.watches.suppressed,
      openWatches: this.watches.openCount,
    };
  }

  /**
   * Applies a (partial) FaultConfig, as sent to /_emulator/faults. Rules given
   * are added to the current ones (use `replace` or clear() to start over);
   * `dropWatches: true` closes the open watches.
   */
  configure(config: Partial<FaultConfig> & { dropWatches?: boolean }, replace: boolean): void {
    if (replace) this.clear();
    for (const r of config.errorRates ?? []) this.setErrorRate(r.verb, r.rate, r.status ?? 500);
    for (const r of config.failNext ?? []) this.failNext(r.verb, r.count, r.status ?? 500, r.retryAfterSeconds);
    for (const l of config.latency ?? []) this.latencyMs(l.verb, l.ms, l.resource);
    if (config.watchDropIntervalMs !== undefined) this.setWatchDropIntervalMs(config.watchDropIntervalMs);
    if (config.suppressWatchEvents !== undefined) this.suppressWatchEvents(config.suppressWatchEvents);
    if (config.dropWatches) this.dropWatches();
  }

  /** Added latency for a request with this verb for `resource`: the most specific rule's. */
  latencyFor(verb: Verb, resource: string): number {
    const rank = (l: LatencyRule) => (l.verb === verb ? 2 : 0) + (l.resource === resource ? 1 : 0);
    const matching = this.latency.filter((l) => (l.verb === verb || l.verb === "*") && (l.resource === undefined || l.resource === resource));
    return matching.sort((a, b) => rank(b) - rank(a))[0]?.ms ?? 0;
  }

  /** The injected failure for a request with this verb, if any (consumes failNext budget). */
  pick(verb: Verb): ApiError | undefined {
    const next = this.failNextRules.find((r) => r.verb === verb || r.verb === "*");
    if (next) {
      if (--next.count <= 0) this.failNextRules.splice(this.failNextRules.indexOf(next), 1);
      return faultError(next.status, next.retryAfterSeconds);
    }
    const rate = this.errorRates.find((r) => r.verb === verb) ?? this.errorRates.find((r) => r.verb === "*");
    if (rate && this.random() < rate.rate) return faultError(rate.status);
    return undefined;
  }
}

function faultError(status: number, retryAfterSeconds?: number): ApiError {
  const retry = retryAfterSeconds ?? (status === 429 ? 1 : undefined);
  return new ApiError(status, MESSAGES[status] ?? `injected fault (HTTP ${status})`, {
    ...(retry !== undefined ? { details: { retryAfterSeconds: retry }, headers: { "Retry-After": String(retry) } } : {}),
  });
}
