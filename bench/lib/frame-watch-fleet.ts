// Watch streams read straight off HTTP/2 frames: B2's clients. One process stands in for 1,000
// agents on the 2 cores it shares with ctrl, and Node's HTTP/2 client spends about 7 µs per
// received message on its own machinery (a native-to-JS call, a Readable push and a 'data'
// event per stream), one connection after another: a write's last streams then waited for the
// benchmark's client, not for ctrl. This reader takes each socket read whole and walks its
// frames: a DATA frame costs a header read and the message's summary (`summarize`).
//
// Only what a watch needs of HTTP/2 (RFC 9113): the preface and settings (acknowledged), pings
// (answered), requests as HPACK literals without indexing, and flow-control windows opened to
// the maximum at the start (a watch in a benchmark receives a few MB). Response headers and
// trailers are not decoded (no HPACK decoder): a stream that ctrl ends (trailers, RST_STREAM or
// GOAWAY) is counted failed, which a watch in a benchmark never should be; WatchFleet, on
// Node's client, reads the status when one needs it.
import net from "node:net";
import tls from "node:tls";
import { summarize, WATCH_PATH, watchRequestFrame, type WatchReader, type WatchReaderOptions, type WatchStream } from "./clients.ts";
import { ADMIN_TOKEN } from "./ctrl-process.ts";
import { now } from "./util.ts";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const DATA = 0;
const HEADERS = 1;
const RST_STREAM = 3;
const SETTINGS = 4;
const PING = 6;
const GOAWAY = 7;
const END_STREAM = 0x1;
const ACK = 0x1;
const END_HEADERS = 0x4;
const PADDED = 0x8;
const SETTINGS_ENABLE_PUSH = 0x2;
const SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
const MAX_WINDOW = 2 ** 31 - 1;
const DEFAULT_WINDOW = 65_535;
/** The connection's window is topped up once this much of it was used. */
const WINDOW_TOP_UP = 2 ** 30;

