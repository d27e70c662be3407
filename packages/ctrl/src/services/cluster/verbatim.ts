// Sending stored protobuf bytes as they are. protobuf-es writes a message's unknown fields
// verbatim, and protobuf allows fields in any order, so a message whose repeated message
// field is carried as unknown fields of already-encoded bytes serializes to exactly the
// encoding of the decoded message, at the cost of a copy instead of an encode. For binary
// clients only: JSON has no unknown fields.
import type { Message } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
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
