// Protobuf varints for the places that read or write wire bytes by hand (a snapshot batch
// around its stored bodies, a seal put back into a stored body, packed secret values): no
// reader or writer object, no allocation.

/** Encoded size of a varint; `value` must be a non-negative safe integer (lengths, versions). */
export function varintSize(value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`cannot encode ${value} as a varint`);
  let size = 1;
  for (; value >= 128; size++) value = Math.floor(value / 128);
  return size;
}

/** Writes `value` (checked by `varintSize`) at `pos`; returns the position after it. */
export function writeVarint(out: Uint8Array, pos: number, value: number): number {
  for (; value >= 128; value = Math.floor(value / 128)) out[pos++] = (value % 128) | 0x80;
  out[pos++] = value;
  return pos;
}

/** The varint at `pos` (before `to`) and the position after it; undefined if it does not end in time. */
export function readVarint(bytes: Uint8Array, pos: number, to: number): { value: number; next: number } | undefined {
  let value = 0;
  for (let scale = 1; pos < to && scale < 2 ** 56; scale *= 128) {
    const byte = bytes[pos++]!;
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return { value, next: pos };
  }
  return undefined;
}
