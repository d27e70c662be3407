// Protobuf varints for the places that write wire bytes by hand (a snapshot batch around its
// stored bodies, a seal put back into a stored body): no writer object, no allocation.

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
