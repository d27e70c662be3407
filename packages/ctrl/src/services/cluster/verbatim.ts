// Sending stored protobuf bytes as they are. protobuf-es writes a message's unknown fields
// verbatim, and protobuf allows fields in any order, so a message whose repeated message
// field is carried as unknown fields of already-encoded bytes serializes to exactly the
// encoding of the decoded message, at the cost of a copy instead of an encode. For binary
// clients only: JSON has no unknown fields.
import { create, toBinary, type DescMessage, type Message, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import type { HandlerContext } from "@connectrpc/connect";

/** Whether the call's codec is binary (it writes unknown fields; JSON has none). */
export function sendsVerbatim(ctx: HandlerContext): boolean {
  return !(ctx.requestHeader.get("content-type") ?? "").includes("json");
}

/** `message` with repeated field `fieldNo` holding these length-delimited encodings, in order. */
export function withVerbatimField<T extends Message>(message: T, fieldNo: number, data: readonly Uint8Array[]): T {
  message.$unknown = data.map((d) => ({ no: fieldNo, wireType: WireType.LengthDelimited, data: d }));
  return message;
}

/** Messages of messageWithVerbatimChunks: their whole encoding, in chunks. */
const chunkedEncodings = new WeakMap<Message, readonly Uint8Array[]>();

/**
 * A message of `init` with field `fieldNo` holding this length-delimited encoding, given in
 * chunks. A writer that takes chunks (the direct gRPC path) sends them as they are, by
 * reference (`chunkedEncoding`); any other codec encodes the message whole, and the chunks are
 * joined once it asks for the field. Must not be changed afterwards.
 */
export function messageWithVerbatimChunks<Desc extends DescMessage>(
  schema: Desc,
  init: MessageInitShape<Desc>,
  fieldNo: number,
  chunks: readonly Uint8Array[],
): MessageShape<Desc> {
  const message = create(schema, init);
  chunkedEncodings.set(message, [toBinary(schema, message), new BinaryWriter().tag(fieldNo, WireType.LengthDelimited).finish(), ...chunks]);
  let unknown: Message["$unknown"];
  Object.defineProperty(message, "$unknown", {
    get: () => (unknown ??= [{ no: fieldNo, wireType: WireType.LengthDelimited, data: Buffer.concat(chunks) }]),
    enumerable: true,
  });
  return message;
}

/** The encoding of a message of messageWithVerbatimChunks, in chunks (undefined for any other). */
export function chunkedEncoding(message: Message): readonly Uint8Array[] | undefined {
  return chunkedEncodings.get(message);
}
