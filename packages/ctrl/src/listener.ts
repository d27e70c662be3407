// One TCP port for HTTP/2 cleartext (prior knowledge: gRPC, `buf curl --http2-prior-knowledge`)
// and HTTP/1.1 (Connect, gRPC-Web, curl, /healthz, /metrics): the first bytes decide.
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { Duplex } from "node:stream";

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

export async function listenDual(host: string, port: number, handler: Handler): Promise<DualListener> {
  const h1 = http.createServer({ keepAliveTimeout: 5000 }, handler as http.RequestListener);
  const h2 = http2.createServer({}, handler as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void);
  const sessions = new Set<http2.ServerHttp2Session>();
  h2.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  const sockets = new Set<net.Socket>();
  // No Nagle: HTTP/2 writes small frames, and its JS-wrapped sockets never get TCP_NODELAY
  // from Node itself; with Nagle, streams stall ~40 ms per message on delayed ACKs.
  const server = net.createServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const n = Math.min(head.length, H2_PREFACE.length);
      const isH2 = head.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (isH2 && head.length < H2_PREFACE.length) return; // need more bytes to decide
      socket.off("data", onData);
      if (isH2) {
        h2.emit("connection", replay(socket, head));
      } else {
        socket.pause();
        socket.unshift(head);
        h1.emit("connection", socket);
        socket.resume();
      }
    };
    socket.on("data", onData);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const closed = new Promise<void>((resolve) => server.once("close", () => resolve()));
  return {
    address: server.address() as net.AddressInfo,
    closed,
    drain() {
      server.close();
      for (const session of sessions) session.close();
      h1.closeIdleConnections();
    },
    destroy() {
      for (const session of sessions) session.destroy();
      for (const socket of sockets) socket.destroy();
    },
  };
}

/**
 * The socket as a Duplex that first yields the bytes already read. Node's HTTP/2 server
 * reads a net.Socket's native handle directly, so bytes unshifted into its JS buffer would
 * be lost; a plain Duplex makes it read through JavaScript instead.
 */
function replay(socket: net.Socket, head: Buffer): Duplex {
  const duplex = new Duplex({
    read: () => void socket.resume(),
    write: (chunk, encoding, callback) => void socket.write(chunk, encoding, callback),
    // Frames queued while a write is in flight go out as one socket write.
    writev: (chunks, callback) => {
      socket.cork();
      chunks.forEach(({ chunk, encoding }, i) => socket.write(chunk, encoding, i === chunks.length - 1 ? callback : undefined));
      socket.uncork();
    },
    final: (callback) => void socket.end(callback),
    destroy: (error, callback) => {
      socket.destroy(error ?? undefined);
      callback(error);
    },
  });
  duplex.push(head);
  socket.on("data", (chunk) => {
    if (!duplex.push(chunk)) socket.pause();
  });
  socket.once("end", () => duplex.push(null));
  socket.once("close", () => duplex.destroy());
  socket.once("error", (error) => duplex.destroy(error));
  return duplex;
}
