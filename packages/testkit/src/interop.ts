// Second implementations for interop tests: the real `buf curl` CLI and @grpc/grpc-js.
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import {
  fromBinary,
  toBinary,
  type DescMessage,
  type DescMethodStreaming,
  type DescMethodUnary,
  type MessageInitShape,
  type MessageShape,
  create,
} from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { ADMIN_TOKEN } from "./ctrl.ts";
import { connect as connectH2 } from "node:http2";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";

/** The admin credentials as a `buf curl -H` argument. */
export const AUTH = `Authorization: Bearer ${ADMIN_TOKEN}`;

/** buf curl flags per protocol: its default is Connect; gRPC needs HTTP/2, here without TLS. */
export const BUF_PROTOCOLS: Record<string, string[]> = {
  connect: ["--http2-prior-knowledge"],
  grpc: ["--protocol", "grpc", "--http2-prior-knowledge"],
  grpcweb: ["--protocol", "grpcweb"],
};

const BUF = fileURLToPath(new URL("../../../node_modules/.bin/buf", import.meta.url));

export interface BufCurlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `buf curl` with the given arguments (no schema: it uses ctrl's reflection). A stream ends
 * when `until` holds for the output so far (buf curl is stopped), or after `timeoutMs`.
 */
export async function bufCurl(args: string[], timeoutMs = 20_000, until?: (stdout: string) => boolean): Promise<BufCurlResult> {
  const stop = new AbortController();
  const run = promisify(execFile)(BUF, ["curl", ...args], { timeout: timeoutMs, signal: stop.signal });
  let output = "";
  if (until) run.child.stdout?.on("data", (chunk: string) => until((output += chunk)) && stop.abort());
  try {
    const { stdout, stderr } = await run;
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : 1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

/** Parses buf curl's output: a sequence of pretty-printed JSON documents. */
export function jsonDocuments(text: string): unknown[] {
  const docs: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === "\\") i++;
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') inString = true;
    else if (ch === "{") {
      if (depth++ === 0) start = i;
    } else if (ch === "}" && --depth === 0) docs.push(JSON.parse(text.slice(start, i + 1)));
  }
  return docs;
}

function grpcTarget(url: string): string {
  return new URL(url).host;
}

const serializer =
  <D extends DescMessage>(desc: D) =>
  (m: MessageShape<D>) =>
    Buffer.from(toBinary(desc, m));
const deserializer =
  <D extends DescMessage>(desc: D) =>
  (b: Buffer) =>
    fromBinary(desc, b);

/** A unary call through @grpc/grpc-js with protobuf-es messages. */
export function grpcJsUnary<I extends DescMessage, O extends DescMessage>(
  url: string,
  method: DescMethodUnary<I, O>,
  input: MessageInitShape<I>,
  token?: string,
  credentials = grpc.credentials.createInsecure(),
): Promise<MessageShape<O>> {
  const client = new grpc.Client(grpcTarget(url), credentials);
  const metadata = new grpc.Metadata();
  if (token) metadata.set("authorization", `Bearer ${token}`);
  return new Promise<MessageShape<O>>((resolve, reject) => {
    client.makeUnaryRequest(
      `/${method.parent.typeName}/${method.name}`,
      serializer(method.input),
      deserializer(method.output),
      create(method.input, input),
      metadata,
      (error, value) => {
        client.close();
        if (error) reject(error);
        else resolve(value!);
      },
    );
  });
}

/** A server-streaming call through @grpc/grpc-js; the caller reads and cancels it. */
export function grpcJsServerStream<I extends DescMessage, O extends DescMessage>(
  url: string,
  method: DescMethodStreaming<I, O>,
  input: MessageInitShape<I>,
  token?: string,
  credentials = grpc.credentials.createInsecure(),
): { stream: grpc.ClientReadableStream<MessageShape<O>>; close(): void } {
  const client = new grpc.Client(grpcTarget(url), credentials);
  const metadata = new grpc.Metadata();
  if (token) metadata.set("authorization", `Bearer ${token}`);
  const stream = client.makeServerStreamRequest(
    `/${method.parent.typeName}/${method.name}`,
    serializer(method.input),
    deserializer(method.output),
    create(method.input, input),
    metadata,
  );
  return {
    stream,
    close() {
      stream.cancel();
      client.close();
    },
  };
}

/**
 * A gRPC call over a bare HTTP/2 stream whose reading the test controls (pause/resume):
 * unlike grpc-js and connect-node, which read eagerly into memory, a paused stream here
 * really stops the transport, as a stuck consumer would.
 */
export function rawGrpcCall<I extends DescMessage>(
  url: string,
  method: DescMethodStreaming<I, DescMessage> | DescMethodUnary<I, DescMessage>,
  input: MessageInitShape<I>,
  token: string,
  /** The client's HTTP/2 settings, e.g. a tiny initialWindowSize for a client that never reads. */
  settings?: import("node:http2").Settings,
  /** The same enveloped request as Connect streaming or gRPC-Web: served by connect's path, not ctrl's direct gRPC one. */
  contentType: "application/grpc" | "application/connect+proto" | "application/grpc-web+proto" = "application/grpc",
): { stream: import("node:http2").ClientHttp2Stream; result: Promise<{ grpcStatus?: string; grpcMessage?: string; rstCode: number }>; close(): void } {
  const session = connectH2(url, { settings });
  session.on("error", () => {});
  const stream = session.request({
    ":method": "POST",
    ":path": `/${method.parent.typeName}/${method.name}`,
    "content-type": contentType,
    te: "trailers",
    authorization: `Bearer ${token}`,
  });
  const body = toBinary(method.input, create(method.input, input));
  stream.end(encodeEnvelope(0, body));
  const result = new Promise<{ grpcStatus?: string; grpcMessage?: string; rstCode: number }>((resolve) => {
    let trailers: Record<string, unknown> = {};
    stream.on("trailers", (t) => (trailers = t));
    stream.on("error", () => {});
    stream.on("close", () =>
      resolve({
        grpcStatus: trailers["grpc-status"] as string | undefined,
        grpcMessage: trailers["grpc-message"] === undefined ? undefined : decodeURIComponent(String(trailers["grpc-message"])),
        rstCode: stream.rstCode ?? 0,
      }),
    );
  });
  return { stream, result, close: () => session.destroy() };
}

/**
 * `count` SyncDesiredState calls of `region` by clients that never read (a 1 KiB HTTP/2 window
 * they never open), once ctrl has answered each; `close()` ends them (their connections go).
 */
export async function stalledSyncs(url: string, region: string, token: string, count: number): Promise<{ close(): void }> {
  const calls = Array.from({ length: count }, () => rawGrpcCall(url, ClusterService.method.syncDesiredState, { region }, token, { initialWindowSize: 1024 }));
  await Promise.all(calls.map(({ stream }) => new Promise((resolve) => stream.once("response", resolve))));
  return {
    close: () => {
      for (const call of calls) call.close();
    },
  };
}
