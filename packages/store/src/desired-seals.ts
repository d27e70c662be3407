// A region's desired resource is stored in two parts: the body (the resource without its
// workload's secret_env_sealed) and the seal (a workload's values sealed as one for the
// region's agent) in a column of its own. The snapshot reads the body alone: a full sync
// carries the names and the checksum, and the agent fetches only the values it does not hold
// (GetSecretEnvSeals), as Envoy's SDS serves secrets apart from the resources naming them. A
// snapshot that carried them paid their bytes on every sync: random values do not compress,
// and 10% of a fleet with five each made a full sync 4 MiB where the plain fleet is 1.1 MiB.
// The outbox keeps whole resources (seal included): a watch event is applied on its own.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
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
