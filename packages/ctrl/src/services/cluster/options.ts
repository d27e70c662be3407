// Tunables of the agent-facing streams; defaults match ARCHITECTURE §3.
export interface StreamOptions {
  /** Resources per SyncDesiredState message (connect's cost is per message). */
  snapshotBatchSize: number;
  /** Snapshot page queries running at once (the rest wait): keep it below the pool size. */
  snapshotConcurrency: number;
  /** Bytes of pages all snapshots together fetch before their clients ask for them. */
  snapshotReadAheadBytes: number;
  /** An idle watch stream gets a bookmark this often. */
  bookmarkIntervalMs: number;
  /** Events a watch stream may have queued before it is ended with CONSUMER_TOO_SLOW. */
  watchBufferLimit: number;
  /** Events per watch message at most. */
  watchBatchMax: number;
  /** Encoded bytes per message at most, for snapshots and watches (gRPC clients default to 4 MiB). */
  messageBytesMax: number;
  /** After an overflow, how long the stream may stay stuck on a full transport before it is reset. */
  overflowResetMs: number;
  /** Deployments one GetSecretEnvSeals answer covers at most (the agent asks again for the rest). */
  secretSealsMax: number;
}

export const DEFAULT_STREAM_OPTIONS: StreamOptions = {
  snapshotBatchSize: 500,
  snapshotConcurrency: 6,
  snapshotReadAheadBytes: 16 * 1024 * 1024,
  bookmarkIntervalMs: 5000,
  watchBufferLimit: 10_000,
  watchBatchMax: 500,
  messageBytesMax: 1024 * 1024,
  overflowResetMs: 2000,
  secretSealsMax: 500,
};
