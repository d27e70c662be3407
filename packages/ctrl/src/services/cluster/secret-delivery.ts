// What the agent streams (SyncDesiredState, WatchDeploymentChanges) carry of secret values.
// The outbox holds a workload's values sealed as one for its region's agent (the store's
// regionSecretEnv; the desired state keeps that seal beside the body, which a snapshot's pages
// carry alone unless that agent asks for the seals too: GetSecretEnvSeals), so the region's own
// agent, authenticated as that region, gets the stored bytes as they are and opens them with the
// keys GetSecretKeys gives it alone: ctrl opens nothing per sync. With mTLS, only a caller that
// also presents the region's client certificate is that agent. Any other caller the streams
// admit (the admin token, e.g. debugging with a gRPC client) gets the names and the pod
// template's checksum only, never a seal.
import { clone, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import type { HandlerContext } from "@connectrpc/connect";
import { ChangeEventSchema, DesiredResourceSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { clearSecretEnvSeals, type Change, type RegionRow } from "@flotilla/store";
import { maySeeSecretValues } from "../../auth.ts";
import { FanOutMemo } from "../../streaming/fan-out-memo.ts";

/** Workload.secret_env's tag (field 17, length-delimited) as encoded: a body without it carries no secret. */
const SECRET_ENV_KEY = (17 << 3) | 2;
const SECRET_ENV_TAG = Buffer.of((SECRET_ENV_KEY & 0x7f) | 0x80, SECRET_ENV_KEY >> 7);

export interface SecretDelivery {
  /** The stream's caller is the region's own agent: it gets the stored bytes, seals included. */
  readonly toOwnAgent: boolean;
  /** Stored DesiredResource rows as this stream's caller may receive them (the same array when unchanged). */
  rows<Row extends { body: Uint8Array }>(rows: Row[]): Row[];
  /** Outbox changes as this stream's caller may receive them (the same array when unchanged; a change without secret is the same object). */
  changes(changes: Change[]): Change[];
  /** This stream's caller may receive `change` as stored (`changes` would give it back unchanged). */
  asStored(change: Change): boolean;
}

/** Stored bytes, unchanged: for the region's own agent. */
const AS_STORED: SecretDelivery = { toOwnAgent: true, rows: (rows) => rows, changes: (changes) => changes, asStored: () => true };

/** The delivery for the stream `ctx` opened for `region`. */
export function secretDelivery(ctx: HandlerContext, region: RegionRow): SecretDelivery {
  if (maySeeSecretValues(ctx, region)) return AS_STORED;
  const body = (body: Uint8Array): Uint8Array => {
    if (!mayCarrySecrets(body)) return body;
    const resource = fromBinary(DesiredResourceSchema, body);
    return clearSecretEnvSeals(resource) ? toBinary(DesiredResourceSchema, resource) : body;
  };
  return {
    toOwnAgent: false,
    rows: (rows) => rows.map((row) => ({ ...row, body: body(row.body) })),
    changes: (changes) => (changes.every(asStored) ? changes : changes.map(withoutSeals)),
    asStored,
  };
}

/**
 * A live change is fanned out to every stream of its region as one object: what it is without
 * its seals is worked out once for all the streams that may not see them, not once per stream.
 */
const withoutSealsOf = new FanOutMemo<Change, Change>();

/** `change` as a caller other than its region's agent receives it: itself when it carries no seal. */
function withoutSeals(change: Change): Change {
  return withoutSealsOf.get(change, clearSeals);
}

/** A caller other than its region's agent may receive `change` as stored: it carries no seal. */
function asStored(change: Change): boolean {
  return withoutSeals(change) === change;
}

function clearSeals(change: Change): Change {
  if (change.event.change.case !== "upsert" || !mayCarrySecrets(change.bytes)) return change;
  const event = clone(ChangeEventSchema, change.event);
  if (event.change.case !== "upsert" || !clearSecretEnvSeals(event.change.value)) return change;
  return { version: change.version, event, bytes: new BinaryWriter().bytes(toBinary(ChangeEventSchema, event)).finish() };
}

/** A two-byte search: false positives (the bytes inside some string) only cost a decode. */
function mayCarrySecrets(bytes: Uint8Array): boolean {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).includes(SECRET_ENV_TAG);
}
