// Joins the reads that callers ask for in the same turn of the event loop into one. The
// status feed wakes every open WatchStatus stream in one turn, so the streams' reads of a
// batch's statuses become one query for all of them instead of one per stream.
//
// Invariants:
//   * A caller's result is read after it asked (the read starts in a later turn), so it is
//     never older than the event that made the caller ask.
//   * At most one read is waiting to start; the keys asked for meanwhile are added to it.
//   * A failed read fails every caller that joined it; the next ask starts a new read.

export class JoinedRead<K, V> {
  readonly #read: (keys: K[]) => Promise<Map<K, V>>;
  #waiting: { keys: Set<K>; result: Promise<Map<K, V>> } | undefined;

  /** `read` returns what it found of `keys` (a key it did not find is absent from the map). */
  constructor(read: (keys: K[]) => Promise<Map<K, V>>) {
    this.#read = read;
  }

  /** The values of `keys` (and of the other keys asked for in this turn), read after this call. */
  get(keys: Iterable<K>): Promise<Map<K, V>> {
    if (!this.#waiting) {
      const waiting = { keys: new Set<K>(), result: undefined as unknown as Promise<Map<K, V>> };
      waiting.result = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        this.#waiting = undefined;
        return this.#read([...waiting.keys]);
      });
      this.#waiting = waiting;
    }
    for (const key of keys) this.#waiting.keys.add(key);
    return this.#waiting.result;
  }
}
