// What a request may hold before it is decoded: how deep its messages and JSON nest
// (--max-nesting-depth) and how many elements a repeated field, a map or a JSON array or object
// has (--max-repeated-elements, counted across all parent messages of the field, so that
// nesting cannot multiply it). Decoding allocates an object per element and per level, many
// times the bytes they take on the wire (100,000 empty observations are 200 KB of protobuf and
// about 20 MB decoded), so both are checked on the bytes, allocating nothing, before the
// decoder runs. A violation is INVALID_ARGUMENT naming the field. Anything else malformed is
// left to the decoder, which reports it.
import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { invalidArgument } from "./errors.ts";

export interface ShapeLimits {
  maxDepth: number;
  maxElements: number;
}

export const DEFAULT_SHAPE_LIMITS: ShapeLimits = { maxDepth: 64, maxElements: 10_000 };

/** Throws INVALID_ARGUMENT naming the field if `bytes`, a binary `schema` message, nests or repeats past `limits`. */
export function checkBinaryShape(schema: DescMessage, bytes: Uint8Array, limits: ShapeLimits): void {
  new BinaryWalk(bytes, limits).message(schema, 0, bytes.length, "", 1);
}

/** Throws INVALID_ARGUMENT naming the field if JSON `bytes` nest or repeat past `limits`. */
export function checkJsonShape(bytes: Uint8Array, limits: ShapeLimits): void {
  const { maxDepth, maxElements } = limits;
  const counts = new Map<string, number>();
  // Per open container: its path, and whether it is an object (whose members are named by keys).
  const paths: string[] = [];
  const objects: boolean[] = [];
  const named = (path: string) => path || "(request)";
  /** One more member of the innermost container. */
  const countMember = () => {
    const path = paths.at(-1)!;
    const object = objects.at(-1)!;
    const key = object ? `${path}{}` : path;
    const n = (counts.get(key) ?? 0) + 1;
    if (n > maxElements) throw invalidArgument(named(path), `more than ${maxElements} ${object ? "members" : "elements"}`);
    counts.set(key, n);
  };
  let key = ""; // the last key read in the innermost object
  let expectKey = false;
  let memberNext = false; // after [ { or ,: the next token starts a member
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (isSpace(c)) continue;
    if (memberNext) {
      memberNext = false;
      if (c !== 0x5d /* ] */ && c !== 0x7d /* } */) countMember();
    }
    if (c === 0x22 /* " */) {
      const start = i + 1;
      for (i++; i < bytes.length && bytes[i] !== 0x22; i++) if (bytes[i] === 0x5c /* \ */) i++;
      if (expectKey) key = Buffer.from(bytes.buffer, bytes.byteOffset + start, Math.min(i - start, 64)).toString();
      expectKey = false;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      const parent = paths.at(-1);
      const path = parent === undefined ? "" : objects.at(-1) ? join(parent, key) : `${parent}[]`;
      if (paths.length >= maxDepth) throw invalidArgument(named(path), `nested deeper than ${maxDepth} levels`);
      paths.push(path);
      objects.push(c === 0x7b);
      expectKey = c === 0x7b;
      memberNext = true;
    } else if (c === 0x7d || c === 0x5d) {
      paths.pop();
      objects.pop();
      expectKey = false;
    } else if (c === 0x2c /* , */ && paths.length > 0) {
      expectKey = objects.at(-1)!;
      memberNext = true;
    }
  }
}

const join = (path: string, name: string) => (path ? `${path}.${name}` : name);
const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

const fieldsOf = new WeakMap<DescMessage, Map<number, DescField>>();
function fieldByNumber(schema: DescMessage, no: number): DescField | undefined {
  let fields = fieldsOf.get(schema);
  if (!fields) fieldsOf.set(schema, (fields = new Map(schema.fields.map((f) => [f.number, f]))));
  return fields.get(no);
}

/** Element sizes of packed repeated scalars that are not varints. */
const FIXED_SIZE: Partial<Record<ScalarType, number>> = {
  [ScalarType.FIXED32]: 4,
  [ScalarType.SFIXED32]: 4,
  [ScalarType.FLOAT]: 4,
  [ScalarType.FIXED64]: 8,
  [ScalarType.SFIXED64]: 8,
  [ScalarType.DOUBLE]: 8,
};

/** Ends the walk where the wire format is broken: the decoder reports that. */
class Malformed extends Error {}

class BinaryWalk {
  readonly #bytes: Uint8Array;
  readonly #limits: ShapeLimits;
  readonly #counts = new Map<string, number>();
  #pos = 0;

  constructor(bytes: Uint8Array, limits: ShapeLimits) {
    this.#bytes = bytes;
    this.#limits = limits;
  }

