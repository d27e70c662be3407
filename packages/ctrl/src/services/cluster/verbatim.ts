// Sending stored protobuf bytes as they are. protobuf-es writes a message's unknown fields
// verbatim, and protobuf allows fields in any order, so a message whose repeated message
// field is carried as unknown fields of already-encoded bytes serializes to exactly the
// encoding of the decoded message, at the cost of a copy instead of an encode. For binary
// clients only: JSON has no unknown fields.
import type { Message } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/** Length-delimited field data (length prefix + bytes) of one encoded message. */
export function lengthDelimited(...parts: Uint8Array[]): Uint8Array {
  const length = parts.reduce((n, part) => n + part.length, 0);
  const writer = new BinaryWriter().uint32(length);
  for (const part of parts) writer.raw(part);
  return writer.finish();
}

/** `message` with repeated field `fieldNo` holding these length-delimited encodings, in order. */
export function withVerbatimField<T extends Message>(message: T, fieldNo: number, data: readonly Uint8Array[]): T {
  message.$unknown = data.map((d) => ({ no: fieldNo, wireType: WireType.LengthDelimited, data: d }));
  return message;
}
