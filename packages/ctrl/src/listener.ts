// One TCP port for HTTP/2 cleartext (prior knowledge: gRPC, `buf curl --http2-prior-knowledge`)
// and HTTP/1.1 (Connect, gRPC-Web, curl, /healthz, /metrics): the first bytes decide. With
// TLS (tls.ts), ALPN decides instead.
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import type tls from "node:tls";
import {
  boundSession,
  DEFAULT_CONNECTION_BOUNDS,
  http1ServerOptions,
  http2ServerOptions,
  type BoundReason,
  type ConnectionBounds,
} from "./connection-bounds.ts";

// Every HTTP/2 connection starts with this preface; no HTTP/1 method starts with "PRI".
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

type Handler = (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse) => void;

export interface DualListener {
  address: net.AddressInfo;
  /** Stops accepting; asks HTTP/2 peers to go away (GOAWAY) and closes idle HTTP/1 sockets. */
  drain(): void;
  /** Destroys whatever is still open. */
  destroy(): void;
  closed: Promise<void>;
}

/** Terminates TLS on accepted connections (tls.ts). */
export interface SecureTransport {
  /** Registers where connections go once secured (ALPN tells h2 from HTTP/1.1). */
  onSecured(handler: (socket: tls.TLSSocket) => void): void;
  /** Starts the handshake on an accepted connection; it times out on its own. */
  accept(socket: net.Socket): void;
}

export async function listenDual(
  host: string,
  port: number,
  handler: Handler,
  bounds: ConnectionBounds = DEFAULT_CONNECTION_BOUNDS,
  onBound: (reason: BoundReason | "first_bytes") => void = () => {},
  secure?: SecureTransport,
): Promise<DualListener> {
  const h1 = http.createServer(http1ServerOptions(bounds), handler as http.RequestListener);
  const h2 = http2.createServer(http2ServerOptions(bounds), handler as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void);
  const sessions = new Set<http2.ServerHttp2Session>();
  h2.on("session", (session) => {
    boundSession(session, bounds, onBound);
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  const sockets = new Set<net.Socket>();
  secure?.onSecured((socket) => (socket.alpnProtocol === "h2" ? h2 : h1).emit("connection", socket));
  // No Nagle: streams write small messages; with Nagle they stall ~40 ms each on delayed ACKs.
  const server = net.createServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    if (secure) return secure.accept(socket);
    // Peek in paused mode: what is read is put back with unshift() before the socket is
    // handed over, and both servers take buffered bytes first (HTTP/2 then reads the
    // native handle, with no JavaScript in between on the hot path).
    let head = Buffer.alloc(0);
    // A connection that never says which protocol it speaks would otherwise be held forever.
    const firstBytes = () => {
      onBound("first_bytes");
      socket.destroy();
    };
    socket.setTimeout(bounds.firstRequestTimeoutMs, firstBytes);
    const onReadable = () => {
      const chunk: Buffer | null = socket.read();
      if (chunk === null) return;
      head = Buffer.concat([head, chunk]);
      const n = Math.min(head.length, H2_PREFACE.length);
      const isH2 = head.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (isH2 && head.length < H2_PREFACE.length) return; // need more bytes to decide
      socket.off("readable", onReadable);
      // (The listener too: left, it would end and count as first_bytes every HTTP/1.1 socket
      // that the server's keep-alive timeout ends later.)
      socket.setTimeout(0);
      socket.off("timeout", firstBytes);
      socket.unshift(head);
      if (isH2) {
        h2.emit("connection", socket);
      } else {
        h1.emit("connection", socket);
        socket.resume(); // peeking left the socket paused; the HTTP/1 parser reads 'data'
      }
    };
    socket.on("readable", onReadable);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  // The HTTP/1 server never listens itself; this starts its header and request timeouts' checks.
  h1.emit("listening");
  const closed = new Promise<void>((resolve) => server.once("close", () => resolve()));
  return {
    address: server.address() as net.AddressInfo,
    closed,
    drain() {
      server.close();
      h1.close(() => {}); // stops the timeouts' checks ("not running" is expected)
      for (const session of sessions) session.close();
      h1.closeIdleConnections();
    },
    destroy() {
      for (const session of sessions) session.destroy();
      for (const socket of sockets) socket.destroy();
    },
  };
}
