// A deployment's secret env on its way in and out of the store: a write seals each new
// value (secrets.ts) and keeps the stored one for a name that comes without a value; its
// desired state holds the workload's values sealed anew, as one, for the region's agent; a
// read shows only that a value is set and its fingerprint.
import { create } from "@bufbuild/protobuf";
import {
  type Deployment,
  type DesiredResource,
  SecretEnvVarSchema,
  type SecretEnvVar,
  type Workload,
  WorkloadSchema,
} from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { StoreError } from "./errors.ts";
import { packValues, secretContext, secretEnvChecksum, secretEnvContext } from "@flotilla/runtime/sealed-values";
import type { SecretKeyRing } from "./secrets.ts";

export { secretContext };

/**
 * Replaces `input`'s secret env by sealed entries: a value is sealed (an unchanged value keeps
 * its stored seal, so rewriting it is no change); no value keeps the stored one; a name not
 * listed is gone. Throws naming the field when a name without a value has none stored, or
 * when a value comes and ctrl holds no key.
 */
export function sealSecretEnv(ring: SecretKeyRing | undefined, input: Deployment, stored: Deployment | undefined): void {
  const kept = new Map((stored?.secretEnv ?? []).map((s) => [s.name, s]));
  input.secretEnv = input.secretEnv.map((s, i) => {
    const field = `deployment.secret_env[${i}].value`;
    const previous = kept.get(s.name);
    if (s.value === undefined) {
      if (!previous) throw new StoreError("invalid_argument", `${field}: required: no value is stored under ${JSON.stringify(s.name)}`, field);
      return sealedEntry(s.name, previous.sealed, previous.fingerprint);
    }
    if (!ring) throw new StoreError("failed_precondition", `${field}: ctrl runs without a secrets key file (--secrets-key-file)`, field);
    const fingerprint = ring.fingerprint(s.value);
    if (previous?.fingerprint === fingerprint) return sealedEntry(s.name, previous.sealed, fingerprint);
    return sealedEntry(s.name, ring.seal(secretContext(input.id, s.name), s.value), fingerprint);
  });
}

/**
 * Replaces, in `desired` (a deployment's desired state by region row), each workload's secret
 * env by its region's form (regionSecretEnv): what the region's stream sends as stored. Each
 * value is opened once, whatever the number of regions.
 */
export function sealSecretEnvForRegions(ring: SecretKeyRing | undefined, desired: Map<number, DesiredResource>): void {
  let values: { value: string; fingerprint: string }[] | undefined;
  for (const [regionId, resource] of desired) {
    if (resource.spec.case !== "deployment") continue;
    const spec = resource.spec.value;
    const workload = spec.workload;
    if (!workload || workload.secretEnv.length === 0) continue;
    if (!ring)
      throw new StoreError(
        "failed_precondition",
        `deployment ${JSON.stringify(resource.id)} has secret values and ctrl runs without a secrets key file (--secrets-key-file)`,
      );
    values ??= workload.secretEnv.map((s) => ({ value: ring.open(secretContext(resource.id, s.name), s.sealed), fingerprint: s.fingerprint }));
    // A copy: the regions of a deployment share one workload message.
    spec.workload = regionSecretEnv(ring, regionId, resource.id, workload, values);
  }
}

/**
 * `workload` with its secret env in a region's form: the names alone, the values of `secrets`
 * (in their order) sealed as one for region row `regionId`'s agent, and the pod template's
 * checksum of the names and the fingerprints given (the stored ones: a key added to the file
 * changes the fingerprint key, and must not roll pods before a rotation does). The same inputs
 * give the same bytes.
 */
export function regionSecretEnv(
  ring: SecretKeyRing,
  regionId: number,
  deploymentId: string,
  workload: Workload,
  secrets: readonly { value: string; fingerprint: string }[],
): Workload {
  const names = workload.secretEnv.map((s) => s.name);
  const packed = packValues(secrets.map(({ value }) => Buffer.from(value, "utf8")));
  try {
    return create(WorkloadSchema, {
      ...workload,
      secretEnv: names.map((name) => create(SecretEnvVarSchema, { name })),
      secretEnvSealed: ring.sealForRegion(regionId, secretEnvContext(deploymentId, names), packed),
      secretEnvChecksum: secretEnvChecksum(names.map((name, i) => ({ name, fingerprint: secrets[i]!.fingerprint }))),
    });
  } finally {
    packed.fill(0);
  }
}

/** Leaves of each secret only that it is set and its fingerprint: what every reader gets. */
export function redactSecretEnv(secretEnv: SecretEnvVar[]): void {
  for (const s of secretEnv) {
    s.set = s.sealed.length > 0;
    s.sealed = new Uint8Array(0);
    s.value = undefined;
  }
}

function sealedEntry(name: string, sealed: Uint8Array, fingerprint: string): SecretEnvVar {
  return create(SecretEnvVarSchema, { name, sealed, fingerprint });
}
