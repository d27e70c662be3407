// Bounds on what one connection may cost ctrl, whatever its client does: idle and
// half-open connections are closed, HTTP/2 streams per connection are capped, and stream
// resets ("rapid reset", CVE-2023-44487) and pings beyond a rate end the connection with
// GOAWAY ENHANCE_YOUR_CALM, as grpc-go's keepalive enforcement and Envoy do; so do failed
// authentications beyond a count, so that guessing tokens costs a new connection (over TLS,
// a handshake) every few guesses.
import type http from "node:http";
import { constants as h2, type Http2ServerRequest, type ServerHttp2Session, type ServerOptions as Http2ServerOptions } from "node:http2";

export interface ConnectionBounds {
  /** A new connection must send its first bytes, and an HTTP/2 one its first request, within this. */
  firstRequestTimeoutMs: number;
  /** An HTTP/2 connection with no open stream for this long is asked to go away (GOAWAY). */
  idleTimeoutMs: number;
  /** Concurrent streams per HTTP/2 connection (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: number;
  /** Streams a client may reset per second (sustained; as many at once) before its connection is ended. */
  maxResetsPerSecond: number;
  /** Pings a client may send per second (sustained; as many at once) before its connection is ended. */
  maxPingsPerSecond: number;
  /** Failed authentications answered on one connection; the next one also ends it. */
  maxAuthFailuresPerConnection: number;
  /** HTTP/1.1: time to receive a request's headers. */
  headersTimeoutMs: number;
  /** HTTP/1.1: time to receive a whole request (headers and body). */
  requestTimeoutMs: number;
  /** HTTP/1.1: an idle kept-alive connection is closed after this (announced in its Keep-Alive header). */
  keepAliveTimeoutMs: number;
}

export const DEFAULT_CONNECTION_BOUNDS: ConnectionBounds = {
  firstRequestTimeoutMs: 10_000,
  idleTimeoutMs: 300_000,
  maxConcurrentStreams: 1000,
  maxResetsPerSecond: 100,
  maxPingsPerSecond: 10,
  maxAuthFailuresPerConnection: 32,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  keepAliveTimeoutMs: 5000,
};

export type BoundReason = "idle" | "resets" | "pings" | "auth_failures";

export function http1ServerOptions(bounds: ConnectionBounds): http.ServerOptions {
  return {
    keepAliveTimeout: bounds.keepAliveTimeoutMs,
    headersTimeout: bounds.headersTimeoutMs,
    requestTimeout: bounds.requestTimeoutMs,
    // Node checks both timeouts this often (30 s by default: too coarse for short timeouts).
    connectionsCheckingInterval: Math.max(10, Math.min(1000, bounds.headersTimeoutMs / 4)),
  };
}

export function http2ServerOptions(bounds: ConnectionBounds): Http2ServerOptions {
  return { settings: { maxConcurrentStreams: bounds.maxConcurrentStreams } };
}

/** Enforces the HTTP/2 bounds on one session for its whole life. */
export function boundSession(session: ServerHttp2Session, bounds: ConnectionBounds, ended: (reason: BoundReason) => void): void {
  let ending = false;
  const end = (reason: BoundReason, code: number) => {
    if (ending || session.destroyed) return;
    ending = true;
    ended(reason);
    // (destroy(error, code) sends its GOAWAY with NO_ERROR whatever the code: send our own first.)
    session.goaway(code);
    setImmediate(() => session.destroy());
  };
  let open = 0;
  let idleTimer: NodeJS.Timeout | undefined;
  const idle = (ms: number) => {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => end("idle", h2.NGHTTP2_NO_ERROR), ms).unref();
  };
  idle(bounds.firstRequestTimeoutMs);
  const resets = new RateLimit(bounds.maxResetsPerSecond);
  const pings = new RateLimit(bounds.maxPingsPerSecond);
  session.on("stream", (stream) => {
    open++;
    clearTimeout(idleTimer);
    stream.once("close", () => {
      // Reset (by the client, nearly always: ctrl resets only streams that outstay a bound).
      if (stream.rstCode !== h2.NGHTTP2_NO_ERROR && stream.rstCode !== undefined && !resets.take()) end("resets", h2.NGHTTP2_ENHANCE_YOUR_CALM);
      if (--open === 0 && !session.destroyed) idle(bounds.idleTimeoutMs);
    });
  });
  // Node answers every ping itself; this only decides when they are too many.
  session.on("ping", () => {
    if (!pings.take()) end("pings", h2.NGHTTP2_ENHANCE_YOUR_CALM);
  });
  session.once("close", () => clearTimeout(idleTimer));
}

/** Where a failed authentication is counted: the request, and its answer's headers. */
export type AuthFailed = (req: http.IncomingMessage | Http2ServerRequest, responseHeader: Headers) => void;

/**
 * Counts failed authentications per connection; the one after `max` is still answered, and
 * its connection ends after the answer: HTTP/2 with GOAWAY ENHANCE_YOUR_CALM (streams already
 * received finish), HTTP/1.1 with `connection: close`.
 */
export function authFailureLimit(max: number, ended: (reason: BoundReason) => void): AuthFailed {
  const failures = new WeakMap<object, number>();
  return (req, responseHeader) => {
    const session = "stream" in req ? req.stream.session : undefined;
    const connection = "stream" in req ? session : req.socket;
    if (!connection) return; // the stream is gone already, and its session with it
    const count = (failures.get(connection) ?? 0) + 1;
    failures.set(connection, count);
    if (count !== max + 1) return;
    ended("auth_failures");
    if (!session) return responseHeader.set("connection", "close");
    // After the answer: clients (Node's among them) drop their open streams on a GOAWAY
    // with an error code.
    (req as Http2ServerRequest).stream.once("close", () => {
      if (session.closed || session.destroyed) return;
      // (0: the last stream received; close() lets those finish and sends its own GOAWAY.)
      session.goaway(h2.NGHTTP2_ENHANCE_YOUR_CALM, 0);
      session.close();
    });
  };
}

/** A token bucket: `perSecond` tokens a second, at most `perSecond` saved up. */
class RateLimit {
  readonly #perSecond: number;
  #tokens: number;
  #at = Date.now();

  constructor(perSecond: number) {
    this.#perSecond = perSecond;
    this.#tokens = perSecond;
  }

  take(): boolean {
    const now = Date.now();
    this.#tokens = Math.min(this.#perSecond, this.#tokens + ((now - this.#at) / 1000) * this.#perSecond);
    this.#at = now;
    if (this.#tokens < 1) return false;
    this.#tokens--;
    return true;
  }
}
