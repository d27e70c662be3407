// What each operator resource means as desired state: which regions it is placed in and
// what the agent of each region must hold for it.
import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import {
  DeploymentDesiredStatus,
  DeploymentSchema,
  DesiredResourceSchema,
  NetworkPolicySchema,
  ResourceType,
  SentinelDesiredState,
  SentinelSchema,
  WorkloadSchema,
  type DesiredResource,
  type EnvVar,
  type RolloutStrategy,
} from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { ResourceTableName } from "./schema.ts";
import type { RolloutDecisions } from "./rollouts.ts";
import { bindSecretEnv, keepCurrentSecretEnv, redactSecretEnv, type RegionEpochs, sealSecretEnv, sealSecretEnvForRegions } from "./secret-env.ts";
import type { SecretKeyRing } from "./secrets.ts";

export interface ResourceKind<Desc extends DescMessage> {
  type: ResourceType;
  table: ResourceTableName;
  /** The request field holding the resource, for error messages ("deployment"). */
  field: string;
  /** The kind in RPC names (UpdateDeployment): how the audit trail names its actions. */
  action: string;
  schema: Desc;
  /** Region names the resource is placed in, with the request field naming each. */
  placements(resource: MessageShape<Desc>): { region: string; field: string }[];
  /** The desired state per placed region that should run it (none when stopped / standby / archived). */
  desired(resource: MessageShape<Desc>, regionIds: ReadonlyMap<string, number>, revision?: number): Map<number, DesiredResource>;
  /** Scalar fields an update may not change. */
  immutable: string[];
  /** Clears output-only fields, leaving what an operator wrote. */
  clearOutput(resource: MessageShape<Desc>): void;
  /** The resource's rollout strategy, for kinds whose changes may be staged (rollouts.ts). */
  strategy?(resource: MessageShape<Desc>): RolloutStrategy | undefined;
  /** ctrl's rollout decisions, which a staged change takes (StoreOptions.rollouts; without, a staged change is refused). */
  rollouts?: RolloutDecisions;
  /**
   * Seals the secret values a write carries, keeping stored ones it names without a value, all
   * bound to the stored revision `revision` (0: none) until bind() moves them (secret-env.ts).
   */
  seal?(ring: SecretKeyRing | undefined, input: MessageShape<Desc>, stored: MessageShape<Desc> | undefined, revision: number, dryRun: boolean): void;
  /** Moves the seals of `resource` from revision `from` to `to`, in place, once a write is a change. */
  bind?(ring: SecretKeyRing | undefined, resource: MessageShape<Desc>, from: number, to: number): void;
  /** Gives `target` (a rollback's spec) the secret values stored now in `current`; returns the names that have none. */
  keepCurrentSecrets?(target: MessageShape<Desc>, current: MessageShape<Desc>): string[];
  /** Seals, in place, the secret values of revision `revision`'s desired state for each region's agent (secret-env.ts). */
  sealForRegions?(ring: SecretKeyRing | undefined, desired: Map<number, DesiredResource>, revision: number, regionEpochs: RegionEpochs): Promise<void>;
  /** Clears the secret values, in place, keeping names and fingerprints: a stored revision keeps none (a rollback takes the current ones). */
  clearSecrets?(resource: MessageShape<Desc>): void;
  /** Clears what no reader may see (sealed secrets), in place. */
  redact?(resource: MessageShape<Desc>): void;
}

export type DeploymentMessage = MessageShape<typeof DeploymentSchema>;
export type SentinelMessage = MessageShape<typeof SentinelSchema>;
export type NetworkPolicyMessage = MessageShape<typeof NetworkPolicySchema>;

/** `base` with each of `overrides` in place of the variable of its name, or added after them. */
export function mergeEnv(base: readonly EnvVar[], overrides: readonly EnvVar[]): EnvVar[] {
  const byName = new Map(overrides.map((v) => [v.name, v]));
  const merged = base.map((v) => byName.get(v.name) ?? v);
  const present = new Set(base.map((v) => v.name));
  return [...merged, ...overrides.filter((v) => !present.has(v.name))];
}

