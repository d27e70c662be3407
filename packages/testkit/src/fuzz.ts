// Malformed and oversized requests for every RPC of a set of services, in every protocol ctrl
// serves (Connect unary and streaming, proto and JSON; gRPC; gRPC-Web) over HTTP/1.1 and
// HTTP/2, each a mutation of a valid body: random bytes, truncations, flipped bytes, lying
// length prefixes, oversized varints, nested or broken JSON; and the inputs that cost a decoder
// most: 1 MiB strings, 100,000 elements of a repeated field, 100,000 unknown fields, 5,000
// nested unknown groups, a compressed body that inflates to 4 MiB, JSON nested 100,000 deep.
// Deterministic for a seed.
import http from "node:http";
import http2 from "node:http2";
import { gzipSync } from "node:zlib";
import { create, ScalarType, toBinary, toJsonString, type DescField, type DescMessage, type DescService, type Message } from "@bufbuild/protobuf";

export interface FuzzRequest {
  http2: boolean;
  path: string;
  contentType: string;
  body: Buffer;
  /** The mutation's class (e.g. "repeated-100k"), what bench/diag/decode-cost.ts reports by. */
  kind: string;
  /** The body's compression (gzip), named in the protocol's header. */
  encoding?: "gzip";
}

interface Mutation {
  kind: string;
  body: Buffer;
  encoding?: "gzip";
}

/** The sizes of the costly inputs. */
export const HEAVY = { elements: 100_000, stringBytes: 1024 * 1024, groupDepth: 5_000, jsonDepth: 100_000, inflatedBytes: 4 * 1024 * 1024 } as const;

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

/** The first field of `desc` (breadth first, a few levels deep) that `wanted` accepts, as a path. */
function findField(desc: DescMessage, wanted: (field: DescField) => boolean): DescField[] | undefined {
  const queue: DescField[][] = desc.fields.map((field) => [field]);
  for (let path = queue.shift(); path; path = queue.shift()) {
    const field = path.at(-1)!;
    if (wanted(field)) return path;
    if (field.fieldKind === "message" && path.length < 3 && !field.message.typeName.startsWith("google.protobuf.")) {
      queue.push(...field.message.fields.map((f) => [...path, f]));
    }
  }
  return undefined;
}

/** A message of `desc` with `value` at `path` (the messages on the way created). */
function withValue(desc: DescMessage, path: DescField[], value: unknown): Message {
  const root = create(desc) as Message & Record<string, unknown>;
  let message = root;
  for (const field of path.slice(0, -1)) {
    if (field.fieldKind !== "message") break;
    const child = create(field.message) as Message & Record<string, unknown>;
    message[field.localName] = child;
    message = child;
  }
  message[path.at(-1)!.localName] = value;
  return root;
}

/** `count` unknown fields (number 1000) of one byte's value each. */
const unknownFields = (count: number) => Buffer.alloc(count * 3, Buffer.from([0xc0, 0x3e, 0x00]));

/** The bodies that do not depend on the method, built once. */
let shared: { unknown: Buffer; groups: Buffer; inflating: Buffer; keys: string } | undefined;
function sharedBodies() {
  const groupStart = Buffer.from([0xc3, 0x3e]); // field 1000, wire type 3
  const groupEnd = Buffer.from([0xc4, 0x3e]);
  shared ??= {
    unknown: unknownFields(HEAVY.elements),
    groups: Buffer.concat([...Array(HEAVY.groupDepth).fill(groupStart), ...Array(HEAVY.groupDepth).fill(groupEnd)]),
    inflating: gzipSync(unknownFields(Math.floor(HEAVY.inflatedBytes / 3))),
    keys: `{${Array.from({ length: HEAVY.elements }, (_, i) => `"k${i}":0`).join(",")}}`,
  };
  return shared;
}

const heavyOf = new WeakMap<DescMessage, { kind: string; binary: Buffer; json: string }[]>();

/** The inputs that cost a decoder most, as a valid message of `desc` where the schema allows (built once per type). */
function heavyMessages(desc: DescMessage): { kind: string; binary: Buffer; json: string }[] {
  let heavy = heavyOf.get(desc);
  if (!heavy) heavyOf.set(desc, (heavy = buildHeavyMessages(desc)));
  return heavy;
}

