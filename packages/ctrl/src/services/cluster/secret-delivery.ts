// What the agent streams (SyncDesiredState, WatchDeploymentChanges) carry of secret values.
// The outbox and the desired state hold them sealed; the region's own agent, authenticated as
// that region, gets them opened: the only place a value leaves ctrl in plain text. Any other
// caller the streams admit (the admin token, e.g. debugging with a gRPC client) gets the names
// and fingerprints only, never a value nor its seal.
import { clone, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import type { HandlerContext } from "@connectrpc/connect";
import { ChangeEventSchema, DesiredResourceSchema, type DesiredResource } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { type Change, type RegionRow, secretContext, type SecretKeyRing } from "@flotilla/store";
import { principalKey } from "../../auth.ts";

/** Workload.secret_env's tag (field 17, length-delimited) as encoded: a body without it carries no secret. */
const SECRET_ENV_KEY = (17 << 3) | 2;
const SECRET_ENV_TAG = Buffer.of((SECRET_ENV_KEY & 0x7f) | 0x80, SECRET_ENV_KEY >> 7);

export interface SecretDelivery {
  /** A stored DesiredResource body as this stream's caller may receive it. */
  body(body: Uint8Array): Uint8Array;
  /** An outbox change as this stream's caller may receive it (the same object when it carries no secret). */
  change(change: Change): Change;
}

/** The delivery for the stream `ctx` opened for `region`. */
export function secretDelivery(ring: SecretKeyRing | undefined, ctx: HandlerContext, region: RegionRow): SecretDelivery {
  const principal = ctx.values.get(principalKey);
  const ownAgent = principal.kind === "agent" && principal.regionId === region.id;
  /** Opens (or strips) the resource's secrets in place; false when it has none. */
  const deliver = (resource: DesiredResource): boolean => {
    const secretEnv = resource.spec.case === "deployment" ? (resource.spec.value.workload?.secretEnv ?? []) : [];
    if (secretEnv.length === 0) return false;
    for (const s of secretEnv) {
      if (ownAgent) {
        if (!ring) throw new Error(`secret ${secretContext(resource.id, s.name)}: ctrl runs without --secrets-key-file`);
        s.value = ring.open(secretContext(resource.id, s.name), s.sealed);
      }
      s.sealed = new Uint8Array(0);
    }
    return true;
  };
  return {
    body(body) {
      if (!mayCarrySecrets(body)) return body;
      const resource = fromBinary(DesiredResourceSchema, body);
      return deliver(resource) ? toBinary(DesiredResourceSchema, resource) : body;
    },
    change(change) {
      if (change.event.change.case !== "upsert" || !mayCarrySecrets(change.bytes)) return change;
      const event = clone(ChangeEventSchema, change.event);
      if (event.change.case !== "upsert" || !deliver(event.change.value)) return change;
      return { version: change.version, event, bytes: new BinaryWriter().bytes(toBinary(ChangeEventSchema, event)).finish() };
    },
  };
}

/** A two-byte search: false positives (the bytes inside some string) only cost a decode. */
function mayCarrySecrets(bytes: Uint8Array): boolean {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).includes(SECRET_ENV_TAG);
}
