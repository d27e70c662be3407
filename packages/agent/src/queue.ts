// The agent's work queue: the layers of queue/ stacked as client-go stacks its workqueue
// (NewRateLimitingQueue over a delaying queue over the base queue), with the burst layer in
// between. Each layer states its invariants at the top of its file:
//
//   RateLimitingQueue (queue/rate-limiting-queue.ts): addAfter, addRateLimited, forget, Retry-After
//   SettlingQueue     (queue/settling-queue.ts):      a key in a burst of changes settles first
//   KeyQueue          (queue/key-queue.ts):           dedupe, one worker per key, dirty → one more run
//
// dispatch() (queue/dispatch.ts) runs a handler over it with p-limit as the only bound.
import { KeyQueue, type KeyQueueOptions } from "./queue/key-queue.ts";
import { RateLimitingQueue, type RateLimitingOptions } from "./queue/rate-limiting-queue.ts";
import { SettlingQueue, type SettlingOptions } from "./queue/settling-queue.ts";

export type WorkQueueOptions = RateLimitingOptions & SettlingOptions & KeyQueueOptions;

export class WorkQueue extends RateLimitingQueue {
  constructor(options: WorkQueueOptions = {}) {
    super(new SettlingQueue(new KeyQueue(options), options), options);
  }
}