function buildHeavyMessages(desc: DescMessage): { kind: string; binary: Buffer; json: string }[] {
  const text = findField(desc, (f) => f.fieldKind === "scalar" && f.scalar === ScalarType.STRING);
  const list = findField(desc, (f) => f.fieldKind === "list");
  const messages: { kind: string; message: Message }[] = [];
  if (text) {
    messages.push({ kind: "string-1mb", message: withValue(desc, text, "x".repeat(HEAVY.stringBytes)) });
    messages.push({ kind: "string-multibyte", message: withValue(desc, text, "é".repeat(HEAVY.stringBytes / 2)) });
  }
  if (list) {
    const field = list.at(-1)! as DescField & { fieldKind: "list" };
    const element = () => (field.listKind === "message" ? create(field.message) : field.listKind === "enum" ? 0 : field.scalar === ScalarType.STRING ? "" : 0);
    messages.push({ kind: "repeated-100k", message: withValue(desc, list, Array.from({ length: HEAVY.elements }, element)) });
  }
  return messages.map(({ kind, message }) => ({ kind, binary: Buffer.from(toBinary(desc, message)), json: toJsonString(desc, message) }));
}

/** Binary bodies that are not the message they claim to be, or that cost its decoding most. */
function binaryMutations(desc: DescMessage, valid: Buffer, next: () => number): Mutation[] {
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(next() * 256)));
  const flipped = Buffer.from(valid.length > 0 ? valid : Buffer.from([0x0a, 0x01, 0x61]));
  flipped[Math.floor(next() * flipped.length)]! ^= 0xff;
  const { unknown, groups, inflating } = sharedBodies();
  return [
    { kind: "random-short", body: bytes(1 + Math.floor(next() * 64)) },
    { kind: "random-long", body: bytes(1024 + Math.floor(next() * 8192)) },
    { kind: "truncated", body: valid.subarray(0, Math.max(0, valid.length - 1)) },
    { kind: "flipped", body: flipped },
    { kind: "length-4gib", body: Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]) },
    { kind: "varint-11-bytes", body: Buffer.from([0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]) },
    { kind: "wire-type-7", body: Buffer.from([0x0f]) },
    { kind: "empty-fields", body: Buffer.concat(Array.from({ length: 200 }, () => Buffer.from([0x12, 0x00]))) },
    { kind: "unknown-100k", body: unknown },
    { kind: "groups-5k", body: groups },
    { kind: "gzip-inflates-4mb", body: inflating, encoding: "gzip" },
    ...heavyMessages(desc).map(({ kind, binary }) => ({ kind, body: binary })),
  ];
}

/** JSON bodies that are not the message they claim to be, or that cost its parsing most. */
function jsonMutations(desc: DescMessage, valid: string, next: () => number): Mutation[] {
  const first = desc.fields[0]?.jsonName ?? "region";
  return [
    { kind: "json-unclosed", body: "{" },
    { kind: "json-open-arrays", body: "[".repeat(5000) },
    { kind: "json-open-arrays-in-field", body: `{"region": ${"[".repeat(2000)}}` },
    { kind: "json-string-64k", body: `{"region": "${"x".repeat(64 * 1024)}"}` },
    { kind: "json-wrong-types", body: '{"region": 5, "version": "not a number", "unknownField": {}}' },
    { kind: "json-truncated", body: valid.slice(0, Math.floor(next() * valid.length)) },
    { kind: "json-control", body: "\u0000\uffff" },
    { kind: "json-null", body: "null" },
    { kind: "json-depth-100k", body: `{"${first}": ${"[".repeat(HEAVY.jsonDepth)}${"]".repeat(HEAVY.jsonDepth)}}` },
    { kind: "json-keys-100k", body: sharedBodies().keys },
    { kind: "json-escapes", body: `{"${first}": "${"\\u00e9".repeat(HEAVY.stringBytes / 6)}"}` },
    ...heavyMessages(desc).map(({ kind, json }) => ({ kind: `json-${kind}`, body: json })),
  ].map(({ kind, body }) => ({ kind, body: Buffer.from(body) }));
}

/**
 * About 25 malformed or oversized requests per method, protocol and transport (gRPC on HTTP/2
 * only): for the services given, several thousand requests in all.
 */