  message(schema: DescMessage, start: number, end: number, path: string, depth: number): void {
    try {
      this.#message(schema, start, end, path, depth);
    } catch (error) {
      if (!(error instanceof Malformed)) throw error;
    }
  }

  #message(schema: DescMessage, start: number, end: number, path: string, depth: number): void {
    if (depth > this.#limits.maxDepth) throw invalidArgument(path, `nested deeper than ${this.#limits.maxDepth} messages`);
    this.#pos = start;
    while (this.#pos < end) {
      const tag = this.#varint(end);
      const no = Math.floor(tag / 8);
      const wireType = tag % 8;
      const field = fieldByNumber(schema, no);
      const name = join(path, field?.name ?? `(field ${no})`);
      if (field?.fieldKind === "list" || field?.fieldKind === "map") this.#count(name, this.#elements(field, wireType, end));
      switch (wireType) {
        case 0:
          this.#varint(end);
          break;
        case 1:
          this.#skip(8, end);
          break;
        case 5:
          this.#skip(4, end);
          break;
        case 2: {
          const length = this.#varint(end);
          const from = this.#pos;
          this.#skip(length, end);
          const inner = field && nestedMessage(field);
          if (inner) this.#message(inner, from, from + length, name, depth + 1);
          else if (field?.fieldKind === "map" && field.mapKind === "message") this.#mapEntry(field.message, from, from + length, name, depth + 1);
          this.#pos = from + length;
          break;
        }
        case 3:
          this.#group(no, end, name, depth + 1);
          break;
        default:
          throw new Malformed();
      }
    }
  }

  /** How many elements one occurrence of a repeated field carries (a packed one, several). */
  #elements(field: DescField, wireType: number, end: number): number {
    if (field.fieldKind !== "list" || wireType !== 2 || field.listKind === "message") return 1;
    if (field.listKind === "scalar" && (field.scalar === ScalarType.STRING || field.scalar === ScalarType.BYTES)) return 1;
    const start = this.#pos;
    const length = this.#varint(end);
    const from = this.#pos;
    this.#pos = start;
    if (from + length > end) throw new Malformed();
    const size = field.listKind === "scalar" ? FIXED_SIZE[field.scalar] : undefined;
    if (size !== undefined) return Math.ceil(length / size);
    let varints = 0;
    for (let i = from; i < from + length; i++) if (this.#bytes[i]! < 0x80) varints++;
    return varints;
  }

  /** A map entry whose value (field 2) is a message. */
  #mapEntry(value: DescMessage, start: number, end: number, path: string, depth: number): void {
    this.#pos = start;
    while (this.#pos < end) {
      const tag = this.#varint(end);
      if (tag === 0x12) {
        const length = this.#varint(end);
        const from = this.#pos;
        this.#skip(length, end);
        this.#message(value, from, from + length, path, depth);
        this.#pos = from + length;
      } else if (tag % 8 === 0) this.#varint(end);
      else if (tag % 8 === 2) this.#skip(this.#varint(end), end);
      else throw new Malformed();
    }
  }

  /** Skips a group (no field of ours is one; an unknown one may nest). */
  #group(no: number, end: number, path: string, depth: number): void {
    if (depth > this.#limits.maxDepth) throw invalidArgument(path, `nested deeper than ${this.#limits.maxDepth} groups`);
    while (this.#pos < end) {
      const tag = this.#varint(end);
      const wireType = tag % 8;
      if (wireType === 4) {
        if (Math.floor(tag / 8) !== no) throw new Malformed();
        return;
      }
      if (wireType === 0) this.#varint(end);
      else if (wireType === 1) this.#skip(8, end);
      else if (wireType === 5) this.#skip(4, end);
      else if (wireType === 2) this.#skip(this.#varint(end), end);
      else if (wireType === 3) this.#group(Math.floor(tag / 8), end, path, depth + 1);
      else throw new Malformed();
    }
    throw new Malformed();
  }

  #count(name: string, n: number): void {
    const total = (this.#counts.get(name) ?? 0) + n;
    if (total > this.#limits.maxElements) throw invalidArgument(name, `more than ${this.#limits.maxElements} elements`);
    this.#counts.set(name, total);
  }

  #varint(end: number): number {
    let value = 0;
    for (let shift = 1; this.#pos < end && shift < 2 ** 70; shift *= 128) {
      const b = this.#bytes[this.#pos++]!;
      value += (b & 0x7f) * shift;
      if (b < 0x80) return value;
    }
    throw new Malformed();
  }

  #skip(n: number, end: number): void {
    if (n > end - this.#pos) throw new Malformed();
    this.#pos += n;
  }
}

/** The message type a length-delimited occurrence of `field` holds, if any. */
function nestedMessage(field: DescField): DescMessage | undefined {
  if (field.fieldKind === "message") return field.message;
  if (field.fieldKind === "list" && field.listKind === "message") return field.message;
  return undefined;
}
