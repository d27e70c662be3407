// flotilla describe: a workload's service fields (probes, disruption budget, surge, grace, pod
// labels and annotations, env and its references, each region's env values, secret env,
// autoscaling per region) in words rather than as the spec's JSON. Secret env by name, set and
// fingerprint: never a value.
import type { DeploymentPlacement, EnvFromSource, EnvVar, RegionStatus, SecretEnvVar, DisruptionBudget } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { table } from "./output.ts";
import {
  autoscalerReplicasText,
  autoscalingText,
  budgetText,
  envFromText,
  envText,
  graceText,
  probesOf,
  probeText,
  secretText,
  surgeText,
  type Probed,
} from "./workload-text.ts";

/** The fields of a deployment or a sentinel shown here (a sentinel has the probes only). */
export interface DescribedWorkload extends Probed {
  env?: EnvVar[];
  envFrom?: EnvFromSource[];
  disruptionBudget?: DisruptionBudget;
  maxSurge?: string;
  maxUnavailable?: string;
  terminationGracePeriodSeconds?: bigint;
  podLabels?: Record<string, string>;
  podAnnotations?: Record<string, string>;
  secretEnv?: SecretEnvVar[];
  regions?: DeploymentPlacement[];
  status?: RegionStatus[] | RegionStatus;
}

/** The spec's keys (as a manifest writes them) that describe shows through this module, not as JSON. */
export const DESCRIBED_KEYS = new Set([
  "readinessProbe",
  "livenessProbe",
  "startupProbe",
  "env",
  "envFrom",
  "disruptionBudget",
  "maxSurge",
  "maxUnavailable",
  "terminationGracePeriodSeconds",
  "podLabels",
  "podAnnotations",
  "secretEnv",
  "regions",
]);

/** One-line fields, [label, value], for those set. */
export function workloadFields(w: DescribedWorkload): [string, string][] {
  const fields: [string, string | undefined][] = [
    ["Disruption budget", budgetText(w.disruptionBudget)],
    ["Rolling update", surgeText(w.maxSurge ?? "", w.maxUnavailable ?? "")],
    ["Termination grace", graceText(w.terminationGracePeriodSeconds)],
  ];
  return fields.filter((f): f is [string, string] => f[1] !== undefined);
}

/** Blocks, [heading, lines], for those not empty. */
export function workloadBlocks(w: DescribedWorkload): [string, string[]][] {
  const keyValues = (map: Record<string, string> = {}) =>
    Object.entries(map)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k}=${v}`);
  const probes = probesOf(w);
  const statuses = w.status === undefined ? [] : Array.isArray(w.status) ? w.status : [w.status];
  const autoscaled = (w.regions ?? []).filter((p) => p.autoscaling !== undefined);
  const blocks: [string, string[]][] = [
    [
      "Probes",
      lines(
        table(
          ["PROBE", "CHECK"],
          probes.map(([kind, probe]) => [kind, probeText(probe)]),
        ),
        probes.length,
      ),
    ],
    ["Pod labels", keyValues(w.podLabels)],
    ["Pod annotations", keyValues(w.podAnnotations)],
    ["Env from", (w.envFrom ?? []).map(envFromText)],
    ["Env", (w.env ?? []).map(envText)],
    ["Env by region", (w.regions ?? []).flatMap((p) => p.env.map((e) => `${p.region}: ${envText(e)}`))],
    ["Secret env", (w.secretEnv ?? []).map((s) => `${s.name}: ${secretText(s)}`)],
    [
      "Autoscaling",
      lines(
        table(
          ["REGION", "AUTOSCALER", "REPLICAS"],
          autoscaled.map((p) => [
            p.region,
            autoscalingText(p.autoscaling!),
            autoscalerReplicasText(statuses.find((s) => s.region === p.region)) ?? "not reported yet",
          ]),
        ),
        autoscaled.length,
      ),
    ],
  ];
  return blocks.filter(([, l]) => l.length > 0);
}

/** A table's lines, or none when it has no rows. */
function lines(text: string, rows: number): string[] {
  return rows === 0 ? [] : text.trimEnd().split("\n");
}
