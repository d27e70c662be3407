// A string per resource key, kept for one part of the agent: the observer's cached records, the
// reporter's digest of the last observation sent. The desired table offers one of these per part
// (DesiredTable.attachment()) that keeps the strings in the keys' entries, so that a resource is
// one record rather than an entry in three maps (docs/benchmarks.md, finding 9).

/** Strings by resource key. */
export interface KeyedStrings {
  get(key: string): string | undefined;
  /** Sets the key's string, or removes it (undefined). */
  set(key: string, value: string | undefined): void;
  /** Each key that has a string, with its string. */
  entries(): IterableIterator<[string, string]>;
}

/** KeyedStrings in a map of their own. */
export function keyedStrings(): KeyedStrings {
  const strings = new Map<string, string>();
  return {
    get: (key) => strings.get(key),
    set(key, value) {
      if (value === undefined) strings.delete(key);
      else strings.set(key, value);
    },
    entries: () => strings.entries(),
  };
}
