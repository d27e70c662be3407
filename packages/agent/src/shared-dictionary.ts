// Strings the agent keeps per resource, packed against a dictionary of earlier ones (the idea of
// zstd's and deflate's preset dictionaries, for records too short to compress on their own).
// The desired encodings of a region's resources, and the records the observer keeps of their
// objects, repeat most of their bytes from one resource to the next: field tags, namespaces,
// image registries, environment variable names, labels, condition reasons. A packed string
// replaces each run of at least MIN_COPY characters found in the dictionary by a three-character
// reference to it (docs/benchmarks.md, finding 9).
//
// * The dictionary is the first strings packed, appended whole until it holds `capacity`
//   characters, and never changes after that: a packed string stays readable for the life of
//   the process, and strings packed before the dictionary filled only refer to its beginning.
// * Packing is greedy (the longest copy at each position, found through an index of every
//   MIN_COPY characters of the dictionary); unpacking is copying. Both take a few microseconds
//   for the agent's ~150-character strings, where Node's zlib took 30–50 µs per call.
// * Any string packs, including characters above 255 (copied as they are); a string of
//   characters up to 255 (the agent's: latin1-packed bytes and records) packs into one too, so
//   V8 keeps it at a byte per character.
// * A string with nothing in common with the dictionary grows by one character per 128.

/** A packed string is tokens: a literal run (its length − 1, below LITERAL_LIMIT, then the characters) or a copy (below). */
const LITERAL_LIMIT = 0x80;
/** A copy: COPY_BASE + (length − MIN_COPY), then the dictionary offset as two characters (high, low byte). */
const COPY_BASE = 0x80;
/** The shortest copy worth a reference: a copy token is three characters. */
const MIN_COPY = 4;
const MAX_COPY = MIN_COPY + 0x7f;
/** Offsets are two bytes. */
const MAX_CAPACITY = 0x10000;
/** Candidates tried per position: the first ones indexed (the dictionary's earliest strings). */
const MAX_CANDIDATES = 4;

export class SharedDictionary {
  readonly #capacity: number;
  #dictionary = "";
  /** Positions in the dictionary by the hash of the MIN_COPY characters there (at most MAX_CANDIDATES each). */
  readonly #index = new Map<number, number[]>();

  /** A dictionary of at most `capacity` characters (default 16,384; at most 65,536). */
  constructor(capacity = 16_384) {
    if (!Number.isInteger(capacity) || capacity < 0 || capacity > MAX_CAPACITY) throw new RangeError(`a dictionary holds 0 to ${MAX_CAPACITY} characters`);
    this.#capacity = capacity;
  }

  /** Characters in the dictionary so far. */
  get size(): number {
    return this.#dictionary.length;
  }

  /** `value` packed (unpack() returns it). Adds `value` to the dictionary while it has room. */
  pack(value: string): string {
    const dictionary = this.#dictionary;
    const tokens: string[] = [];
    let literalFrom = 0;
    let at = 0;
    while (at + MIN_COPY <= value.length) {
      const [offset, length] = this.#longestCopy(value, at);
      if (length < MIN_COPY) {
        at++;
        continue;
      }
      pushLiteral(tokens, value, literalFrom, at);
      tokens.push(String.fromCharCode(COPY_BASE + length - MIN_COPY, offset >> 8, offset & 0xff));
      at += length;
      literalFrom = at;
    }
    pushLiteral(tokens, value, literalFrom, value.length);
    if (dictionary.length + value.length <= this.#capacity) this.#append(value);
    return tokens.join("");
  }

  /** The string `packed` was packed from (by this dictionary). */
  unpack(packed: string): string {
    const parts: string[] = [];
    let at = 0;
    while (at < packed.length) {
      const token = packed.charCodeAt(at);
      if (token < LITERAL_LIMIT) {
        parts.push(packed.slice(at + 1, at + 2 + token));
        at += 2 + token;
      } else {
        const offset = (packed.charCodeAt(at + 1) << 8) | packed.charCodeAt(at + 2);
        parts.push(this.#dictionary.slice(offset, offset + token - COPY_BASE + MIN_COPY));
        at += 3;
      }
    }
    return parts.join("");
  }

  /** [offset, length] of the longest copy of value[at…] in the dictionary (length 0: none). */
  #longestCopy(value: string, at: number): [number, number] {
    const candidates = this.#index.get(hashAt(value, at));
    let best: [number, number] = [0, 0];
    if (!candidates) return best;
    const dictionary = this.#dictionary;
    const limit = Math.min(MAX_COPY, value.length - at);
    for (const offset of candidates) {
      // A candidate that differs at the best length so far cannot be longer.
      if (best[1] > 0 && dictionary.charCodeAt(offset + best[1]) !== value.charCodeAt(at + best[1])) continue;
      // From the first character: different strings can share a hash.
      let length = 0;
      const room = Math.min(limit, dictionary.length - offset);
      while (length < room && dictionary.charCodeAt(offset + length) === value.charCodeAt(at + length)) length++;
      if (length >= MIN_COPY && length > best[1]) best = [offset, length];
      if (length === limit) break;
    }
    return best;
  }

  #append(value: string): void {
    const start = this.#dictionary.length;
    // join() keeps the dictionary one flat string (`+` would make a rope of every sample).
    this.#dictionary = [this.#dictionary, value].join("");
    for (let at = Math.max(0, start - MIN_COPY + 1); at + MIN_COPY <= this.#dictionary.length; at++) {
      const key = hashAt(this.#dictionary, at);
      const positions = this.#index.get(key);
      if (!positions) this.#index.set(key, [at]);
      else if (positions.length < MAX_CANDIDATES) positions.push(at);
    }
  }
}

/** A hash of value[at…at + MIN_COPY): a small integer, so looking a position up allocates nothing. */
function hashAt(value: string, at: number): number {
  let hash = 0;
  for (let i = at; i < at + MIN_COPY; i++) hash = (Math.imul(hash, 31) + value.charCodeAt(i)) & 0x3fffffff;
  return hash;
}

/** Appends value[from…to) as literal runs of at most LITERAL_LIMIT characters. */
function pushLiteral(tokens: string[], value: string, from: number, to: number): void {
  for (let at = from; at < to; at += LITERAL_LIMIT) {
    const end = Math.min(to, at + LITERAL_LIMIT);
    tokens.push(String.fromCharCode(end - at - 1), value.slice(at, end));
  }
}
