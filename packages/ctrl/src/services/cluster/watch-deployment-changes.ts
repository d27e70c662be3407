// ClusterService.WatchDeploymentChanges: every change after the cursor, in version order,
// then live changes from the shared poller; bookmarks when idle.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { WatchDeploymentChangesResponseSchema, type WatchDeploymentChangesRequest } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { CONSUMER_TOO_SLOW, RESYNC_REQUIRED } from "@flotilla/runtime";
import type { Change, Store } from "@flotilla/store";
import { constants as h2 } from "node:http2";
import { resolveAuthorizedRegion } from "../../auth.ts";
import { directSendKey, sharedMessage } from "../../grpc-server-streaming.ts";
import { invalidArgument, reasonError } from "../../errors.ts";
import type { CtrlMetrics } from "../../metrics.ts";
import type { SendBudget } from "../../send-budget.ts";
import { FanOutMemo } from "../../streaming/fan-out-memo.ts";
import type { ChangePoller } from "../../streaming/poller.ts";
import { batchLength, Overflow, type BatchLimits, type Subscription } from "../../streaming/subscription.ts";
import * as validate from "../../validate.ts";
import type { StreamOptions } from "./options.ts";
import { secretDelivery } from "./secret-delivery.ts";
import { sendsVerbatim, withVerbatimField } from "./verbatim.ts";

export type NodeServerRequest = IncomingMessage | Http2ServerRequest;
type Response = MessageInitShape<typeof WatchDeploymentChangesResponseSchema>;

/** The Node request under an RPC, so a stream stuck on a full transport can be reset. */
export const nodeRequestKey = createContextKey<NodeServerRequest | undefined>(undefined, { description: "node request" });

export function resyncRequired(message: string, version: number): Error {
  return reasonError(Code.FailedPrecondition, RESYNC_REQUIRED, `${RESYNC_REQUIRED}: ${message}; run SyncDesiredState`, {
    version: String(version),
  });
}

