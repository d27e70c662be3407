// Malformed requests for every RPC of a set of services, in every protocol ctrl serves
// (Connect unary and streaming, proto and JSON; gRPC; gRPC-Web) over HTTP/1.1 and HTTP/2,
// each a mutation of a valid body: random bytes, truncations, flipped bytes, lying length
// prefixes, oversized varints, nested or broken JSON. Deterministic for a seed.
import http from "node:http";
import http2 from "node:http2";
import { create, toBinary, toJsonString, type DescService } from "@bufbuild/protobuf";

export interface FuzzRequest {
  http2: boolean;
  path: string;
  contentType: string;
  body: Buffer;
}

/** A small deterministic PRNG (mulberry32). */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function envelope(data: Buffer, flags = 0, length = data.length): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(length >>> 0, 1);
  return Buffer.concat([head, data]);
}

/** Binary bodies that are not the message they claim to be. */
function binaryMutations(valid: Buffer, next: () => number): Buffer[] {
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(next() * 256)));
  const flipped = Buffer.from(valid.length > 0 ? valid : Buffer.from([0x0a, 0x01, 0x61]));
  flipped[Math.floor(next() * flipped.length)]! ^= 0xff;
  return [
    bytes(1 + Math.floor(next() * 64)),
    bytes(1024 + Math.floor(next() * 8192)),
    valid.subarray(0, Math.max(0, valid.length - 1)),
    flipped,
    Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), // field 1, length 4 GiB
    Buffer.from([0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), // an 11-byte varint
    Buffer.from([0x0f]), // wire type 7
    Buffer.concat(Array.from({ length: 200 }, () => Buffer.from([0x12, 0x00]))), // many empty fields
  ];
}

/** JSON bodies that are not the message they claim to be. */
function jsonMutations(valid: string, next: () => number): Buffer[] {
  return [
    "{",
    "[".repeat(5000),
    `{"region": ${"[".repeat(2000)}}`,
    `{"region": "${"x".repeat(64 * 1024)}"}`,
    '{"region": 5, "version": "not a number", "unknownField": {}}',
    valid.slice(0, Math.floor(next() * valid.length)),
    "\u0000\uffff",
    "null",
  ].map((text) => Buffer.from(text));
}

/**
 * About 26 malformed requests per method, protocol and transport (gRPC on HTTP/2 only): for
 * the services given, several thousand requests in all.
 */
export function* fuzzRequests(services: readonly DescService[], seed = 1): Generator<FuzzRequest> {
  const next = random(seed);
  for (const service of services) {
    for (const method of service.methods) {
      const path = `/${service.typeName}/${method.name}`;
      const valid = Buffer.from(toBinary(method.input, create(method.input)));
      const validJson = toJsonString(method.input, create(method.input));
      const binary = binaryMutations(valid, next);
      const json = jsonMutations(validJson, next);
      const streaming = method.methodKind !== "unary";
      for (const h2 of [false, true]) {
        for (const body of binary) {
          yield streaming
            ? { http2: h2, path, contentType: "application/connect+proto", body: envelope(body) }
            : { http2: h2, path, contentType: "application/proto", body };
          yield { http2: h2, path, contentType: "application/grpc-web+proto", body: envelope(body, next() < 0.5 ? 0 : 1) };
          if (h2) yield { http2: true, path, contentType: "application/grpc", body: envelope(body, 0, next() < 0.5 ? body.length : body.length + 1000) };
        }
        for (const body of json) {
          yield streaming
            ? { http2: h2, path, contentType: "application/connect+json", body: envelope(body) }
            : { http2: h2, path, contentType: "application/json", body };
        }
      }
    }
  }
}

/**
 * Sends `requests` to `url` with `token`, `concurrency` at a time (HTTP/2 on one session,
 * HTTP/1.1 with keep-alive), each given up after `timeoutMs` (a mutation may still parse as a
 * request for a stream that stays open); resolves with the count by HTTP status (0: no answer).
 */
export async function sendFuzz(
  url: string,
  token: string,
  requests: Iterable<FuzzRequest>,
  concurrency = 16,
  timeoutMs = 10_000,
): Promise<Map<number, number>> {
  const outcomes = new Map<number, number>();
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  let session: http2.ClientHttp2Session | undefined;
  const h2 = () => {
    if (!session || session.closed || session.destroyed) {
      session = http2.connect(url);
      session.on("error", () => {});
    }
    return session;
  };
  const one = (request: FuzzRequest) =>
    new Promise<number>((resolve) => {
      const headers = { "content-type": request.contentType, authorization: `Bearer ${token}`, te: "trailers" };
      if (request.http2) {
        const stream = h2().request({ ":method": "POST", ":path": request.path, ...headers });
        let status = 0;
        stream.on("response", (h) => (status = Number(h[":status"])));
        stream.on("data", () => {});
        stream.on("error", () => {});
        stream.on("close", () => resolve(status));
        stream.setTimeout(timeoutMs, () => stream.close());
        stream.end(request.body);
      } else {
        const req = http.request(`${url}${request.path}`, { method: "POST", agent, headers, timeout: timeoutMs }, (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
          res.on("error", () => resolve(res.statusCode ?? 0));
        });
        req.on("error", () => resolve(0));
        req.on("timeout", () => req.destroy());
        req.end(request.body);
      }
    });
  const iterator = requests[Symbol.iterator]();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let r = iterator.next(); !r.done; r = iterator.next()) {
        const status = await one(r.value);
        outcomes.set(status, (outcomes.get(status) ?? 0) + 1);
      }
    }),
  );
  agent.destroy();
  session?.close();
  return outcomes;
}
