// The admin token's interceptor, gRPC clients (HTTP/2, as an agent connects) and a fleet of watch streams.
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { encodeEnvelope, type Compression } from "@connectrpc/connect/protocol";
import { create, toBinary } from "@bufbuild/protobuf";
import http2 from "node:http2";
import { ClusterService, WatchDeploymentChangesRequestSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { ADMIN_TOKEN } from "./ctrl-process.ts";
import { now } from "./util.ts";

export type ClusterClient = Client<typeof ClusterService>;

const EMPTY = Buffer.alloc(0);

/** Sends `token` with every call. */
export function bearerAuth(token: string): Interceptor {
  return (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
}

/** Sends the benchmark ctrl's admin token with every call. */
export const adminAuth = bearerAuth(ADMIN_TOKEN);

/** A gRPC client of `service` on its own HTTP/2 connection, calling with `token` (the admin's by default). */
export function serviceClient<S extends DescService>(service: S, baseUrl: string, token = ADMIN_TOKEN): Client<S> {
  return createClient(service, createGrpcTransport({ baseUrl, interceptors: [bearerAuth(token)] }));
}

/**
 * One client per HTTP/2 connection (each transport owns one session), with the admin token or
 * `token` (e.g. a region's agent token).
 */
export function clusterClient(baseUrl: string, { token, ...options }: { acceptCompression?: Compression[]; token?: string } = {}): ClusterClient {
  return createClient(ClusterService, createGrpcTransport({ baseUrl, interceptors: [token === undefined ? adminAuth : bearerAuth(token)], ...options }));
}

/** A new agent token of `region`, minted through ctrl with the admin token (RegionService.CreateAgentToken). */
export async function createAgentToken(baseUrl: string, region: string): Promise<string> {
  const regions = createClient(RegionService, createGrpcTransport({ baseUrl, interceptors: [adminAuth] }));
  return (await regions.createAgentToken({ region })).token;
}

export interface WatchStream {
  index: number;
  messages: number;
  events: number;
  /** Last `version` received. */
  version: number;
  error: unknown;
}

/** What a benchmark's watch streams are opened with (WatchFleet, FrameWatchFleet). */
export interface WatchReaderOptions {
  /** HTTP/2 connections the streams are spread over, stream i on connection i % connections. */
  connections: number;
  versionLastSeen?: number;
  onMessage?: (stream: WatchStream, res: WatchResponseSummary, receivedAt: number) => void;
  /** The CA to trust for an https URL. */
  ca?: Buffer;
  /** The bearer token of the calls (the benchmarks' admin token unless given). */
  token?: string;
}

/** The path of WatchDeploymentChanges, and its request from `region` after `options.versionLastSeen`, framed for gRPC. */
export const WATCH_PATH = `/${ClusterService.typeName}/${ClusterService.method.watchDeploymentChanges.name}`;
export function watchRequestFrame(region: string, options: WatchReaderOptions): Uint8Array {
  const request = create(WatchDeploymentChangesRequestSchema, {
    region,
    versionLastSeen: options.versionLastSeen === undefined ? undefined : BigInt(options.versionLastSeen),
  });
  return encodeEnvelope(0, toBinary(WatchDeploymentChangesRequestSchema, request));
}

/** Watch streams a benchmark opened: each stream's progress, and the end of them all. */
export interface WatchReader {
  readonly streams: WatchStream[];
  /** Streams that failed. */
  readonly errors: WatchStream[];
  /** Streams whose cursor has not reached `version`. */
  behind(version: number): number;
  /** Ends every stream and connection; resolves once they are closed. */
  close(): Promise<void>;
}

/** What a watch response says, read from its wire format (`WatchDeploymentChangesResponse`). */
export interface WatchResponseSummary {
  /** Change events in the response (0: a bookmark). */
  events: number;
  /** The region version after them. */
  version: number;
}

/**
 * Reads a WatchDeploymentChangesResponse's version and counts its events (field 1) without
 * decoding them, by hand: the reader stands in for 1,000 agents on cores it shares with ctrl, so
 * what it spends per message is kept to reading the tags (no reader object, no bigint).
 */
export function summarize(payload: Uint8Array, from: number, to: number): WatchResponseSummary {
  let pos = from;
  /** The varint at pos (at most 2^53, which versions and lengths are). */
  const varint = (): number => {
    let value = 0;
    let scale = 1;
    for (;;) {
      if (pos >= to) throw new Error("a watch response ends inside a varint");
      const byte = payload[pos++]!;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
  };
  let events = 0;
  let version = -1;
  while (pos < to) {
    const tag = varint();
    const field = Math.floor(tag / 8);
    const wireType = tag & 7;
    if (wireType === 0) {
      const value = varint();
      if (field === 2) version = value;
    } else if (wireType === 2) {
      const length = varint();
      pos += length;
      if (field === 1) events++;
    } else if (wireType === 1) pos += 8;
    else if (wireType === 5) pos += 4;
    else throw new Error(`unexpected wire type ${wireType} in a watch response`);
  }
  return { events, version };
}

/**
 * `count` WatchDeploymentChanges streams on one region, spread round-robin over
 * `connections` HTTP/2 connections, each reading continuously. `onMessage` sees every
 * response with its receive time.
 *
 * Each stream is a lean gRPC reader on a raw HTTP/2 stream (gRPC framing, then the response's
 * version and event count read from its wire format), not a connect-node client: a real agent
 * reads and decodes one stream in its own process, while here one process reads them all on a
 * machine it shares with ctrl. Decoding every event (~10 µs) or connect-node's per-message
 * pipeline (~75 µs) would put the benchmark's own process, not ctrl, in the latency: with
 * full decoding the last of 4 connections' streams were served 11 ms after the first's.
 */
export class WatchFleet implements WatchReader {
  readonly streams: WatchStream[] = [];
  readonly #sessions: http2.ClientHttp2Session[];
  readonly #calls: http2.ClientHttp2Stream[] = [];
  readonly #ended: Promise<void>[] = [];
  #closing = false;

  constructor(
    baseUrl: string,
    region: string,
    count: number,
    options: WatchReaderOptions & {
      /**
       * gRPC (ctrl's direct path, as agents connect; the default) or the Connect protocol
       * (served by connect-node's pipeline: to compare the two paths on the same server).
       */
      protocol?: "grpc" | "connect";
    },
  ) {
    this.#sessions = Array.from({ length: Math.max(1, Math.min(options.connections, count)) }, () => {
      const session = http2.connect(baseUrl, { ca: options.ca });
      session.on("error", () => {});
      return session;
    });
    const frame = watchRequestFrame(region, options);
    for (let i = 0; i < count; i++) {
      const stream: WatchStream = { index: i, messages: 0, events: 0, version: -1, error: undefined };
      this.streams.push(stream);
      const connect = options.protocol === "connect";
      const call = this.#sessions[i % this.#sessions.length]!.request({
        ":method": "POST",
        ":path": WATCH_PATH,
        authorization: `Bearer ${options.token ?? ADMIN_TOKEN}`,
        ...(connect
          ? { "content-type": "application/connect+proto", "connect-protocol-version": "1" }
          : { "content-type": "application/grpc", te: "trailers" }),
      });
      let endStream: { error?: { code?: string; message?: string } } | undefined;
      this.#calls.push(call);
      let pending: Buffer = EMPTY;
      call.on("data", (chunk: Buffer) => {
        const receivedAt = now();
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        // Messages are read in place (most chunks hold exactly one); what is left waits for the next chunk.
        let at = 0;
        while (pending.length - at >= 5 && pending.length - at >= 5 + pending.readUInt32BE(at + 1)) {
          const end = at + 5 + pending.readUInt32BE(at + 1);
          const flags = pending[at]!;
          const from = at + 5;
          at = end;
          // Connect's end-of-stream message (flag 2): JSON, with the error if the call failed.
          if (flags & 2) {
            endStream = JSON.parse(pending.toString("utf8", from, end)) as typeof endStream;
            continue;
          }
          const res = summarize(pending, from, end);
          stream.messages++;
          stream.events += res.events;
          stream.version = res.version;
          options.onMessage?.(stream, res, receivedAt);
        }
        pending = at === pending.length ? EMPTY : pending.subarray(at);
      });
      this.#ended.push(
        new Promise<void>((resolve) => {
          let fields: http2.IncomingHttpHeaders = {};
          call.on("response", (headers) => (fields = headers));
          call.on("trailers", (trailers) => (fields = trailers));
          call.on("error", (error) => {
            if (!this.#closing) stream.error = error;
          });
          call.on("close", () => {
            const failure = connect
              ? endStream?.error && `connect error ${endStream.error.code}: ${endStream.error.message}`
              : fields["grpc-status"] !== "0" && `grpc-status ${fields["grpc-status"]}: ${fields["grpc-message"]}`;
            if (!this.#closing && stream.error === undefined && failure) stream.error = new Error(failure);
            resolve();
          });
        }),
      );
      call.end(frame);
    }
  }

  get errors(): WatchStream[] {
    return this.streams.filter((s) => s.error !== undefined);
  }

  /** Streams whose cursor has not reached `version`. */
  behind(version: number): number {
    return this.streams.filter((s) => s.version < version).length;
  }

  async close(): Promise<void> {
    this.#closing = true;
    for (const call of this.#calls) call.close(http2.constants.NGHTTP2_CANCEL);
    await Promise.all(this.#ended);
    for (const session of this.#sessions) session.close();
  }
}
