// The work queue's dispatch: hands keys to a handler, at most `concurrency` at once. p-limit is
// the semaphore and the only bound.
//
// Invariants:
// * A key is taken from the queue only inside a free p-limit slot, so keys not yet taken stay in
//   the queue, where further adds of them are deduped.
// * At most `concurrency` handlers run at once; the queue guarantees never two of one key.
// * Every taken key is done() after its handler, whatever the outcome; a handler that throws is
//   reported to onHandlerError and its key retried with backoff (addRateLimited).
// * dispatch() resolves once the queue is shut down and the handlers in flight have finished.
// * The event loop turns at least every KEYS_PER_TURN keys handed out.
import pLimit from "p-limit";
import { AGENT_DEFAULTS } from "../config.ts";
import type { Queue } from "./key-queue.ts";

export interface DispatchOptions {
  /** Keys processed at once. Default: AGENT_DEFAULTS.concurrency (8). */
  concurrency?: number;
  /** Called when a handler threw (the key is then retried with backoff). */
  onHandlerError?: (key: string, error: unknown) => void;
}

/**
 * Keys handed out between two turns of the event loop. Handlers that finish without I/O (a
 * cache hit, a render) would otherwise chain in microtasks for as long as the queue has keys:
 * no timer, socket or report between them, and their garbage promoted for want of a turn
 * (seconds and over 100 MB at a restart of 100,000 resources).
 */
export const KEYS_PER_TURN = 64;

export async function dispatch(
  queue: Queue & { addRateLimited(key: string): number },
  handler: (key: string) => Promise<void>,
  options: DispatchOptions = {},
): Promise<void> {
  const concurrency = options.concurrency ?? AGENT_DEFAULTS.concurrency;
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);
  const onHandlerError = options.onHandlerError ?? (() => {});
  const limit = pLimit(concurrency);
  const inFlight = new Set<Promise<void>>();
  let handedOut = 0;
  /** The turn every slot waits for once KEYS_PER_TURN keys went out (one, shared). */
  let nextTurn: Promise<void> | undefined;
  /** One slot: takes a key once it runs (a slot is free), processes it. */
  const slot = async (started: () => void): Promise<void> => {
    started();
    const key = await queue.get();
    if (key === undefined) return; // shut down
    if (++handedOut % KEYS_PER_TURN === 0) nextTurn = new Promise<void>((resolve) => setImmediate(resolve)).then(() => (nextTurn = undefined));
    if (nextTurn !== undefined) await nextTurn;
    try {
      await handler(key);
    } catch (error) {
      onHandlerError(key, error);
      queue.addRateLimited(key);
    } finally {
      queue.done(key);
    }
  };
  while (!queue.shuttingDown) {
    // Queue the next slot and wait until p-limit starts it: then the next one may be queued.
    await new Promise<void>((started) => {
      const run = limit(() => slot(started)).finally(() => inFlight.delete(run));
      inFlight.add(run);
    });
  }
  await Promise.all(inFlight);
}