export function watchDeploymentChanges(store: Store, poller: ChangePoller, metrics: CtrlMetrics, options: StreamOptions, sendBudget: SendBudget) {
  /** A live change's response, the same message for every stream it is fanned out to. */
  const liveResponses = new FanOutMemo<Change, Response>();
  const liveResponse = (change: Change): Response =>
    liveResponses.get(change, () =>
      sharedMessage(withVerbatimField(create(WatchDeploymentChangesResponseSchema, { version: BigInt(change.version) }), 1, [change.bytes])),
    );
  return async function* (req: WatchDeploymentChangesRequest, ctx: HandlerContext): AsyncIterable<Response> {
    validate.dnsLabel("region", req.region);
    const region = await resolveAuthorizedRegion(ctx, store.regions, req.region);
    const head = region.headVersion;
    let cursor = req.versionLastSeen === undefined ? head : Number(req.versionLastSeen);
    if (cursor < 0) throw invalidArgument("version_last_seen", "must not be negative");
    if (cursor > head) throw resyncRequired(`version_last_seen ${cursor} is ahead of region ${region.name}'s head ${head} (database restored?)`, head);

    const limits: BatchLimits = { count: options.watchBatchMax, bytes: options.messageBytesMax };
    const sub = poller.subscribe(region.id, region.name, cursor, head, options.watchBufferLimit);
    const streams = metrics.watchStreams.labels({ region: region.name });
    streams.inc();
    let resetTimer: NodeJS.Timeout | undefined;
    let lastProgress = Date.now();
    sub.onOverflow = () => {
      poller.unsubscribe(sub);
      metrics.watchEndedForLag.inc();
      // A client that still reads gets the error right after its next message. One that
      // reads nothing leaves the generator parked on a write, unable to throw: reset the
      // transport stream (HTTP/2 ENHANCE_YOUR_CALM, which gRPC clients read as RESOURCE_EXHAUSTED).
      const check = () => {
        const idle = Date.now() - lastProgress;
        if (idle >= options.overflowResetMs) resetTransport(ctx.values.get(nodeRequestKey));
        else resetTimer = setTimeout(check, options.overflowResetMs - idle);
      };
      resetTimer = setTimeout(check, options.overflowResetMs);
    };
    const binary = sendsVerbatim(ctx);
    const secrets = secretDelivery(ctx, region);
    const share = sendBudget.share(() => resetTransport(ctx.values.get(nodeRequestKey)), ctx.signal);
    /** The message of `stored`, once its bytes fit the send budget. */
    const send = async (stored: Change[], live: boolean): Promise<Response> => {
      const changes = secrets.changes(stored);
      // Binary codecs (gRPC on the direct path, Connect and gRPC-Web under connect) send the
      // changes' framed bytes as they are; JSON encodes the decoded events. A live change's
      // message is one for all of its region's streams: it costs no stream its own bytes.
      const shared = live && binary && changes.length === 1 && changes[0] === stored[0];
      const bytes = shared ? 0 : changes.reduce((n, c) => n + c.bytes.length, 0);
      await share.reserve(bytes);
      share.sent(bytes);
      cursor = changes[changes.length - 1]!.version;
      metrics.watchEvents.inc(changes.length);
      if (binary && changes.length === 1) return liveResponse(changes[0]!);
      if (binary)
        return withVerbatimField(
          create(WatchDeploymentChangesResponseSchema, { version: BigInt(cursor) }),
          1,
          changes.map((c) => c.bytes),
        );
      return { events: changes.map((c) => c.event), version: BigInt(cursor) };
    };
    // A live change this stream's caller may see as stored goes out from the fan-out itself
    // while the stream waits: no turn of this loop per stream and change.
    const direct = binary ? ctx.values.get(directSendKey) : undefined;
    if (direct && !ctx.signal.aborted) {
      // An aborted stream's loop ends the call; nothing more goes out from the fan-out.
      ctx.signal.addEventListener("abort", () => (sub.sendNow = undefined), { once: true });
      sub.sendNow = (changes) => {
        const change = changes[0]!;
        if (changes.length !== 1 || !secrets.asStored(change)) return false;
        if (!direct.send(liveResponse(change))) return false;
        cursor = change.version;
        metrics.watchEvents.inc(1);
        lastProgress = Date.now();
        return true;
      };
    }
    try {
      // Catch up (cursor, joinedAt] from the outbox; later changes arrive through `sub`.
      while (cursor < sub.joinedAt) {
        const changes = (await store.changes.read(region.id, cursor, options.watchBatchMax)).filter((c) => c.version <= sub.joinedAt);
        if (changes.length === 0 || changes[0]!.version !== cursor + 1) {
          throw resyncRequired(`changes after version ${cursor} of region ${region.name} are past the outbox retention`, head);
        }
        for (let i = 0; i < changes.length; ) {
          const n = batchLength(changes.slice(i), limits);
          yield await send(changes.slice(i, i + n), false);
          share.release(); // taken by the client
          lastProgress = Date.now();
          i += n;
        }
      }
      while (!ctx.signal.aborted) {
        const changes = takeOrThrow(sub, limits, cursor);
        if (changes.length > 0) {
          yield await send(changes, true);
          share.release(); // taken by the client
          lastProgress = Date.now();
          continue;
        }
        const before = cursor;
        await sub.wait(options.bookmarkIntervalMs, ctx.signal);
        if (ctx.signal.aborted || sub.buffered > 0 || sub.failure) continue;
        // Idle for a whole interval: everything pushed to this stream was sent.
        // (Not the poller's position: a fan-out in progress may not have reached this stream.)
        cursor = Math.max(before, sub.pushedUpTo);
        metrics.watchBookmarks.inc();
        yield { events: [], version: BigInt(cursor) };
      }
      // Aborted: by the client (nobody listens) or by shutdown (UNAVAILABLE: reconnect).
      throw ConnectError.from(ctx.signal.reason, Code.Canceled);
    } finally {
      clearTimeout(resetTimer);
      share.release();
      poller.unsubscribe(sub);
      streams.dec();
    }
  };
}

function takeOrThrow(sub: Subscription, limits: BatchLimits, cursor: number): Change[] {
  try {
    return sub.take(limits);
  } catch (error) {
    if (error instanceof Overflow) {
      throw reasonError(Code.ResourceExhausted, CONSUMER_TOO_SLOW, `${CONSUMER_TOO_SLOW}: the stream fell too far behind; resume from version ${cursor}`, {
        version: String(cursor),
      });
    }
    throw error;
  }
}

/** Ends the call at the transport: its HTTP/2 stream is reset with `code`; an HTTP/1.1 connection is closed. */
export function resetTransport(req: NodeServerRequest | undefined, code = h2.NGHTTP2_ENHANCE_YOUR_CALM): void {
  if (!req) return;
  if ("stream" in req) req.stream.close(code);
  else req.socket.destroy();
}
