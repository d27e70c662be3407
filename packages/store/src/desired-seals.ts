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
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { DesiredResourceSchema, type DesiredResource } from "@flotilla/proto/ctrl/v1/resources_pb.js";

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

/** The whole resource of a stored row: its body, with the seal put back. */
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
const SEALED_KEY = Buffer.of((SEALED_TAG & 0x7f) | 0x80, SEALED_TAG >> 7);

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
  const added = SEALED_KEY.length + varint(sealed.length).length + sealed.length;
  const workloadLength = varint(workload.end - workload.start + added);
  const deploymentLength = varint(deployment.end - deployment.start + added + workloadLength.length - (workload.start - workload.prefix));
  return Buffer.concat([
    body.subarray(0, deployment.prefix),
    deploymentLength,
    body.subarray(deployment.start, workload.prefix),
    workloadLength,
    body.subarray(workload.start, workload.end),
    SEALED_KEY,
    varint(sealed.length),
    sealed,
    body.subarray(workload.end),
  ]);
}

/** The first length-delimited field `field` among the fields in bytes [from, to): where its length prefix starts, and its data [start, end). */
function lengthDelimitedField(bytes: Uint8Array, from: number, to: number, field: number): { prefix: number; start: number; end: number } | undefined {
  const reader = new BinaryReader(bytes.subarray(0, to));
  reader.pos = from;
  while (reader.pos < to) {
    const [number, wireType] = reader.tag();
    if (number === field && wireType === WireType.LengthDelimited) {
      const prefix = reader.pos;
      const length = reader.uint32();
      return { prefix, start: reader.pos, end: reader.pos + length };
    }
    reader.skip(wireType, number);
  }
  return undefined;
}

/** `value` (a length) as a varint. */
function varint(value: number): Buffer {
  const bytes: number[] = [];
  for (; value >= 0x80; value >>>= 7) bytes.push((value & 0x7f) | 0x80);
  bytes.push(value);
  return Buffer.from(bytes);
}
