// Connection bounds: idle and half-open connections closed, streams per connection capped,
// rapid resets and ping floods end the connection, HTTP/1.1 header, request and keep-alive timeouts.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { DEFAULT_CONNECTION_BOUNDS, type ConnectionBounds } from "../src/connection-bounds.ts";
import { listenDual, type DualListener } from "../src/listener.ts";

const BOUNDS: ConnectionBounds = {
  ...DEFAULT_CONNECTION_BOUNDS,
  firstRequestTimeoutMs: 300,
  idleTimeoutMs: 600,
  maxConcurrentStreams: 7,
  maxResetsPerSecond: 50,
  maxPingsPerSecond: 5,
  headersTimeoutMs: 400,
  requestTimeoutMs: 800,
  keepAliveTimeoutMs: 1000,
};

/** Answers once the whole request body arrived. */
function echo(req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse): void {
  req.resume();
  req.on("end", () => res.end("ok"));
}

function goaway(session: http2.ClientHttp2Session): Promise<number> {
  return new Promise((resolve) => session.once("goaway", (code) => resolve(code)));
}

function closed(socket: net.Socket): Promise<string> {
  let received = "";
  socket.on("data", (chunk: Buffer) => (received += chunk.toString("latin1")));
  return new Promise((resolve) => socket.once("close", () => resolve(received)));
}

describe("connection bounds", () => {
  let listener: DualListener;
  const ended: string[] = [];
  let url: string;
  before(async () => {
    listener = await listenDual("127.0.0.1", 0, echo, BOUNDS, (reason) => ended.push(reason));
    url = `http://127.0.0.1:${listener.address.port}`;
  });
  after(() => {
    listener.drain();
    listener.destroy();
  });

  test("an HTTP/2 connection that sends the preface but no request is closed after the first-request timeout", async () => {
    const socket = net.connect(listener.address.port, "127.0.0.1");
    socket.on("error", () => {});
    socket.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    const started = Date.now();
    await closed(socket);
    assert.ok(Date.now() - started >= BOUNDS.firstRequestTimeoutMs - 50, "closed too early");
    assert.ok(ended.includes("idle"));
  });

  test("an HTTP/2 connection without open streams is asked to go away after the idle timeout; one with a stream is not", async () => {
    const session = http2.connect(url);
    session.on("error", () => {});
    const away = goaway(session);
    // A request that stays open across the idle timeout keeps the connection.
    const slow = session.request({ ":method": "POST", ":path": "/" });
    slow.on("error", () => {});
    await new Promise((resolve) => setTimeout(resolve, BOUNDS.idleTimeoutMs + 300));
    assert.ok(!session.closed && !session.destroyed);
    const idleSince = Date.now();
    slow.end();
    slow.resume();
    await new Promise((resolve) => slow.once("close", resolve));
    assert.equal(await away, http2.constants.NGHTTP2_NO_ERROR);
    assert.ok(Date.now() - idleSince >= BOUNDS.idleTimeoutMs - 50, "went away too early");
  });

  test("the concurrent streams per connection are capped", async () => {
    const session = http2.connect(url);
    session.on("error", () => {});
    await new Promise((resolve) => session.once("remoteSettings", resolve));
    assert.equal(session.remoteSettings.maxConcurrentStreams, BOUNDS.maxConcurrentStreams);
    session.destroy();
  });

  test("resetting streams faster than the cap ends the connection with ENHANCE_YOUR_CALM; a slower pace does not", async () => {
    const calm = http2.connect(url);
    calm.on("error", () => {});
    for (let i = 0; i < BOUNDS.maxResetsPerSecond / 2; i++) {
      const stream = calm.request({ ":method": "POST", ":path": "/" });
      stream.on("error", () => {});
      stream.close(http2.constants.NGHTTP2_CANCEL);
      await new Promise((resolve) => stream.once("close", resolve));
    }
    assert.ok(!calm.closed && !calm.destroyed);
    calm.destroy();

    const rapid = http2.connect(url);
    rapid.on("error", () => {});
    const away = goaway(rapid);
    for (let i = 0; i < BOUNDS.maxResetsPerSecond * 4 && !rapid.closed && !rapid.destroyed; i++) {
      const stream = rapid.request({ ":method": "POST", ":path": "/" });
      stream.on("error", () => {});
      stream.close(http2.constants.NGHTTP2_CANCEL);
      await new Promise((resolve) => setImmediate(resolve));
    }
    assert.equal(await away, http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    assert.ok(ended.includes("resets"));
  });

  test("pings are answered; a ping flood ends the connection with ENHANCE_YOUR_CALM", async () => {
    const session = http2.connect(url);
    session.on("error", () => {});
    await new Promise((resolve) => session.once("connect", resolve));
    const rtt = await new Promise<number>((resolve, reject) => session.ping((error, duration) => (error ? reject(error) : resolve(duration))));
    assert.ok(rtt >= 0);
    const away = goaway(session);
    for (let i = 0; i < BOUNDS.maxPingsPerSecond * 3 && !session.closed && !session.destroyed; i++) {
      try {
        session.ping(() => {});
      } catch {
        break; // too many outstanding on the client side: the flood is sent
      }
    }
    assert.equal(await away, http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
    assert.ok(ended.includes("pings"));
  });

  test("HTTP/1.1: headers that trickle in are cut off after the headers timeout", async () => {
    const socket = net.connect(listener.address.port, "127.0.0.1");
    socket.on("error", () => {});
    socket.write("POST / HTTP/1.1\r\nHost: x\r\n");
    const timer = setInterval(() => socket.write("X-Slow: 1\r\n"), 100);
    const started = Date.now();
    const received = await closed(socket);
    clearInterval(timer);
    assert.match(received, /^HTTP\/1\.1 408/);
    assert.ok(Date.now() - started >= BOUNDS.headersTimeoutMs - 50, "closed too early");
  });

  test("HTTP/1.1: a body that never finishes is cut off after the request timeout", async () => {
    const socket = net.connect(listener.address.port, "127.0.0.1");
    socket.on("error", () => {});
    socket.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n");
    const timer = setInterval(() => socket.write("x"), 100);
    const started = Date.now();
    const received = await closed(socket);
    clearInterval(timer);
    assert.match(received, /^HTTP\/1\.1 408/);
    assert.ok(Date.now() - started >= BOUNDS.requestTimeoutMs - 50, "closed too early");
  });

  test("HTTP/1.1: a kept-alive connection idle past the keep-alive timeout is closed, as its Keep-Alive header announces", async () => {
    const socket = net.connect(listener.address.port, "127.0.0.1");
    socket.on("error", () => {});
    const received = closed(socket);
    socket.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
    const answered = Date.now();
    const text = await received;
    assert.match(text, /^HTTP\/1\.1 200/);
    assert.match(text, new RegExp(`Keep-Alive: timeout=${Math.floor(BOUNDS.keepAliveTimeoutMs / 1000)}\r\n`, "i"));
    // Node closes 1 s after the announced timeout (its buffer for clients' clocks); the rest is room for a loaded machine.
    const idleMs = Date.now() - answered;
    assert.ok(idleMs >= BOUNDS.keepAliveTimeoutMs - 50 && idleMs < BOUNDS.keepAliveTimeoutMs + 5000, `closed after ${idleMs} ms`);
  });
});
