// Reading a request's message before it is decoded, on both server paths (connect's and the
// direct gRPC one): its RPC's size limit (message-limits.ts), a reservation in the process-wide
// decode budget (decode-budget.ts) held until the message is decoded, decompression, and the
// shape check (request-shape.ts). Connect then decodes what this hands it, uncompressed; a body
// that is not one well-formed message is handed over as it came, for connect to report.
import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { compressedFlag, compressionNegotiate, encodeEnvelope, type Compression } from "@connectrpc/connect/protocol";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import { DEFAULT_DECODE_BUDGET_BYTES, DEFAULT_DECODE_MEMORY_HEADROOM_BYTES, DEFAULT_DECODE_WAIT_MS, DecodeBudget } from "./decode-budget.ts";
import { memoryPressure, type MemoryRelease } from "./memory-release.ts";
import { DEFAULT_MESSAGE_LIMITS, messageLimit, type MessageLimits } from "./message-limits.ts";
import { DEFAULT_COLLECT_AFTER_REQUEST_BYTES, RequestGarbage } from "./request-garbage.ts";
import { checkBinaryShape, checkJsonShape, DEFAULT_SHAPE_LIMITS, type ShapeLimits } from "./request-shape.ts";

/** What a request may cost before it is decoded. */
export interface RequestBounds {
  messages: MessageLimits;
  shape: ShapeLimits;
  budget: DecodeBudget;
  garbage: RequestGarbage;
}

/** The bounds as ctrl's options give them (each a flag). */
export interface DecodeOptions extends MessageLimits, ShapeLimits {
  /** Bytes of requests read and decoded at once, process-wide. */
  budgetBytes: number;
  /** How long a request waits for its share of the budget before RESOURCE_EXHAUSTED. */
  waitMs: number;
  /** Bytes of request buffers freed after which V8 is asked for a full GC (request-garbage.ts); 0: never. */
  collectAfterBytes: number;
  /** RSS above what memory releases left beyond which large requests wait (decode-budget.ts); 0: they never do. */
  memoryHeadroomBytes: number;
}

export const DEFAULT_DECODE_OPTIONS: DecodeOptions = {
  ...DEFAULT_MESSAGE_LIMITS,
  ...DEFAULT_SHAPE_LIMITS,
  budgetBytes: DEFAULT_DECODE_BUDGET_BYTES,
  waitMs: DEFAULT_DECODE_WAIT_MS,
  collectAfterBytes: DEFAULT_COLLECT_AFTER_REQUEST_BYTES,
  memoryHeadroomBytes: DEFAULT_DECODE_MEMORY_HEADROOM_BYTES,
};

/** `onRefused` counts requests refused for want of budget; large ones wait while RSS is past the headroom above what `memory` released to. */
export function requestBounds(options: DecodeOptions, onRefused: () => void, memory?: MemoryRelease): RequestBounds {
  const { readMaxBytes, writeMaxBytes, queryMaxBytes, maxDepth, maxElements, budgetBytes, waitMs, collectAfterBytes, memoryHeadroomBytes } = options;
  return {
    messages: { readMaxBytes, writeMaxBytes, queryMaxBytes },
    shape: { maxDepth, maxElements },
    budget: new DecodeBudget(budgetBytes, waitMs, onRefused, memory && memoryPressure(memory, memoryHeadroomBytes)),
    garbage: new RequestGarbage(collectAfterBytes),
  };
}

export interface RequestBody {
  method: DescMethod;
  /** Length-prefixed messages (gRPC, gRPC-Web, Connect streaming), or the whole body (Connect unary). */
  enveloped: boolean;
  json: boolean;
  /** The encoding its header names (for enveloped bodies: of messages with the compressed flag). */
  compression: Compression | undefined;
  /** Its content-length, if declared. */
  declaredLength: number | undefined;
  signal: AbortSignal;
}

