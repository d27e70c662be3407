// The agent's readiness: named conditions, each a check that says why it is not met. /readyz
// answers 200 when all are met, else 503 with the unmet ones; the flotilla_agent_ready metric
// shows each. A part that gates readiness adds one condition (one line), e.g. leader election
// would add none for standbys (they are ready to take over) but could add its own.

/** One condition as /readyz and the metric see it. */
export interface ReadinessCondition {
  readonly name: string;
  readonly met: boolean;
  /** Why it is not met ("" when met). */
  readonly reason: string;
}

export class Readiness {
  readonly #checks: { name: string; unmet: () => string | undefined }[] = [];

  /** Adds a condition: `unmet` returns why it is not met, or undefined when it is. */
  add(name: string, unmet: () => string | undefined): this {
    this.#checks.push({ name, unmet });
    return this;
  }

  conditions(): ReadinessCondition[] {
    return this.#checks.map(({ name, unmet }) => {
      const reason = unmet();
      return { name, met: reason === undefined, reason: reason ?? "" };
    });
  }

  /** The unmet conditions as `name: reason; …`, or undefined when ready. */
  notReady(): string | undefined {
    const unmet = this.conditions().filter((condition) => !condition.met);
    return unmet.length === 0 ? undefined : unmet.map(({ name, reason }) => `${name}: ${reason}`).join("; ");
  }
}
