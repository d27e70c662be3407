// SyncDesiredState read the lean way: raw HTTP/2, gRPC framing, inflating, and a walk over the
// wire format that counts each batch's resources without decoding them (an agent can keep
// a resource's encoding as it is). connect-node's client decodes every DesiredResource
// (~5–9 µs each) in the process that shares 2 cores with ctrl and the database; with it the
// benchmark would time its own client more than ctrl. A real agent reads on its own machine.
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import http2 from "node:http2";
import { gunzipSync, zstdDecompressSync } from "node:zlib";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { ClusterService, SnapshotCompleteSchema, SyncDesiredStateRequestSchema, type SnapshotComplete } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { ADMIN_TOKEN } from "./ctrl-process.ts";

export interface LeanSyncResult {
  /** Resources in all batches. */
  resources: number;
  /** Response messages, the complete marker included. */
  messages: number;
  /** Bytes of the messages as they came (compressed if they were), framing included; unknown to a connect-node client. */
  wireBytes?: number;
  complete: SnapshotComplete | undefined;
}

/** What the agent asks ctrl for (its transport's acceptCompression), in its order. */
export const AGENT_ACCEPT_ENCODING = "zstd,gzip";

/** SyncDesiredState calls on one HTTP/2 connection, accepting what the agent accepts unless told. */
export class LeanSyncClient {
  readonly #session: http2.ClientHttp2Session;

  /** `ca`: the CA to trust for an https URL. */
  constructor(baseUrl: string, ca?: Buffer) {
    this.#session = http2.connect(baseUrl, { ca });
    this.#session.on("error", () => {});
  }

  /**
   * `token`: the admin token unless given (a region's agent token gets its secret values'
   * seals); `accept`: the grpc-accept-encoding to send (the agent's list unless given; "gzip" as
   * connect-node's default client; "identity" for the messages as they are); `withSecretEnvSeals`:
   * ask, as an agent that holds no value does, for the pages with the values' seals.
   */
  async sync(
    region: string,
    token = ADMIN_TOKEN,
    { accept = AGENT_ACCEPT_ENCODING, withSecretEnvSeals = false }: { accept?: string; withSecretEnvSeals?: boolean } = {},
  ): Promise<LeanSyncResult> {
    const call = this.#session.request({
      ":method": "POST",
      ":path": `/${ClusterService.typeName}/${ClusterService.method.syncDesiredState.name}`,
      "content-type": "application/grpc",
      "grpc-accept-encoding": accept,
      te: "trailers",
      authorization: `Bearer ${token}`,
    });
    const body = toBinary(SyncDesiredStateRequestSchema, create(SyncDesiredStateRequestSchema, { region, withSecretEnvSeals }));
    call.end(encodeEnvelope(0, body));
    let status: string | undefined;
    let statusMessage: string | undefined;
    call.on("trailers", (trailers) => {
      status = trailers["grpc-status"] as string | undefined;
      statusMessage = trailers["grpc-message"] as string | undefined;
    });
    const result: LeanSyncResult = { resources: 0, messages: 0, wireBytes: 0, complete: undefined };
    let encoding: string | undefined;
    call.on("response", (headers) => {
      encoding = headers["grpc-encoding"] as string | undefined;
    });
    const frames = new FrameReader();
    for await (const chunk of call) {
      result.wireBytes! += (chunk as Buffer).length;
      for (const [compressed, payload] of frames.push(chunk as Buffer)) {
        result.messages++;
        readResponse(compressed ? (encoding === "zstd" ? zstdDecompressSync(payload) : gunzipSync(payload)) : payload, result);
      }
    }
    if (status !== "0") throw new Error(`SyncDesiredState: grpc-status ${status}: ${statusMessage}`);
    if (frames.pending > 0) throw new Error(`SyncDesiredState: ${frames.pending} bytes of a partial message at the end`);
    return result;
  }

  close(): void {
    this.#session.close();
  }
}

/** gRPC length-prefixed messages out of a byte stream. */
class FrameReader {
  #chunks: Buffer[] = [];
  pending = 0;

  /** The complete messages (compressed flag, payload) that `chunk` finishes. */
  push(chunk: Buffer): [boolean, Buffer][] {
    this.#chunks.push(chunk);
    this.pending += chunk.length;
    const out: [boolean, Buffer][] = [];
    while (this.pending >= 5) {
      if (this.#chunks[0]!.length < 5) this.#chunks = [Buffer.concat(this.#chunks)];
      const length = this.#chunks[0]!.readUInt32BE(1);
      if (this.pending < 5 + length) break;
      // Concatenate only once a whole message has arrived.
      const data = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks);
      out.push([data[0] === 1, data.subarray(5, 5 + length)]);
      const rest = data.subarray(5 + length);
      this.#chunks = rest.length > 0 ? [rest] : [];
      this.pending = rest.length;
    }
    return out;
  }
}

/** Counts a SyncDesiredStateResponse's batch (field 1) or decodes its complete marker (field 2). */
function readResponse(bytes: Uint8Array, result: LeanSyncResult): void {
  const response = new BinaryReader(bytes);
  while (response.pos < response.len) {
    const [field, wireType] = response.tag();
    if (field === 1 && wireType === WireType.LengthDelimited) {
      const resources = new BinaryReader(response.bytes());
      while (resources.pos < resources.len) {
        const [batchField, batchWireType] = resources.tag();
        if (batchField === 1 && batchWireType === WireType.LengthDelimited) result.resources++;
        resources.skip(batchWireType, batchField);
      }
    } else if (field === 2 && wireType === WireType.LengthDelimited) {
      result.complete = fromBinary(SnapshotCompleteSchema, response.bytes());
    } else response.skip(wireType, field);
  }
}