function frame(type: number, flags: number, streamId: number, payload: Uint8Array = Buffer.alloc(0)): Buffer {
  const header = Buffer.allocUnsafe(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(streamId, 5);
  return Buffer.concat([header, payload]);
}

function windowUpdate(streamId: number, increment: number): Buffer {
  const payload = Buffer.allocUnsafe(4);
  payload.writeUInt32BE(increment, 0);
  return frame(8, 0, streamId, payload);
}

/** An HPACK integer with an n-bit prefix (RFC 7541 §5.1), the prefix's other bits zero. */
function hpackInteger(value: number, prefixBits: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [value];
  const bytes = [max];
  let rest = value - max;
  for (; rest >= 128; rest = Math.floor(rest / 128)) bytes.push((rest % 128) | 0x80);
  bytes.push(rest);
  return bytes;
}

/** Header fields as HPACK literals without indexing, new names, no Huffman coding (RFC 7541 §6.2.2). */
export function hpackLiterals(fields: [string, string][]): Buffer {
  const bytes: number[] = [];
  for (const [name, value] of fields) {
    bytes.push(0);
    for (const text of [name, value]) {
      const octets = Buffer.from(text, "latin1");
      bytes.push(...hpackInteger(octets.length, 7), ...octets);
    }
  }
  return Buffer.from(bytes);
}

interface StreamState {
  stream: WatchStream;
  /** A gRPC message split over DATA frames, until it is whole. */
  partial: Buffer | undefined;
}

export class FrameWatchFleet implements WatchReader {
  readonly streams: WatchStream[] = [];
  readonly #sockets: net.Socket[] = [];
  readonly #closed: Promise<void>[] = [];
  #closing = false;

  constructor(baseUrl: string, region: string, count: number, options: WatchReaderOptions) {
    const url = new URL(baseUrl);
    const secure = url.protocol === "https:";
    const port = Number(url.port || (secure ? 443 : 80));
    const request = watchRequestFrame(region, options);
    const headerBlock = hpackLiterals([
      [":method", "POST"],
      [":scheme", secure ? "https" : "http"],
      [":path", WATCH_PATH],
      [":authority", url.host],
      ["content-type", "application/grpc"],
      ["te", "trailers"],
      ["authorization", `Bearer ${options.token ?? ADMIN_TOKEN}`],
    ]);
    const connections = Math.max(1, Math.min(options.connections, count));
    const byConnection: Map<number, StreamState>[] = Array.from({ length: connections }, () => new Map());
    for (let i = 0; i < count; i++) {
      const stream: WatchStream = { index: i, messages: 0, events: 0, version: -1, error: undefined };
      this.streams.push(stream);
      // Stream i on connection i % connections, as WatchFleet: odd stream ids from 1.
      byConnection[i % connections]!.set(2 * Math.floor(i / connections) + 1, { stream, partial: undefined });
    }
    for (const streams of byConnection) {
      const settings = Buffer.alloc(12);
      settings.writeUInt16BE(SETTINGS_ENABLE_PUSH, 0);
      settings.writeUInt32BE(0, 2);
      settings.writeUInt16BE(SETTINGS_INITIAL_WINDOW_SIZE, 6);
      settings.writeUInt32BE(MAX_WINDOW, 8);
      const opening = [PREFACE, frame(SETTINGS, 0, 0, settings), windowUpdate(0, MAX_WINDOW - DEFAULT_WINDOW)];
      for (const id of streams.keys()) opening.push(frame(HEADERS, END_HEADERS, id, headerBlock), frame(DATA, END_STREAM, id, request));
      const socket = secure ? tls.connect({ host: url.hostname, port, ca: options.ca, ALPNProtocols: ["h2"] }) : net.connect({ host: url.hostname, port });
      socket.setNoDelay(true);
      socket.write(Buffer.concat(opening));
      this.#sockets.push(socket);
      this.#closed.push(this.#read(socket, streams, options.onMessage));
    }
  }

  get errors(): WatchStream[] {
    return this.streams.filter((s) => s.error !== undefined);
  }

  behind(version: number): number {
    let n = 0;
    for (const s of this.streams) if (s.version < version) n++;
    return n;
  }

  /** Ends every connection (GOAWAY, then the socket): ctrl closes their streams. */
  async close(): Promise<void> {
    this.#closing = true;
    for (const socket of this.#sockets) {
      const payload = Buffer.alloc(8); // last stream id 0, NO_ERROR
      socket.end(frame(GOAWAY, 0, 0, payload));
    }
    await Promise.all(this.#closed);
  }

  /** Reads `socket`'s frames until it closes; resolves then. */
  #read(socket: net.Socket, streams: Map<number, StreamState>, onMessage: WatchReaderOptions["onMessage"]): Promise<void> {
    const fail = (id: number, state: StreamState, why: string) => {
      if (!this.#closing && state.stream.error === undefined) state.stream.error = new Error(why);
      streams.delete(id);
    };
    const failAll = (why: string) => {
      for (const state of streams.values()) if (!this.#closing && state.stream.error === undefined) state.stream.error = new Error(why);
    };
    /** The gRPC messages of one DATA frame's payload (bytes[from, to)) on `state`'s stream. */
    const messages = (state: StreamState, bytes: Buffer, from: number, to: number, receivedAt: number) => {
      let buf = bytes;
      let at = from;
      let end = to;
      if (state.partial !== undefined) {
        buf = Buffer.concat([state.partial, bytes.subarray(from, to)]);
        at = 0;
        end = buf.length;
        state.partial = undefined;
      }
      while (end - at >= 5 && end - at >= 5 + buf.readUInt32BE(at + 1)) {
        if (buf[at] !== 0) throw new Error(`stream ${state.stream.index}: a compressed or unknown gRPC frame (flags ${buf[at]})`);
        const next = at + 5 + buf.readUInt32BE(at + 1);
        const res = summarize(buf, at + 5, next);
        at = next;
        const { stream } = state;
        stream.messages++;
        stream.events += res.events;
        stream.version = res.version;
        onMessage?.(stream, res, receivedAt);
      }
      // Copied: the socket's buffer is not ours to keep.
      if (at < end) state.partial = Buffer.from(buf.subarray(at, end));
    };
    let pending: Buffer | undefined;
    let unacknowledged = 0;
    socket.on("data", (chunk: Buffer) => {
      const receivedAt = now();
      const buf = pending === undefined ? chunk : Buffer.concat([pending, chunk]);
      let at = 0;
      const replies: Buffer[] = [];
      while (buf.length - at >= 9) {
        const length = buf.readUIntBE(at, 3);
        if (buf.length - at < 9 + length) break;
        const type = buf[at + 3]!;
        const flags = buf[at + 4]!;
        const id = buf.readUInt32BE(at + 5) & 0x7fffffff;
        let from = at + 9;
        let to = from + length;
        at = to;
        if (type === DATA) {
          unacknowledged += length;
          const state = streams.get(id);
          if (state === undefined) continue;
          if (flags & PADDED) to -= buf[from++]!;
          messages(state, buf, from, to, receivedAt);
          if (flags & END_STREAM) fail(id, state, "the stream ended (DATA with END_STREAM)");
        } else if (type === HEADERS) {
          // Response headers, or trailers (END_STREAM): a watch that ends has failed.
          const state = streams.get(id);
          if (state !== undefined && flags & END_STREAM) fail(id, state, "ctrl ended the stream (trailers; not decoded)");
        } else if (type === RST_STREAM) {
          const state = streams.get(id);
          if (state !== undefined) fail(id, state, `ctrl reset the stream (HTTP/2 error ${buf.readUInt32BE(from)})`);
        } else if (type === SETTINGS && !(flags & ACK)) {
          replies.push(frame(SETTINGS, ACK, 0));
        } else if (type === PING && !(flags & ACK)) {
          replies.push(frame(PING, ACK, 0, buf.subarray(from, to)));
        } else if (type === GOAWAY) {
          failAll(`ctrl sent GOAWAY (HTTP/2 error ${buf.readUInt32BE(from + 4)})`);
        }
      }
      pending = at === buf.length ? undefined : Buffer.from(buf.subarray(at));
      if (unacknowledged >= WINDOW_TOP_UP) {
        replies.push(windowUpdate(0, unacknowledged));
        unacknowledged = 0;
      }
      if (replies.length > 0 && !socket.destroyed) socket.write(Buffer.concat(replies));
    });
    return new Promise<void>((resolve) => {
      socket.on("error", (error) => failAll(`connection failed: ${error.message}`));
      socket.on("close", () => {
        failAll("the connection closed");
        resolve();
      });
    });
  }
}