export interface ReadBody {
  /** The message, decompressed and checked; undefined if the body is not exactly one well-formed message. */
  message: Uint8Array | undefined;
  /** The body as it came. */
  raw: Uint8Array;
  /** Gives back the body's share of the decode budget: once the message is decoded. */
  release(): void;
  /**
   * Buffers this read allocated (the body joined from its chunks, the inflated message), which
   * nothing else holds: a caller may free them (RequestGarbage) once nothing decoded from them
   * views them any more (connect decodes a copy; fromBinary's bytes fields are views).
   */
  allocated: Uint8Array[];
}

const ENVELOPE = 5;

/** How ctrl decodes binary requests: unknown fields are skipped, not kept (ctrl never sends a request on). */
export const DECODE_OPTIONS = { readUnknownFields: false } as const;

/** Reads `source`, the body of `request`, within `bounds`; rejects with RESOURCE_EXHAUSTED or INVALID_ARGUMENT. */
export async function readRequestBody(source: AsyncIterable<Uint8Array>, request: RequestBody, bounds: RequestBounds): Promise<ReadBody> {
  const { method, enveloped } = request;
  const maxBytes = messageLimit(method, bounds.messages);
  const frame = enveloped ? ENVELOPE : 0;
  const tooLarge = (size: number) =>
    new ConnectError(`message size ${size} is larger than ${maxBytes}, the limit of ${method.parent.typeName}/${method.name}`, Code.ResourceExhausted);
  if (request.declaredLength !== undefined && request.declaredLength > maxBytes + frame) throw tooLarge(request.declaredLength - frame);
  const chunks: Uint8Array[] = [];
  const allocated: Uint8Array[] = [];
  let length = 0;
  let release: (() => void) | undefined;
  // Not for-await: its return() on an error would wait for a body the client cannot send (its
  // window is full); what is left is read and dropped instead (drain()).
  const iterator = source[Symbol.asyncIterator]();
  let ended = false;
  try {
    for (let next = await iterator.next(); !(ended = next.done === true); next = await iterator.next()) {
      const chunk = next.value;
      chunks.push(chunk);
      length += chunk.byteLength;
      if (release === undefined && (!enveloped || length >= ENVELOPE)) {
        // What the body declares (compressed, it may inflate up to the limit), else the limit.
        const head = enveloped ? concat(chunks, length, allocated) : undefined;
        const declared = head && !(head[0]! & compressedFlag) ? new DataView(head.buffer, head.byteOffset).getUint32(1) : undefined;
        if (declared !== undefined && declared > maxBytes) throw tooLarge(declared);
        const unpacked = request.compression === undefined && !enveloped ? request.declaredLength : undefined;
        release = await bounds.budget.reserve(Math.min(maxBytes, declared ?? unpacked ?? maxBytes) + frame, request.signal);
      }
      if (length > maxBytes + frame) throw tooLarge(length - frame);
    }
    release ??= () => {};
    const raw = concat(chunks, length, allocated);
    let message = enveloped ? singleMessage(raw) : raw;
    if (message !== undefined && (enveloped ? raw[0]! & compressedFlag : request.compression)) {
      message = request.compression ? await request.compression.decompress(message, maxBytes) : undefined;
      if (message !== undefined) allocated.push(message);
    }
    if (message !== undefined) {
      if (request.json) checkJsonShape(message, bounds.shape);
      else checkBinaryShape(method.input, message, bounds.shape);
    }
    return { message, raw, release, allocated };
  } catch (error) {
    release?.();
    if (!ended) void drain(iterator, bounds.messages.readMaxBytes);
    throw error;
  }
}

/**
 * Reads and drops the rest of a refused body, up to `maxBytes`, so that a client that sends all
 * of it before it reads the answer (most do) gets the answer; one that sends more is left waiting
 * on its flow-control window until a timeout ends the connection.
 */
async function drain(iterator: AsyncIterator<Uint8Array>, maxBytes: number): Promise<void> {
  try {
    for (let dropped = 0, next = await iterator.next(); !next.done && dropped <= maxBytes; next = await iterator.next()) dropped += next.value.byteLength;
  } catch {
    // The client went away.
  }
}

