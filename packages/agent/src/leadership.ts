// Who may apply, prune and report: without leader election this agent, always; with it, the
// holder of the region's Lease for as long as its renews keep within the renew deadline
// (leader-election.ts). Standbys keep their ctrl connection, desired table and observer up to
// date, so that taking over costs no more than re-queueing every key.
import { resolvedBeforeAbort } from "./backoff.ts";
import type { LeaderElector, LeaderElectorOptions } from "./leader-election.ts";
import { Listeners } from "./listeners.ts";
import type { AgentMetrics } from "./metrics.ts";
import { loop, type Runnable } from "./lifecycle.ts";

/** The leader a report is sent by, for ctrl's fencing. */
export interface ReportingLeader {
  epoch: number;
  holderIdentity: string;
}

type ElectorFactory = (callbacks: Pick<LeaderElectorOptions, "onStartedLeading" | "onStoppedLeading">) => LeaderElector;

/** A write refused because this agent no longer leads (its term ended, or its renew deadline passed). */
export class NotLeadingError extends Error {
  constructor() {
    super("not the leader: writes to the cluster are refused");
    this.name = "NotLeadingError";
  }
}

const NEVER = new AbortController().signal;

export class Leadership {
  readonly #elector: LeaderElector | undefined;
  /** Aborted when the current term ends; undefined before the first. */
  #term: AbortController | undefined;
  #nextTerm = Promise.withResolvers<void>();
  /** A term began (with its epoch): the keys and the prune a standby skipped are due. */
  readonly started = new Listeners<number>();

  /**
   * Without `newElector`, this agent always leads. With it, leads while the elector does;
   * `leaseName` labels the metrics (controller-runtime's `name`).
   */
  constructor(metrics: AgentMetrics, newElector?: ElectorFactory, leaseName = "") {
    if (!newElector) return;
    const status = metrics.leaderStatus.labels({ name: leaseName });
    status.set(0);
    // Exported from the start (client-go's convention): alerts on increase() see the first transition.
    for (const to of ["leader", "standby"]) metrics.leaderTransitions.inc({ name: leaseName, to }, 0);
    this.#elector = newElector({
      onStartedLeading: (epoch) => {
        this.#term = new AbortController();
        status.set(1);
        metrics.leaderTransitions.inc({ name: leaseName, to: "leader" });
        this.#nextTerm.resolve();
        this.#nextTerm = Promise.withResolvers();
        this.started.emit(epoch);
      },
      onStoppedLeading: () => {
        this.#term?.abort();
        status.set(0);
        metrics.leaderTransitions.inc({ name: leaseName, to: "standby" });
      },
    });
  }

  /**
   * KubeClient's write fence: throws NotLeadingError unless this agent leads now (on its own
   * clock: within the renew deadline of its last renew), else returns the term's signal, which
   * aborts the write when the term ends.
   */
  writeFence(): AbortSignal {
    if (!this.#elector) return NEVER;
    if (!this.isLeading() || !this.#term || this.#term.signal.aborted) throw new NotLeadingError();
    return this.#term.signal;
  }

  /** This agent may apply, prune and report now. */
  isLeading(): boolean {
    return this.#elector?.isLeading() ?? true;
  }

  /** The leader reports are sent as; undefined without leader election (or while not leading). */
  leader(): ReportingLeader | undefined {
    const epoch = this.#elector?.epoch;
    return epoch === undefined ? undefined : { epoch, holderIdentity: this.#elector!.identity };
  }

  /** Ends the current term at once (ctrl fenced this agent); the agent campaigns again. */
  stepDown(reason: string): void {
    this.#elector?.stepDown(reason);
  }

  /** The elector as a part of the agent (none without leader election). */
  parts(): Runnable[] {
    const elector = this.#elector;
    return elector ? [loop("leader election", (signal) => elector.run(signal))] : [];
  }

  /** Runs `run` for every term of leadership, with a signal that aborts when the term ends, until `signal` aborts. */
  async eachTerm(signal: AbortSignal, run: (term: AbortSignal) => Promise<void>): Promise<void> {
    if (!this.#elector) return run(signal);
    while (!signal.aborted) {
      if (!this.isLeading() || !this.#term || this.#term.signal.aborted) {
        // Not a listener per wait left on `signal`: terms come and go for as long as the agent runs.
        await resolvedBeforeAbort(this.#nextTerm.promise, signal);
        continue;
      }
      await run(AbortSignal.any([signal, this.#term.signal]));
    }
  }
}
