// A region's desired resource is stored in two parts: the body (the resource without its
// workload's secret_env_sealed) and the seal (a workload's values sealed as one for the
// region's agent) in a column of its own. The snapshot reads the body alone: a full sync
// carries the names and the checksum, and the agent fetches only the values it does not hold
// (GetSecretEnvSeals), as Envoy's SDS serves secrets apart from the resources naming them. A
// snapshot that carried them paid their bytes on every sync: random values do not compress,
// and 10% of a fleet with five each made a full sync 4 MiB where the plain fleet is 1.1 MiB.
// The outbox keeps whole resources (seal included): a watch event is applied on its own. An
// agent that holds no values yet (its first sync) asks for the pages with the seals put back
// (bodyWithSeal()), rather than for every value afterwards.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { DesiredResourceSchema, type DesiredResource } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { readVarint, varintSize, writeVarint } from "@flotilla/runtime/wire";

/** The stored parts of `resource` (left as it was). */
export function storedParts(resource: DesiredResource): { body: Uint8Array; secret_env_sealed: Uint8Array | null } {
  const workload = resource.spec.case === "deployment" ? resource.spec.value.workload : undefined;
  const sealed = workload?.secretEnvSealed;
  if (!workload || !sealed || sealed.length === 0) return { body: toBinary(DesiredResourceSchema, resource), secret_env_sealed: null };
  workload.secretEnvSealed = new Uint8Array(0);
  try {
    return { body: toBinary(DesiredResourceSchema, resource), secret_env_sealed: sealed };
  } finally {
    workload.secretEnvSealed = sealed;
  }
}

/**
 * Clears the resource's secret values in place (sealed as one, or one by one as an earlier
 * version stored them), keeping the names and the checksum; false when it carries none.
 */
export function clearSecretEnvSeals(resource: DesiredResource): boolean {
  const workload = resource.spec.case === "deployment" ? resource.spec.value.workload : undefined;
  if (!workload || (workload.secretEnvSealed.length === 0 && workload.secretEnv.every((s) => s.sealed.length === 0))) return false;
  workload.secretEnvSealed = new Uint8Array(0);
  for (const s of workload.secretEnv) s.sealed = new Uint8Array(0);
  return true;
}

/** The whole resource of a stored row: its body, with the seal put back. */
/** The deployment revision a stored body was written from (0 for other kinds). */
export function revisionOfBody(body: Uint8Array): number {
  const resource = fromBinary(DesiredResourceSchema, body);
  return resource.spec.case === "deployment" ? Number(resource.spec.value.revision) : 0;
}

export function wholeResource(row: { body: Uint8Array; secret_env_sealed: Uint8Array | null }): DesiredResource {
  const resource = fromBinary(DesiredResourceSchema, row.body);
  if (row.secret_env_sealed && row.secret_env_sealed.length > 0 && resource.spec.case === "deployment" && resource.spec.value.workload) {
    resource.spec.value.workload.secretEnvSealed = row.secret_env_sealed;
  }
  return resource;
}

/** DesiredResource.deployment, DeploymentSpec.workload: the path to the seal's message. */
const DEPLOYMENT_FIELD = 10;
const WORKLOAD_FIELD = 1;
/** Workload.secret_env_sealed's key (field 18, length-delimited), as encoded. */
const SEALED_TAG = (18 << 3) | WireType.LengthDelimited;
const SEALED_KEY = [(SEALED_TAG & 0x7f) | 0x80, SEALED_TAG >> 7] as const;

/**
 * The stored `body` with `sealed` put back as its workload's secret_env_sealed: the encoding of
 * wholeResource() without decoding the body (a sync sends the stored bytes as they are).
 * Protobuf takes a message's fields in any order, so the seal goes at the end of the workload
 * and the two length prefixes around it grow. A body without a workload (never stored with a
 * seal) is returned as it is.
 */
export function bodyWithSeal(body: Uint8Array, sealed: Uint8Array): Uint8Array {
  const deployment = lengthDelimitedField(body, 0, body.length, DEPLOYMENT_FIELD);
  const workload = deployment && lengthDelimitedField(body, deployment.start, deployment.end, WORKLOAD_FIELD);
  if (!deployment || !workload) return body;
  const added = SEALED_KEY.length + varintSize(sealed.length) + sealed.length;
  const workloadLength = workload.end - workload.start + added;
  const deploymentLength = deployment.end - deployment.start + added + varintSize(workloadLength) - (workload.start - workload.prefix);
  const out = Buffer.allocUnsafe(deployment.prefix + varintSize(deploymentLength) + deploymentLength + body.length - deployment.end);
  out.set(body.subarray(0, deployment.prefix));
  let pos = writeVarint(out, deployment.prefix, deploymentLength);
  out.set(body.subarray(deployment.start, workload.prefix), pos);
  pos = writeVarint(out, pos + workload.prefix - deployment.start, workloadLength);
  out.set(body.subarray(workload.start, workload.end), pos);
  pos += workload.end - workload.start;
  out[pos++] = SEALED_KEY[0];
  out[pos++] = SEALED_KEY[1];
  pos = writeVarint(out, pos, sealed.length);
  out.set(sealed, pos);
  out.set(body.subarray(workload.end), pos + sealed.length);
  return out;
}

/**
 * The first length-delimited field `field` among the fields in bytes [from, to): where its
 * length prefix starts, and its data [start, end); undefined if absent or not well-formed.
 */
function lengthDelimitedField(bytes: Uint8Array, from: number, to: number, field: number): { prefix: number; start: number; end: number } | undefined {
  for (let pos = from; pos < to; ) {
    const key = readVarint(bytes, pos, to);
    if (!key) return undefined;
    pos = key.next;
    switch (key.value & 7) {
      case WireType.Varint: {
        const value = readVarint(bytes, pos, to);
        if (!value) return undefined;
        pos = value.next;
        break;
      }
      case WireType.Bit64:
        pos += 8;
        break;
      case WireType.Bit32:
        pos += 4;
        break;
      case WireType.LengthDelimited: {
        const length = readVarint(bytes, pos, to);
        if (!length || length.next + length.value > to) return undefined;
        if (Math.floor(key.value / 8) === field) return { prefix: pos, start: length.next, end: length.next + length.value };
        pos = length.next + length.value;
        break;
      }
      default:
        return undefined; // groups: never in our messages
    }
  }
  return undefined;
}