export const deploymentKind: ResourceKind<typeof DeploymentSchema> = {
  type: ResourceType.DEPLOYMENT,
  table: "deployments",
  field: "deployment",
  action: "Deployment",
  schema: DeploymentSchema,
  placements: (d) => d.regions.map((p, i) => ({ region: p.region, field: `deployment.regions[${i}].region` })),
  desired(d, regionIds, revision = 0) {
    const desired = new Map<number, DesiredResource>();
    if (d.desiredStatus === DeploymentDesiredStatus.STOPPED) return desired;
    const workload = create(WorkloadSchema, {
      image: d.image,
      command: d.command,
      env: d.env,
      port: d.port,
      cpuMillicores: d.cpuMillicores,
      memoryMib: d.memoryMib,
      readinessProbe: d.readinessProbe,
      livenessProbe: d.livenessProbe,
      startupProbe: d.startupProbe,
      envFrom: d.envFrom,
      disruptionBudget: d.disruptionBudget,
      maxSurge: d.maxSurge,
      maxUnavailable: d.maxUnavailable,
      terminationGracePeriodSeconds: d.terminationGracePeriodSeconds,
      podLabels: d.podLabels,
      podAnnotations: d.podAnnotations,
      secretEnv: d.secretEnv,
    });
    for (const placement of d.regions) {
      // A region's env values replace the deployment's of the same name or add to them; its
      // autoscaler, when set, owns the replicas there.
      const regionWorkload = placement.env.length > 0 ? create(WorkloadSchema, { ...workload, env: mergeEnv(d.env, placement.env) }) : workload;
      desired.set(
        regionIds.get(placement.region)!,
        create(DesiredResourceSchema, {
          type: ResourceType.DEPLOYMENT,
          id: d.id,
          namespace: d.namespace,
          spec: {
            case: "deployment",
            value: { workload: regionWorkload, replicas: placement.replicas, autoscaling: placement.autoscaling, revision: BigInt(revision) },
          },
        }),
      );
    }
    return desired;
  },
  immutable: ["namespace", "project"],
  clearOutput(d) {
    d.revision = 0n;
    d.createTime = undefined;
    d.updateTime = undefined;
    d.status = [];
    d.rollout = undefined;
  },
  strategy: (d) => d.strategy,
  seal: sealSecretEnv,
  bind: bindSecretEnv,
  keepCurrentSecrets: keepCurrentSecretEnv,
  sealForRegions: sealSecretEnvForRegions,
  clearSecrets: (d) => {
    for (const s of d.secretEnv) s.sealed = new Uint8Array(0);
  },
  redact: (d) => redactSecretEnv(d.secretEnv),
};

export const sentinelKind: ResourceKind<typeof SentinelSchema> = {
  type: ResourceType.SENTINEL,
  table: "sentinels",
  field: "sentinel",
  action: "Sentinel",
  schema: SentinelSchema,
  placements: (s) => [{ region: s.region, field: "sentinel.region" }],
  desired(s, regionIds) {
    const desired = new Map<number, DesiredResource>();
    const deployed = s.desiredState === SentinelDesiredState.RUNNING || s.desiredState === SentinelDesiredState.UNSPECIFIED;
    if (!deployed) return desired;
    desired.set(
      regionIds.get(s.region)!,
      create(DesiredResourceSchema, {
        type: ResourceType.SENTINEL,
        id: s.id,
        namespace: s.namespace,
        spec: {
          case: "sentinel",
          value: {
            workload: { image: s.image, port: s.port, readinessProbe: s.readinessProbe, livenessProbe: s.livenessProbe, startupProbe: s.startupProbe },
            replicas: s.replicas,
          },
        },
      }),
    );
    return desired;
  },
  immutable: ["region", "namespace", "project"],
  clearOutput(s) {
    s.revision = 0n;
    s.createTime = undefined;
    s.updateTime = undefined;
    s.status = undefined;
  },
};

export const networkPolicyKind: ResourceKind<typeof NetworkPolicySchema> = {
  type: ResourceType.CILIUM_NETWORK_POLICY,
  table: "network_policies",
  field: "network_policy",
  action: "NetworkPolicy",
  schema: NetworkPolicySchema,
  placements: (p) => [{ region: p.region, field: "network_policy.region" }],
  desired(p, regionIds) {
    return new Map([
      [
        regionIds.get(p.region)!,
        create(DesiredResourceSchema, {
          type: ResourceType.CILIUM_NETWORK_POLICY,
          id: p.id,
          namespace: p.namespace,
          spec: { case: "ciliumNetworkPolicy", value: { spec: p.spec } },
        }),
      ],
    ]);
  },
  immutable: ["region", "namespace", "project"],
  clearOutput(p) {
    p.revision = 0n;
    p.createTime = undefined;
    p.updateTime = undefined;
  },
};
