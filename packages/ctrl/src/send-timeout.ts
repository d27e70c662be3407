// Ends responses whose client has stopped reading. A stream parked on a full transport
// (HTTP/2 flow control, or a TCP window the client does not open) cannot send a status:
// trailers queue behind the data it does not read. So it is reset (HTTP/2 RST_STREAM
// ENHANCE_YOUR_CALM, which gRPC clients report as RESOURCE_EXHAUSTED; HTTP/1.1: the
// connection is closed), which ends the handler and frees what it holds.
import type http from "node:http";
import { constants as h2, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";

interface Watched {
  /** What buffers the response's unsent bytes. */
  out: { readonly writableNeedDrain: boolean; readonly writableLength: number };
  reset(): void;
  /** Since when the client has read nothing while the response waited for it. */
  stuckSince: number | undefined;
  unsent: number;
}

export class SendTimeout {
  readonly #timeoutMs: number;
  readonly #onReset: () => void;
  readonly #watched = new Set<Watched>();
  #timer: NodeJS.Timeout | undefined;

  constructor(timeoutMs: number, onReset: () => void) {
    this.#timeoutMs = timeoutMs;
    this.#onReset = onReset;
  }

  /** Watches one response until it closes. */
  watch(req: http.IncomingMessage | Http2ServerRequest, res: http.ServerResponse | Http2ServerResponse): void {
    const watched: Watched =
      "stream" in req
        ? { out: req.stream, reset: () => req.stream.close(h2.NGHTTP2_ENHANCE_YOUR_CALM), stuckSince: undefined, unsent: 0 }
        : { out: res as http.ServerResponse, reset: () => req.socket.destroy(), stuckSince: undefined, unsent: 0 };
    this.#watched.add(watched);
    res.once("close", () => this.#watched.delete(watched));
    // One timer for every response, checking a few times per timeout; none while idle.
    this.#timer ??= setInterval(() => this.#check(), Math.max(10, Math.min(1000, this.#timeoutMs / 4))).unref();
  }

  #check(): void {
    const now = Date.now();
    for (const w of this.#watched) {
      const { writableNeedDrain, writableLength } = w.out;
      if (!writableNeedDrain) w.stuckSince = undefined;
      else if (w.stuckSince === undefined || writableLength < w.unsent) w.stuckSince = now;
      w.unsent = writableLength;
      if (w.stuckSince !== undefined && now - w.stuckSince >= this.#timeoutMs) {
        this.#watched.delete(w);
        this.#onReset();
        w.reset();
      }
    }
    if (this.#watched.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}
