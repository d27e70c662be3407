// gRPC (HTTP/2, binary) for chosen server-streaming methods, written straight onto the
// HTTP/2 stream. Connect serves every other protocol and method; for a watch stream that
// fans one commit out to thousands of agents, its per-message pipeline (several async
// generator layers per message) cost ~70 µs of CPU per stream and event, raw HTTP/2 writes
// ~3 µs. The same implementation, interceptors and context values run as under connect, so
// the wire behaviour (codes, messages, error details, deadlines, shutdown) is the same, and
// a watch message carries the same framed change bytes (`Change.bytes`) on both paths. Kept
// by measurement against connect's path in the same run (docs/benchmarks.md, "One watch path").
import {
  create,
  fromBinary,
  isMessage,
  toBinary,
  type DescMessage,
  type DescMethodServerStreaming,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextKey,
  createHandlerContext,
  type ContextValues,
  type HandlerContext,
  type Interceptor,
  type StreamRequest,
  type StreamResponse,
} from "@connectrpc/connect";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import { compressedFlag, compressionNegotiate, encodeEnvelope, type Compression } from "@connectrpc/connect/protocol";
import { DECODE_OPTIONS, readRequestBody, type RequestBounds } from "./request-body.ts";
import { FanOutMemo } from "./streaming/fan-out-memo.ts";
import { chunkedEncoding } from "./services/cluster/verbatim.ts";
import { headerAcceptEncoding, headerEncoding, parseTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import type { Http2ServerRequest, IncomingHttpHeaders, ServerHttp2Stream } from "node:http2";

export interface ServerStreamingRoute<I extends DescMessage = DescMessage, O extends DescMessage = DescMessage> {
  method: DescMethodServerStreaming<I, O>;
  /** The method's implementation, as registered with connect. (A method, so routes of different methods share one list.) */
  impl(req: MessageShape<I>, ctx: HandlerContext): AsyncIterable<MessageInitShape<O>>;
  /** Compress response messages (from 1 KiB, as connect) when the client accepts an encoding. */
  compressResponses?: boolean;
}

export interface GrpcServerStreamingOptions {
  routes: ServerStreamingRoute[];
  /** Outermost first, as connect applies them. */
  interceptors: Interceptor[];
  /** Runs before the request body is read, as connect's requestGate. */
  requestGate?: (ctx: HandlerContext) => Promise<void>;
  /** What a request may cost before it is decoded, as on connect's path. */
  requestBounds: RequestBounds;
  /** Encodings accepted, as for connect (responses compressed only on routes that ask). */
  acceptCompression: Compression[];
  shutdownSignal: AbortSignal;
  contextValues: (req: Http2ServerRequest) => ContextValues;
}

/** Messages a handler sends unchanged on many streams (a live change fanned out to every watch of its region). */
const sharedMessages = new WeakSet<object>();
/** Their gRPC frames, built by the first stream that sends each. */
const sharedFrames = new FanOutMemo<object, Buffer>();

/**
 * Marks `message` as sent unchanged on many streams: the direct path encodes and frames it
 * once for all of them (a copy per stream is what the fan-out would otherwise spend most on,
 * with its garbage). Must not be changed after it is first sent.
 */
export function sharedMessage<T extends object>(message: T): T {
  sharedMessages.add(message);
  return message;
}

/**
 * Writes a shared message (see sharedMessage) onto the call's stream at once, outside the
 * handler's loop: true when written, false when the stream cannot take it now (not open yet,
 * compressing, backed up, or gone), and the handler must yield it as usual. Set only on the
 * direct path, for the handler's own use while it waits: it keeps the message order only if
 * the handler's loop is parked with nothing in flight.
 */
export interface DirectSend {
  send(message: object): boolean;
}
export const directSendKey = createContextKey<DirectSend | undefined>(undefined, { description: "direct send" });

/** `message`'s gRPC frame if it is shared (built by the first stream that sends it), else undefined. */
function sharedFrame(schema: DescMessage, message: object): Buffer | undefined {
  return sharedFrames.get(message, () => {
    if (!sharedMessages.has(message)) return undefined;
    const envelope = encodeEnvelope(0, toBinary(schema, message as MessageShape<DescMessage>));
    // A Buffer (a view, no copy): a stream's write turns any other Uint8Array into a new Buffer, one per stream.
    return Buffer.from(envelope.buffer, envelope.byteOffset, envelope.byteLength);
  });
}

/** connect's default: smaller messages are not worth compressing. */
const COMPRESS_MIN_BYTES = 1024;

/** Returns a request handler that serves the routes' gRPC calls and returns false for anything else. */
export function grpcServerStreaming(options: GrpcServerStreamingOptions): (req: Http2ServerRequest) => boolean {
  const byPath = new Map(options.routes.map((route) => [`/${route.method.parent.typeName}/${route.method.name}`, route]));
  return (req) => {
    if (req.httpVersionMajor !== 2 || req.method !== "POST") return false;
    const route = byPath.get(req.url);
    const contentType = req.headers["content-type"];
    if (!route || (contentType !== "application/grpc" && contentType !== "application/grpc+proto")) return false;
    void serve(route, req, contentType, options);
    return true;
  };
}

async function serve(route: ServerStreamingRoute, req: Http2ServerRequest, contentType: string, options: GrpcServerStreamingOptions): Promise<void> {
  const { method } = route;
  const stream = req.stream;
  const clientGone = new AbortController();
  stream.once("close", () => clientGone.abort(new ConnectError("client went away", Code.Canceled)));
  const timeout = parseTimeout(headerValue(req.headers, "grpc-timeout") ?? null, Number.MAX_SAFE_INTEGER);
  const ctx = createHandlerContext({
    service: method.parent,
    method,
    protocolName: "grpc",
    requestMethod: "POST",
    url: req.url,
    timeoutMs: timeout.timeoutMs,
    shutdownSignal: options.shutdownSignal,
    requestSignal: clientGone.signal,
    requestHeader: requestHeaders(req.headers),
    contextValues: options.contextValues(req),
  });
  const compression = compressionNegotiate(
    options.acceptCompression,
    headerValue(req.headers, headerEncoding.toLowerCase()) ?? null,
    headerValue(req.headers, headerAcceptEncoding.toLowerCase()) ?? null,
    headerAcceptEncoding,
  );
  const responseCompression = (route.compressResponses && compression.response) || undefined;
  if (responseCompression) ctx.responseHeader.set(headerEncoding, responseCompression.name);
  const writer = new GrpcResponseWriter(stream, contentType, responseCompression);
  if (!responseCompression) {
    ctx.values.set(directSendKey, {
      send: (message) => {
        const frame = sharedFrame(method.output, message);
        return frame !== undefined && writer.sendNow(frame);
      },
    });
  }
  try {
    if (timeout.error) throw timeout.error;
    await options.requestGate?.(ctx);
    if (compression.error) throw compression.error;
    const input = await readRequest(req, method, compression.request ?? undefined, options.requestBounds, ctx.signal);
    const call = options.interceptors.reduceRight<(r: StreamRequest) => Promise<StreamResponse>>(
      (next, interceptor) => interceptor(next as never) as never,
      async (r) => ({
        stream: true,
        service: method.parent,
        method,
        header: ctx.responseHeader,
        trailer: ctx.responseTrailer,
        message: outputMessages(method.output, route.impl(await firstMessage(r.message), ctx)),
      }),
    );
    const res = await call({
      stream: true,
      service: method.parent,
      method,
      requestMethod: "POST",
      url: req.url,
      signal: ctx.signal,
      header: ctx.requestHeader,
      contextValues: ctx.values,
      message: singleMessage(input),
    });
    // Headers now, not with the first message: a watch may send none for a bookmark interval,
    // and proxies with header timeouts would drop it.
    writer.open(ctx.responseHeader);
    for await (const message of res.message) {
      const frame = responseCompression ? undefined : sharedFrame(method.output, message);
      if (frame === undefined) {
        await writer.message(ctx.responseHeader, encodedChunks(method.output, message));
        continue;
      }
      const full = writer.frame(ctx.responseHeader, frame);
      if (full !== undefined) await full;
    }
    writer.end(ctx.responseHeader, setTrailerStatus(new Headers(ctx.responseTrailer), undefined));
  } catch (error) {
    writer.end(ctx.responseHeader, setTrailerStatus(new Headers(ctx.responseTrailer), ConnectError.from(error)));
  } finally {
    ctx.abort();
  }
}

/** gRPC response framing on one HTTP/2 stream: headers, length-prefixed messages, trailers. */
class GrpcResponseWriter {
  readonly #stream: ServerHttp2Stream;
  readonly #contentType: string;
  readonly #compression: Compression | undefined;
  #headersSent = false;
  /** A write found the stream's buffer full; cleared on drain. */
  #backedUp = false;

  constructor(stream: ServerHttp2Stream, contentType: string, compression: Compression | undefined) {
    this.#stream = stream;
    this.#contentType = contentType;
    this.#compression = compression;
  }

  /**
   * Writes a framed message now if the stream takes it without waiting: false, and nothing
   * written, when the headers are not sent yet, the stream is backed up or it is gone. A
   * write that fills the stream marks it backed up: the next change is queued, and the
   * handler's loop waits for the drain with it.
   */
  sendNow(frame: Buffer): boolean {
    if (!this.#headersSent || this.#backedUp || this.#stream.destroyed) return false;
    if (!this.#stream.write(frame)) void this.#drained();
    return true;
  }

  /** Sends the response headers (once). */
  open(header: Headers): void {
    if (this.#headersSent || this.#stream.destroyed) return;
    this.#headersSent = true;
    this.#stream.respond(this.#headers(header), { waitForTrailers: true });
  }

  /** Writes one message, encoded as `chunks`; resolves once the stream can take more (or is gone). */
  async message(header: Headers, chunks: Uint8Array[]): Promise<void> {
    const length = chunks.reduce((n, chunk) => n + chunk.byteLength, 0);
    if (this.#compression !== undefined && length >= COMPRESS_MIN_BYTES) {
      await this.frame(header, encodeEnvelope(compressedFlag, await this.#compression.compress(Buffer.concat(chunks, length))));
      return;
    }
    // The chunks as they are, behind their own prefix: a copy of a large message into one
    // envelope is what a stream whose client does not read would hold besides it.
    const prefix = Buffer.allocUnsafe(5);
    prefix[0] = 0;
    prefix.writeUInt32BE(length, 1);
    await this.frame(header, [prefix, ...chunks]);
  }

  /**
   * Writes one framed message (in chunks, its prefix first). Returns nothing when the stream
   * can take more, else a promise that resolves once it can (or is gone): most writes then
   * cost a fan-out no promise.
   */
  frame(header: Headers, envelope: Uint8Array | Uint8Array[]): Promise<void> | undefined {
    if (this.#stream.destroyed) throw new ConnectError("client went away", Code.Canceled);
    this.open(header);
    let more = true;
    if (!Array.isArray(envelope)) {
      more = this.#stream.write(envelope);
    } else {
      this.#stream.cork();
      for (const chunk of envelope) more = this.#stream.write(chunk);
      this.#stream.uncork();
    }
    return more ? undefined : this.#drained();
  }

  /** Marks the stream backed up until it drains (or closes); resolves then. */
  #drained(): Promise<void> {
    this.#backedUp = true;
    return new Promise<void>((resolve) => {
      const done = () => {
        this.#backedUp = false;
        this.#stream.off("drain", done);
        this.#stream.off("close", done);
        resolve();
      };
      this.#stream.once("drain", done);
      this.#stream.once("close", done);
    });
  }

  /** Ends the call with `trailer` (grpc-status and friends); trailers-only if nothing was sent. */
  end(header: Headers, trailer: Headers): void {
    if (this.#stream.destroyed || this.#stream.closed) return;
    if (!this.#headersSent) {
      this.#headersSent = true;
      this.#stream.respond({ ...this.#headers(header), ...Object.fromEntries(trailer) }, { endStream: true });
      return;
    }
    // Node's compatibility response (unused here) would send its own, empty trailers.
    this.#stream.removeAllListeners("wantTrailers");
    this.#stream.once("wantTrailers", () => this.#stream.sendTrailers(Object.fromEntries(trailer)));
    this.#stream.end();
  }

  #headers(header: Headers): Record<string, string> {
    return { ...Object.fromEntries(header), ":status": "200", "content-type": this.#contentType };
  }
}

/**
 * `message`'s encoding in chunks: its verbatim fields (unknown fields, which protobuf-es
 * writes after the known ones, or those of `messageWithVerbatimChunks`) by reference, each behind
 * its tag, rather than copied.
 */
export function encodedChunks<O extends DescMessage>(schema: O, message: MessageShape<O>): Uint8Array[] {
  const chunked = chunkedEncoding(message);
  if (chunked !== undefined) return [...chunked];
  const unknown = message.$unknown;
  if (unknown === undefined || unknown.length === 0) return [toBinary(schema, message)];
  const chunks: Uint8Array[] = [toBinary(schema, message, { writeUnknownFields: false })];
  for (const { no, wireType, data } of unknown) chunks.push(new BinaryWriter().tag(no, wireType).finish(), data);
  return chunks;
}

async function readRequest<I extends DescMessage>(
  req: Http2ServerRequest,
  method: DescMethodServerStreaming<I>,
  compression: Compression | undefined,
  bounds: RequestBounds,
  signal: AbortSignal,
): Promise<MessageShape<I>> {
  const body = { method, enveloped: true, json: false, compression, declaredLength: undefined, signal };
  const { message, release } = await readRequestBody(req as AsyncIterable<Uint8Array>, body, bounds);
  try {
    if (message === undefined) throw new ConnectError("request body is not exactly one length-prefixed gRPC message", Code.InvalidArgument);
    return fromBinary(method.input, message, DECODE_OPTIONS);
  } catch (error) {
    if (error instanceof ConnectError) throw error;
    throw new ConnectError(`request is not a valid ${method.input.typeName}: ${error instanceof Error ? error.message : String(error)}`, Code.InvalidArgument);
  } finally {
    release();
  }
}

/**
 * What a handler yields (a message or its init shape), as messages, as connect normalizes
 * them. An iterator rather than an async generator: a generator layer costs a fan-out several
 * promises and turns per stream and message.
 */
function outputMessages<O extends DescMessage>(schema: O, items: AsyncIterable<MessageInitShape<O>>): AsyncIterable<MessageShape<O>> {
  return {
    [Symbol.asyncIterator]() {
      const source = items[Symbol.asyncIterator]();
      const toMessage = (r: IteratorResult<MessageInitShape<O>>): IteratorResult<MessageShape<O>> =>
        r.done ? (r as IteratorResult<MessageShape<O>>) : { done: false, value: isMessage(r.value, schema) ? r.value : create(schema, r.value) };
      return {
        next: () => source.next().then(toMessage),
        return: async () => toMessage((await source.return?.()) ?? { done: true, value: undefined }),
      };
    },
  };
}

async function* singleMessage<T>(message: T): AsyncIterable<T> {
  yield message;
}

async function firstMessage<T>(messages: AsyncIterable<T>): Promise<T> {
  for await (const message of messages) return message;
  throw new ConnectError("missing request message", Code.InvalidArgument);
}

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(", ") : value;
}

function requestHeaders(headers: IncomingHttpHeaders): Headers {
  const result = new Headers();
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith(":") || value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) result.append(name, v);
  }
  return result;
}
