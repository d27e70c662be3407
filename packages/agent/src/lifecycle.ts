// Start in order, stop in reverse (controller-runtime's manager): a part starts only after every
// part it depends on has started, and stops before them.

/** A part of the agent that runs until stopped. */
export interface Runnable {
  readonly name: string;
  /** Starts the part; resolves once it runs (not when it ends). */
  start(): Promise<void> | void;
  /** Stops the part; resolves once it has stopped and released what it held. */
  stop(): Promise<void> | void;
}

/**
 * Starts `parts` one after the other, in order. If one fails to start, the parts already
 * started are stopped (in reverse) and the error is rethrown. Returns the stop of them all, in
 * reverse order; calling it again returns the same promise.
 */
export async function startInOrder(parts: readonly Runnable[]): Promise<() => Promise<void>> {
  const started: Runnable[] = [];
  const stopAll = async () => {
    for (const part of started.reverse()) await part.stop();
  };
  try {
    for (const part of parts) {
      await part.start();
      started.push(part);
    }
  } catch (error) {
    await stopAll();
    throw error;
  }
  let stopping: Promise<void> | undefined;
  return () => (stopping ??= stopAll());
}

/** A Runnable around a loop that runs until its signal aborts (stop() aborts it and waits). */
export function loop(name: string, run: (signal: AbortSignal) => Promise<void>): Runnable {
  const stopping = new AbortController();
  let running: Promise<void> | undefined;
  return {
    name,
    start() {
      running = run(stopping.signal);
    },
    async stop() {
      stopping.abort();
      await running;
    },
  };
}
