// Bytes kept for long as one-byte strings. A small Uint8Array costs about 200 B of heap (its
// view and buffer objects) beyond its bytes; a one-byte string costs its length plus 16 B. The
// agent keeps one encoded message per resource (the desired table), which with 100,000
// resources is most of its memory.

/** `bytes` as a string of the same length, one character per byte (latin1). */
export function packBytes(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("latin1");
}

/** The bytes packBytes() packed. */
export function unpackBytes(packed: string): Uint8Array {
  return Buffer.from(packed, "latin1");
}
