// gRPC clients (HTTP/2, as an agent connects) and a fleet of watch streams.
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { Compression } from "@connectrpc/connect/protocol";
import { ClusterService, type WatchDeploymentChangesResponse } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { ADMIN_TOKEN } from "./ctrl-process.ts";
import { now } from "./util.ts";

export type ClusterClient = Client<typeof ClusterService>;

/** One client per HTTP/2 connection (each transport owns one session). */
export function clusterClient(baseUrl: string, options: { acceptCompression?: Compression[] } = {}): ClusterClient {
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${ADMIN_TOKEN}`);
    return next(req);
  };
  return createClient(ClusterService, createGrpcTransport({ baseUrl, interceptors: [auth], ...options }));
}

export interface WatchStream {
  index: number;
  messages: number;
  events: number;
  /** Last `version` received. */
  version: number;
  error: unknown;
}

/**
 * `count` WatchDeploymentChanges streams on one region, spread round-robin over
 * `connections` HTTP/2 connections, each reading continuously. `onMessage` sees every
 * response with its receive time.
 */
export class WatchFleet {
  readonly streams: WatchStream[] = [];
  readonly #abort = new AbortController();
  readonly #loops: Promise<void>[] = [];

  constructor(
    baseUrl: string,
    region: string,
    count: number,
    options: {
      connections: number;
      versionLastSeen?: number;
      onMessage?: (stream: WatchStream, res: WatchDeploymentChangesResponse, receivedAt: number) => void;
    },
  ) {
    const clients = Array.from({ length: Math.max(1, Math.min(options.connections, count)) }, () => clusterClient(baseUrl));
    for (let i = 0; i < count; i++) {
      const stream: WatchStream = { index: i, messages: 0, events: 0, version: -1, error: undefined };
      this.streams.push(stream);
      const client = clients[i % clients.length]!;
      const request = { region, versionLastSeen: options.versionLastSeen === undefined ? undefined : BigInt(options.versionLastSeen) };
      this.#loops.push(
        (async () => {
          try {
            for await (const res of client.watchDeploymentChanges(request, { signal: this.#abort.signal })) {
              const receivedAt = now();
              stream.messages++;
              stream.events += res.events.length;
              stream.version = Number(res.version);
              options.onMessage?.(stream, res, receivedAt);
            }
          } catch (error) {
            if (!this.#abort.signal.aborted) stream.error = error;
          }
        })(),
      );
    }
  }

  get errors(): WatchStream[] {
    return this.streams.filter((s) => s.error !== undefined);
  }

  /** Streams whose cursor has not reached `version`. */
  behind(version: number): number {
    return this.streams.filter((s) => s.version < version).length;
  }

  async close(): Promise<void> {
    this.#abort.abort();
    await Promise.all(this.#loops);
  }
}