/** The payload of a body that is exactly one envelope (flags: at most "compressed"), else undefined. */
function singleMessage(raw: Uint8Array): Uint8Array | undefined {
  if (raw.byteLength < ENVELOPE || (raw[0]! & ~compressedFlag) !== 0) return undefined;
  const length = new DataView(raw.buffer, raw.byteOffset).getUint32(1);
  return raw.byteLength === ENVELOPE + length ? raw.subarray(ENVELOPE) : undefined;
}

/** The chunks as one buffer; one it joins goes to `allocated` (a single chunk is the socket's, not ours). */
function concat(chunks: Uint8Array[], length: number, allocated: Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const joined = Buffer.concat(chunks, length);
  chunks.splice(0, chunks.length, joined);
  allocated.push(joined);
  return joined;
}

// Connect unary (proto|json), Connect streaming, gRPC and gRPC-Web (each +proto, +json or bare).
const CONTENT_TYPE = /^application\/(?:(proto|json)|connect\+(proto|json)|(grpc|grpc-web)(?:\+(proto|json))?)$/;

/**
 * For connect's path: `request` with its body read within `bounds` when connect first reads
 * it (after the request gate), handed over decompressed (its encoding header removed); the
 * reservation is given back once connect has decoded it (the next turn of the event loop).
 */
export function boundedConnectRequest(
  method: DescMethod,
  request: UniversalServerRequest,
  bounds: RequestBounds,
  acceptCompression: Compression[],
): UniversalServerRequest {
  const type = CONTENT_TYPE.exec((request.header.get("content-type") ?? "").split(";", 1)[0]!.trim().toLowerCase());
  const source = request.body;
  // Anything else connect refuses without reading the body. Calls that stream their requests
  // (reflection's only) are left to connect's --read-max-bytes per message.
  const single = method.methodKind === "unary" || method.methodKind === "server_streaming";
  if (!type || !single || request.method !== "POST" || !isAsyncIterable(source)) return request;
  const [, unary, connectStreaming, grpc, grpcFormat] = type;
  const enveloped = unary === undefined;
  const encodingHeader = grpc ? "grpc-encoding" : enveloped ? "connect-content-encoding" : "content-encoding";
  const compression = compressionNegotiate(acceptCompression, request.header.get(encodingHeader), null, encodingHeader);
  // An encoding ctrl does not accept: connect answers it (UNIMPLEMENTED) before reading the body.
  if (compression.error) return request;
  request.header.delete(encodingHeader);
  const contentLength = request.header.get("content-length");
  // Connect checks a unary body against it: the body handed over is the inflated one.
  if (compression.request) request.header.delete("content-length");
  const body: RequestBody = {
    method,
    enveloped,
    json: (unary ?? connectStreaming ?? grpcFormat) === "json",
    compression: compression.request ?? undefined,
    declaredLength: contentLength === null ? undefined : Number(contentLength),
    signal: request.signal,
  };
  let read: Promise<ReadBody> | undefined;
  let done = false;
  const iterator: AsyncIterator<Uint8Array> = {
    async next() {
      if (done) return { done: true, value: undefined };
      done = true;
      read ??= readRequestBody(source, body, bounds);
      const { message, raw, release, allocated } = await read;
      if (message === undefined) {
        // connect reports what is wrong with it, and may keep views of it until then.
        setImmediate(release);
        return { done: false, value: raw };
      }
      let value = message;
      if (enveloped && message.buffer === raw.buffer)
        value = raw; // uncompressed: the envelope as it came
      else if (enveloped) allocated.push((value = encodeEnvelope(0, message))); // inflated: in a new envelope
      // By then connect has copied the message out of `value` into the buffer it decodes.
      setImmediate(() => {
        release();
        bounds.garbage.free(allocated);
      });
      return { done: false, value };
    },
  };
  return { ...request, body: { [Symbol.asyncIterator]: () => iterator } };
}

function isAsyncIterable(body: unknown): body is AsyncIterable<Uint8Array> {
  return typeof body === "object" && body !== null && Symbol.asyncIterator in body;
}
