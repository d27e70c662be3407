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
 * What a value stored in a deployment's row at `revision` is bound to: a seal copied from an
 * older revision (a stored revision, a dump) into a newer row does not open there.
 */
export function valueContext(deploymentId: string, name: string, revision: number): string {
  return `${secretContext(deploymentId, name)}@${revision}`;
}

/**
 * Replaces `input`'s secret env by sealed entries, each bound to revision `revision` (the
 * stored one: bindSecretEnv() moves them to the revision written). A value is sealed anew,
 * even one equal to the stored value: the answer to a write that supplies a value must not
 * tell whether it equals the stored one. No value keeps the stored one; a name not listed is
 * gone. With `dryRun`, a supplied value's fingerprint is left empty: a dry run writes nothing
 * and is not audited, so it must not compute anything from the value. Throws naming the field
 * when a name without a value has none stored, or when a value comes and ctrl holds no key.
 */
export function sealSecretEnv(ring: SecretKeyRing | undefined, input: Deployment, stored: Deployment | undefined, revision: number, dryRun: boolean): void {
  const kept = new Map((stored?.secretEnv ?? []).map((s) => [s.name, s]));
  input.secretEnv = input.secretEnv.map((s, i) => {
    const field = `deployment.secret_env[${i}].value`;
    const previous = kept.get(s.name);
    if (s.value === undefined) {
      if (!previous) throw new StoreError("invalid_argument", `${field}: required: no value is stored under ${JSON.stringify(s.name)}`, field);
      return sealedEntry(s.name, previous.sealed, previous.fingerprint);
    }
    if (!ring) throw new StoreError("failed_precondition", `${field}: ctrl runs without a secrets key file (--secrets-key-file)`, field);
    const value = Buffer.from(s.value, "utf8");
    s.value = undefined;
    try {
      const fingerprint = dryRun ? "" : ring.fingerprint(input.id, s.name, value);
      return sealedEntry(s.name, ring.seal(valueContext(input.id, s.name, revision), value), fingerprint);
    } finally {
      value.fill(0);
    }
  });
}

/** Moves, in place, every seal of `deployment` from revision `from` to revision `to` (a write's new revision). */
export function bindSecretEnv(ring: SecretKeyRing | undefined, deployment: Deployment, from: number, to: number): void {
  if (deployment.secretEnv.length === 0 || from === to) return;
  if (!ring)
    throw new StoreError(
      "failed_precondition",
      `deployment ${JSON.stringify(deployment.id)} has secret values and ctrl runs without a secrets key file (--secrets-key-file)`,
    );
  for (const s of deployment.secretEnv) {
    const value = ring.openBytes(valueContext(deployment.id, s.name, from), s.sealed);
    try {
      s.sealed = ring.seal(valueContext(deployment.id, s.name, to), value);
    } finally {
      value.fill(0);
    }
  }
}

/** The secret key epoch of each of these region rows (a read in the write's transaction). */
export type RegionEpochs = (regionIds: number[]) => Promise<ReadonlyMap<number, number>>;

/**
 * Replaces, in `desired` (deployment revision `revision`'s desired state by region row), each
 * workload's secret env by its region's form (regionSecretEnv) at the region's key epoch: what
 * the region's stream sends as stored. Each value is opened once, whatever the number of
 * regions, and zeroed after.
 */
export async function sealSecretEnvForRegions(
  ring: SecretKeyRing | undefined,
  desired: Map<number, DesiredResource>,
  revision: number,
  regionEpochs: RegionEpochs,
): Promise<void> {
  const withSecrets = [...desired].filter(([, r]) => r.spec.case === "deployment" && (r.spec.value.workload?.secretEnv.length ?? 0) > 0);
  if (withSecrets.length === 0) return;
  const epochs = await regionEpochs(withSecrets.map(([regionId]) => regionId));
  let values: { value: Buffer; fingerprint: string }[] | undefined;
  try {
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
      values ??= workload.secretEnv.map((s) => ({ value: ring.openBytes(valueContext(resource.id, s.name, revision), s.sealed), fingerprint: s.fingerprint }));
      // A copy: the regions of a deployment share one workload message.
      spec.workload = regionSecretEnv(ring, { id: regionId, epoch: epochs.get(regionId) ?? 0 }, resource.id, workload, values);
    }
  } finally {
    for (const { value } of values ?? []) value.fill(0);
  }
}

/**
 * `workload` with its secret env in a region's form: the names alone, the values of `secrets`
 * (in their order) sealed as one for `region`'s agent at its key epoch, and the pod template's
 * checksum of the names and the fingerprints given (the stored ones: a key added to the file
 * changes the fingerprint key, and must not roll pods before a rotation does). The same inputs
 * give the same bytes.
 */
export function regionSecretEnv(
  ring: SecretKeyRing,
  region: { id: number; epoch: number },
  deploymentId: string,
  workload: Workload,
  secrets: readonly { value: Uint8Array; fingerprint: string }[],
): Workload {
  const names = workload.secretEnv.map((s) => s.name);
  const packed = packValues(secrets.map(({ value }) => value));
  try {
    return create(WorkloadSchema, {
      ...workload,
      secretEnv: names.map((name) => create(SecretEnvVarSchema, { name })),
      secretEnvSealed: ring.sealForRegion(region.id, region.epoch, secretEnvContext(deploymentId, names), packed),
      secretEnvChecksum: secretEnvChecksum(names.map((name, i) => ({ name, fingerprint: secrets[i]!.fingerprint }))),
    });
  } finally {
    packed.fill(0);
  }
}

/** Leaves of each secret only that it is set and its fingerprint: what every reader gets. */
export function redactSecretEnv(secretEnv: SecretEnvVar[]): void {
  for (const s of secretEnv) {
    // A stored revision keeps the fingerprint alone; a dry run's supplied value, the seal alone.
    s.set = s.sealed.length > 0 || s.fingerprint !== "";
    s.sealed = new Uint8Array(0);
    s.value = undefined;
  }
}

function sealedEntry(name: string, sealed: Uint8Array, fingerprint: string): SecretEnvVar {
  return create(SecretEnvVarSchema, { name, sealed, fingerprint });
}

/**
 * Gives `target` (an older revision's spec, rolled back to) the values stored now under its
 * names, in place, bound to `current`'s revision as they are: a rollback restores the spec and
 * keeps the values, as `kubectl rollout undo` leaves a Secret's data alone, so a value replaced
 * since (a leaked password) never comes back. Returns the names that have no value now.
 */
export function keepCurrentSecretEnv(target: Deployment, current: Deployment): string[] {
  const now = new Map(current.secretEnv.map((s) => [s.name, s]));
  const missing = target.secretEnv.filter((s) => !now.has(s.name)).map((s) => s.name);
  target.secretEnv = target.secretEnv.map((s) => {
    const kept = now.get(s.name);
    return kept ? sealedEntry(s.name, kept.sealed, kept.fingerprint) : s;
  });
  return missing;
}