export function* fuzzRequests(services: readonly DescService[], seed = 1): Generator<FuzzRequest> {
  const next = random(seed);
  for (const service of services) {
    for (const method of service.methods) {
      const path = `/${service.typeName}/${method.name}`;
      const valid = Buffer.from(toBinary(method.input, create(method.input)));
      const validJson = toJsonString(method.input, create(method.input));
      const binary = binaryMutations(method.input, valid, next);
      const json = jsonMutations(method.input, validJson, next);
      const streaming = method.methodKind !== "unary";
      for (const h2 of [false, true]) {
        for (const { kind, body, encoding } of binary) {
          // A compressed body is enveloped with the compressed flag; a plain one, with it set at random (a lie).
          const flag = encoding ? 1 : 0;
          yield streaming
            ? { http2: h2, path, kind, encoding, contentType: "application/connect+proto", body: envelope(body, flag) }
            : { http2: h2, path, kind, encoding, contentType: "application/proto", body };
          yield { http2: h2, path, kind, encoding, contentType: "application/grpc-web+proto", body: envelope(body, encoding ? 1 : next() < 0.5 ? 0 : 1) };
          if (h2) {
            const length = encoding || next() < 0.5 ? body.length : body.length + 1000;
            yield { http2: true, path, kind, encoding, contentType: "application/grpc", body: envelope(body, flag, length) };
          }
        }
        for (const { kind, body } of json) {
          yield streaming
            ? { http2: h2, path, kind, contentType: "application/connect+json", body: envelope(body) }
            : { http2: h2, path, kind, contentType: "application/json", body };
        }
      }
    }
  }
}

/** The header that names a compressed body's encoding in its protocol. */
function encodingHeader(request: FuzzRequest): Record<string, string> {
  if (!request.encoding) return {};
  if (request.contentType.startsWith("application/grpc")) return { "grpc-encoding": request.encoding };
  return { [request.contentType.startsWith("application/connect+") ? "connect-content-encoding" : "content-encoding"]: request.encoding };
}

/**
 * Sends `requests` to `url` with `token`, `concurrency` at a time (HTTP/2 on one session,
 * HTTP/1.1 with keep-alive), each given up after `timeoutMs` (a mutation may still parse as a
 * request for a stream that stays open); resolves with the count by HTTP status (0: no answer).
 * `onUnanswered` hears why each request without an answer got none.
 */
export async function sendFuzz(
  url: string,
  token: string,
  requests: Iterable<FuzzRequest>,
  concurrency = 16,
  timeoutMs = 10_000,
  onUnanswered: (request: FuzzRequest, why: string) => void = () => {},
): Promise<Map<number, number>> {
  const outcomes = new Map<number, number>();
  // With a timeout of its own, the agent honours the server's `Keep-Alive: timeout=N` and drops an
  // idle socket 1 s before it (Agent#keepSocketAlive only ever lowers the agent's timeout; with
  // none, it keeps the socket until the server closes it, and a request sent on it just then gets
  // ECONNRESET). The HTTP/1.1 sockets sit idle while the HTTP/2 requests of the same method run.
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency, timeout: timeoutMs });
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
      const headers = { "content-type": request.contentType, authorization: `Bearer ${token}`, te: "trailers", ...encodingHeader(request) };
      if (request.http2) {
        const stream = h2().request({ ":method": "POST", ":path": request.path, ...headers });
        let status = 0;
        let why = "";
        stream.on("response", (h) => (status = Number(h[":status"])));
        stream.on("data", () => {});
        stream.on("error", (error: NodeJS.ErrnoException) => (why ||= `HTTP/2 ${error.code ?? error.message}`));
        stream.on("close", () => {
          if (status === 0) onUnanswered(request, why || `HTTP/2 stream closed without a response (RST_STREAM code ${stream.rstCode})`);
          resolve(status);
        });
        stream.setTimeout(timeoutMs, () => {
          why = `HTTP/2 no response within ${timeoutMs} ms`;
          stream.close();
        });
        stream.end(request.body);
      } else {
        const req = http.request(`${url}${request.path}`, { method: "POST", agent, headers, timeout: timeoutMs }, (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
          res.on("error", () => resolve(res.statusCode ?? 0));
        });
        let why = "";
        req.on("error", (error: NodeJS.ErrnoException) => {
          onUnanswered(request, why || `HTTP/1.1 ${error.code ?? error.message}`);
          resolve(0);
        });
        req.on("timeout", () => {
          why = `HTTP/1.1 no response within ${timeoutMs} ms`;
          req.destroy();
        });
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
