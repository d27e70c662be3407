// One status feed per ctrl process follows the status events (store/status-events.ts) and
// hands each new batch to the open WatchStatus streams. Its query rate depends on the poll
// interval, never on how many streams are open.
//
// Event numbers come from an auto-increment column, allocated at insert and visible at
// commit: on MySQL a lower number can become visible after a higher one. The feed remembers
// the numbers it skipped and looks for them again until they are older than `gapTimeoutMs`
// (a transaction that rolled back leaves its number unused for good). Its cursor is the
// last number before the oldest open gap, so a stream resumed from it misses nothing.
import type { Logger } from "@flotilla/runtime";
import type { StatusEvent, StatusEvents } from "@flotilla/store";

export interface StatusFeedOptions {
  /** Bounds the latency of status changes written by other ctrl replicas. */
  intervalMs: number;
  /** How long a skipped event number is looked for again. */
  gapTimeoutMs: number;
}

export const DEFAULT_STATUS_FEED_OPTIONS: StatusFeedOptions = { intervalMs: 200, gapTimeoutMs: 10_000 };

/** Events read per query. */
const READ_LIMIT = 1000;
/** Open gaps remembered at most (the oldest are given up first). */
const MAX_GAPS = 10_000;

export type StatusListener = (events: StatusEvent[], cursor: number) => void;

export class StatusFeed {
  readonly #events: StatusEvents;
  readonly #options: StatusFeedOptions;
  readonly #log: Logger;
  readonly #listeners = new Set<StatusListener>();
  /** The highest event number seen; undefined until the first poll. */
  #position: number | undefined;
  /** Skipped numbers below #position → when first skipped. */
  readonly #gaps = new Map<number, number>();
  #running = false;
  #again = false;
  #wakeSleep: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  #started: Promise<void> | undefined;

  constructor(events: StatusEvents, options: StatusFeedOptions, log: Logger) {
    this.#events = events;
    this.#options = options;
    this.#log = log;
  }

  /** Starts polling; resolves once the feed knows where the events stand. */
  start(): Promise<void> {
    if (!this.#running) {
      this.#running = true;
      this.#started = this.#events.bounds().then(({ head }) => {
        this.#position ??= head;
      });
      this.#loop = this.#started.then(() => this.#run());
    }
    return this.#started!;
  }

  async stop(): Promise<void> {
    this.#running = false;
    this.#wakeSleep?.();
    await this.#loop?.catch(() => {});
  }

  /** Every event up to here has been handed to the listeners (resume position for a stream). */
  cursor(): number {
    let cursor = this.#position ?? 0;
    for (const gap of this.#gaps.keys()) cursor = Math.min(cursor, gap - 1);
    return cursor;
  }

  subscribe(listener: StatusListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Polls now: a write of this process just committed. */
  wake(): void {
    this.#again = true;
    this.#wakeSleep?.();
  }

  async #run(): Promise<void> {
    while (this.#running) {
      this.#again = false;
      try {
        await this.#pollOnce();
      } catch (error) {
        this.#log.error(`status feed: ${error instanceof Error ? error.message : String(error)}`);
      }
      if (this.#again || !this.#running) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.#options.intervalMs);
        this.#wakeSleep = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#wakeSleep = undefined;
    }
  }

  async #pollOnce(): Promise<void> {
    const now = Date.now();
    const found: StatusEvent[] = [];
    if (this.#gaps.size > 0) {
      for (const event of await this.#events.readSome([...this.#gaps.keys()])) {
        this.#gaps.delete(event.seq);
        found.push(event);
      }
      for (const [seq, since] of this.#gaps) if (now - since > this.#options.gapTimeoutMs) this.#gaps.delete(seq);
    }
    let position = this.#position ?? 0;
    for (;;) {
      const events = await this.#events.read(position, READ_LIMIT);
      for (const event of events) {
        for (let missing = position + 1; missing < event.seq && this.#gaps.size < MAX_GAPS; missing++) this.#gaps.set(missing, now);
        position = event.seq;
        found.push(event);
      }
      if (events.length < READ_LIMIT) break;
    }
    this.#position = position;
    if (found.length === 0) return;
    const cursor = this.cursor();
    for (const listener of this.#listeners) listener(found, cursor);
  }
}
