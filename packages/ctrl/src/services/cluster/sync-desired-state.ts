// ClusterService.SyncDesiredState: the region's full desired state in batches, read in
// pages as the client reads them, then the changes committed meanwhile, then the complete
// marker with the version the client's state now equals.
import { create, fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { ResourceBatchSchema, SyncDesiredStateResponseSchema, type SyncDesiredStateRequest } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DesiredResourceSchema, ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { ReadAheadBudget, readSnapshot, Slots, type SnapshotRow, type Store } from "@flotilla/store";
import { resolveAuthorizedRegion } from "../../auth.ts";
import type { CtrlMetrics } from "../../metrics.ts";
import type { SendBudget } from "../../send-budget.ts";
import * as validate from "../../validate.ts";
import type { StreamOptions } from "./options.ts";
import { resourceBatchFieldChunks } from "./resource-batch-encoding.ts";
import { secretDelivery } from "./secret-delivery.ts";
import { messageWithVerbatimChunks, sendsVerbatim } from "./verbatim.ts";
import { nodeRequestKey, resetTransport } from "./watch-deployment-changes.ts";

type Response = MessageInitShape<typeof SyncDesiredStateResponseSchema>;

/** What a stream reserves of the send budget before its first page is read: the size pages aim at (the store's snapshot pages). */
const FIRST_MESSAGE_BYTES = 256 * 1024;

export function syncDesiredState(store: Store, metrics: CtrlMetrics, options: StreamOptions, sendBudget: SendBudget) {
  // Snapshot queries draw from a bounded share of the database pool: unary calls, watches
  // and the poller always find a connection, however many syncs are open.
  const queries = new Slots(options.snapshotConcurrency);
  const readAhead = new ReadAheadBudget(options.snapshotReadAheadBytes);
  return async function* (req: SyncDesiredStateRequest, ctx: HandlerContext): AsyncIterable<Response> {
    validate.dnsLabel("region", req.region);
    const region = await resolveAuthorizedRegion(ctx, store.regions, req.region);
    const binary = sendsVerbatim(ctx);
    const secrets = secretDelivery(ctx, region);
    const share = sendBudget.share(() => resetTransport(ctx.values.get(nodeRequestKey)), ctx.signal);
    const stopTimer = metrics.snapshotDuration.startTimer();
    try {
      // Each page is read once the next message fits the send budget (about as large as the one before).
      let expectedBytes = Math.min(FIRST_MESSAGE_BYTES, options.messageBytesMax);
      await share.reserve(expectedBytes);
      for await (const item of readSnapshot(store.database, region.id, {
        batchSize: options.snapshotBatchSize,
        batchBytes: options.messageBytesMax,
        readAhead,
        queries,
        signal: ctx.signal,
        // An agent holding no values yet asks for them in the pages rather than afterwards.
        withSecretEnvSeals: req.withSecretEnvSeals && secrets.toOwnAgent,
      })) {
        let response: Response;
        let bytes = 0;
        if ("batch" in item) {
          countByType(metrics, item.batch);
          const batch = secrets.rows(item.batch);
          bytes = expectedBytes = batch.reduce((n, row) => n + row.body.length, 0);
          response = binary ? wireBatchResponse(batch) : { message: { case: "batch", value: decodedBatch(batch) } };
        } else if ("removals" in item) {
          response = { message: { case: "removals", value: { resources: item.removals } } };
        } else {
          const { version, count, removals } = item.complete;
          response = { message: { case: "complete", value: { version: BigInt(version), resourceCount: BigInt(count), removalCount: BigInt(removals) } } };
        }
        share.sent(bytes);
        yield response;
        await share.reserve(expectedBytes);
      }
    } finally {
      share.release();
    }
    stopTimer();
  };
}

function countByType(metrics: CtrlMetrics, rows: SnapshotRow[]): void {
  const byType = new Map<number, number>();
  for (const r of rows) byType.set(r.type, (byType.get(r.type) ?? 0) + 1);
  for (const [type, n] of byType) metrics.snapshotResources.inc({ type: ResourceType[type] ?? String(type) }, n);
}

/** For JSON clients: real messages. */
function decodedBatch(rows: SnapshotRow[]) {
  return create(ResourceBatchSchema, {
    resources: rows.map((row) => {
      const resource = fromBinary(DesiredResourceSchema, row.body);
      resource.version = BigInt(row.version);
      return resource;
    }),
  });
}

/**
 * For binary clients: the stored bytes as they are, no decode and re-encode (half of a
 * sync's CPU otherwise): the response's `batch` (field 1) carried as one verbatim field.
 */
function wireBatchResponse(rows: SnapshotRow[]) {
  return messageWithVerbatimChunks(SyncDesiredStateResponseSchema, {}, 1, resourceBatchFieldChunks(rows));
}
