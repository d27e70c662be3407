// One port, two protocols: the first bytes decide, however the network splits them.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { DEFAULT_CONNECTION_BOUNDS } from "../src/connection-bounds.ts";
import { listenDual, type DualListener } from "../src/listener.ts";

/** Echoes the protocol version, method and body. */
function echo(req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse): void {
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (chunk: string) => (body += chunk));
  req.on("end", () => res.end(`${req.httpVersion} ${req.method} ${body}`));
}

/**
 * A proxy that delivers the first `slowBytes` bytes of each client connection one at a
 * time, 5 ms apart, then the rest as it comes: the server's reads see the first bytes split
 * across many segments.
 */
async function startTricklingProxy(port: number, slowBytes: number): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect({ port, host: "127.0.0.1", noDelay: true });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => s.destroy());
      s.once("close", () => sockets.delete(s));
    }
    upstream.pipe(client);
    client.once("close", () => upstream.destroy());
    upstream.once("close", () => client.destroy());
    let sent = 0;
    let chain = Promise.resolve();
    client.on("data", (chunk: Buffer) => {
      chain = chain.then(async () => {
        for (let i = 0; i < chunk.length; ) {
          const n = sent < slowBytes ? 1 : chunk.length - i;
          upstream.write(chunk.subarray(i, i + n));
          i += n;
          sent += n;
          if (sent <= slowBytes) await new Promise((resolve) => setTimeout(resolve, 5));
        }
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** One POST on an HTTP/2 session; resolves with the response body. */
function h2Request(session: http2.ClientHttp2Session, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ":method": "POST", ":path": "/" });
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (text += chunk));
    req.on("end", () => resolve(text));
    req.on("error", reject);
    req.end(body);
  });
}

async function h2Post(port: number, body: string): Promise<string> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  const failed = new Promise<never>((_, reject) => session.on("error", reject));
  try {
    return await Promise.race([h2Request(session, body), failed]);
  } finally {
    session.close();
  }
}

function h1Post(port: number, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/", agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolve(text));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("dual-protocol listener", () => {
  let listener: DualListener;
  before(async () => (listener = await listenDual("127.0.0.1", 0, echo, { ...DEFAULT_CONNECTION_BOUNDS, firstRequestTimeoutMs: 300 })));
  after(() => {
    listener.drain();
    listener.destroy();
  });

  test("serves HTTP/2 with prior knowledge and HTTP/1.1 on one port", async () => {
    assert.equal(await h2Post(listener.address.port, "two"), "2.0 POST two");
    assert.equal(await h1Post(listener.address.port, "one"), "1.1 POST one");
  });

  test("decides correctly when the first bytes arrive one at a time", async () => {
    // 30 bytes: the whole HTTP/2 preface (24) and more; "POST" shares its first letter with "PRI".
    const proxy = await startTricklingProxy(listener.address.port, 30);
    try {
      assert.equal(await h2Post(proxy.port, "slow two"), "2.0 POST slow two");
      assert.equal(await h1Post(proxy.port, "slow one"), "1.1 POST slow one");
    } finally {
      await proxy.close();
    }
  });

  test("a connection that sends nothing is closed after the first-bytes timeout; a quiet decided one is not", async () => {
    const silent = net.connect(listener.address.port, "127.0.0.1");
    silent.on("error", () => {});
    const started = Date.now();
    await new Promise<void>((resolve) => silent.once("close", () => resolve()));
    assert.ok(Date.now() - started >= 250, "closed too early");
    // An HTTP/2 session idle longer than the timeout after its first request still works.
    const session = http2.connect(`http://127.0.0.1:${listener.address.port}`);
    try {
      assert.equal(await h2Request(session, "first"), "2.0 POST first");
      await new Promise((resolve) => setTimeout(resolve, 600));
      assert.equal(await h2Request(session, "later"), "2.0 POST later");
    } finally {
      session.close();
    }
  });

  test("an HTTP/1.1 connection that its keep-alive timeout ends does not count as a first-bytes timeout", async () => {
    const bounds: string[] = [];
    const counted = await listenDual("127.0.0.1", 0, echo, { ...DEFAULT_CONNECTION_BOUNDS, firstRequestTimeoutMs: 300 }, (reason) => bounds.push(reason));
    const agent = new http.Agent({ keepAlive: true });
    try {
      const socket = await new Promise<net.Socket>((resolve, reject) => {
        const req = http.request({ host: "127.0.0.1", port: counted.address.port, method: "POST", path: "/", agent }, (res) => {
          res.resume();
          res.on("end", () => resolve(req.socket!));
        });
        req.on("error", reject);
        req.end("kept");
      });
      // The server ends the idle socket (keepAliveTimeout, 5 s, and Node's 1 s of grace).
      if (!socket.destroyed) await new Promise((resolve) => socket.once("close", resolve));
      assert.deepEqual(bounds, []);
    } finally {
      agent.destroy();
      counted.drain();
      counted.destroy();
    }
  });

  test("a connection that closes before deciding leaves the listener serving", async () => {
    const socket = net.connect(listener.address.port, "127.0.0.1");
    await new Promise<void>((resolve) => socket.once("connect", resolve));
    socket.end("PRI * HT");
    await new Promise<void>((resolve) => socket.once("close", () => resolve()));
    assert.equal(await h2Post(listener.address.port, "after"), "2.0 POST after");
  });
});
