// What a fan-out works out once per change and then asks for once per stream, one stream after
// another: a WeakMap (the value lives as long as its key) with the last key's value at hand, so
// the streams after the first cost a comparison, not a hash lookup each.
export class FanOutMemo<K extends object, V> {
  readonly #values = new WeakMap<K, V>();
  #last: { key: K; value: V } | undefined;

  /** `key`'s value, made by `make` the first time it is asked for (undefined: none, kept for no key). */
  get<M extends V | undefined>(key: K, make: (key: K) => M): V | M {
    if (this.#last?.key === key) return this.#last.value;
    let value = this.#values.get(key);
    if (value === undefined) {
      const made = make(key);
      if (made === undefined) return made;
      value = made as V;
      this.#values.set(key, value);
    }
    this.#last = { key, value };
    return value;
  }
}
