// A Map bounded to a number of entries that forgets the least recently used first, with an
// expiry per entry. Map iteration order is insertion order, so re-inserting on a hit keeps
// the least recently used entry first.
export class LruCache<K, V> {
  readonly #entries = new Map<K, { value: V; expires: number }>();
  readonly #maxEntries: number;

  constructor(maxEntries: number) {
    if (!(maxEntries >= 1)) throw new Error(`cache size must be at least 1, got ${maxEntries}`);
    this.#maxEntries = maxEntries;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The entry, unless absent or expired (an expired entry is dropped). */
  get(key: K, now = Date.now()): { value: V } | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    this.#entries.delete(key);
    if (entry.expires <= now) return undefined;
    this.#entries.set(key, entry);
    return entry;
  }

  set(key: K, value: V, expires: number): void {
    this.#entries.delete(key);
    this.#entries.set(key, { value, expires });
    if (this.#entries.size > this.#maxEntries) this.#entries.delete(this.#entries.keys().next().value as K);
  }
}
