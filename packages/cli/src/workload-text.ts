// A workload's service fields in words, as `flotilla describe` and the console both show them:
// probes (Kubernetes' defaults written out, as kubectl describe does), the disruption budget,
// surge parameters, termination grace, env from references, autoscaling. Secret env appears by
// name, set and fingerprint only: a response never holds a value, and nothing here reads one.
// Browser-safe: the console bundles it.
import type { Autoscaling, DisruptionBudget, EnvFromSource, EnvVar, Probe, RegionStatus, SecretEnvVar } from "@flotilla/proto/ctrl/v1/resources_pb.js";

/** The probes a workload may have, as describe names them. */
export interface Probed {
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
}

/** [kind, probe] for each probe set: readiness, liveness, startup. */
export function probesOf(workload: Probed): [string, Probe][] {
  const all: [string, Probe | undefined][] = [
    ["readiness", workload.readinessProbe],
    ["liveness", workload.livenessProbe],
    ["startup", workload.startupProbe],
  ];
  return all.filter((entry): entry is [string, Probe] => entry[1] !== undefined);
}

/** kubectl's one line: `http-get http://:8080/healthz delay=5s timeout=1s period=10s #success=1 #failure=3`; zeros read as Kubernetes' defaults. */
export function probeText(probe: Probe): string {
  const h = probe.handler;
  const handler =
    h.case === "httpGet"
      ? `http-get http://:${h.value.port}${h.value.path || "/"}`
      : h.case === "tcpSocket"
        ? `tcp-socket :${h.value.port}`
        : h.case === "exec"
          ? `exec [${h.value.command.join(" ")}]`
          : "no handler";
  const or = (value: number, fallback: number) => value || fallback;
  return `${handler} delay=${probe.initialDelaySeconds}s timeout=${or(probe.timeoutSeconds, 1)}s period=${or(probe.periodSeconds, 10)}s #success=${or(probe.successThreshold, 1)} #failure=${or(probe.failureThreshold, 3)}`;
}

/** "min available 1", "max unavailable 50%"; undefined without a budget. */
export function budgetText(budget: DisruptionBudget | undefined): string | undefined {
  const b = budget?.budget;
  if (b?.case === "minAvailable") return `min available ${b.value}`;
  if (b?.case === "maxUnavailable") return `max unavailable ${b.value}`;
  return undefined;
}

/** "max surge 1, max unavailable 0"; an unset one reads as Kubernetes' 25%; undefined when neither is set. */
export function surgeText(maxSurge: string, maxUnavailable: string): string | undefined {
  if (!maxSurge && !maxUnavailable) return undefined;
  return `max surge ${maxSurge || "25%"}, max unavailable ${maxUnavailable || "25%"}`;
}

/** "30s"; undefined when unset (Kubernetes' 30 s). */
export function graceText(seconds: bigint | undefined): string | undefined {
  return seconds === undefined ? undefined : `${seconds}s`;
}

/** "secret db key password", "configmap settings key level"; undefined for a literal value. */
export function valueFromText(env: EnvVar): string | undefined {
  const s = env.valueFrom?.source;
  if (s?.case === "secretKeyRef") return `secret ${s.value.name} key ${s.value.key}`;
  if (s?.case === "configMapKeyRef") return `configmap ${s.value.name} key ${s.value.key}`;
  return undefined;
}

/** NAME=value, as a shell or an env file has it (a value with a control character quoted, JSON, to stay on its line); a reference as `NAME from secret x key y`. */
export function envText(env: EnvVar): string {
  const from = valueFromText(env);
  if (from !== undefined) return `${env.name} from ${from}`;
  return `${env.name}=${/\p{Cc}/u.test(env.value) ? JSON.stringify(env.value) : env.value}`;
}

/** "every key of secret db-creds, prefixed DB_". */
export function envFromText(source: EnvFromSource): string {
  const s = source.source;
  const from = s.case === "secretName" ? `secret ${s.value}` : s.case === "configMapName" ? `configmap ${s.value}` : "nothing";
  return `every key of ${from}${source.prefix ? `, prefixed ${source.prefix}` : ""}`;
}

/** "2–10 replicas, cpu 70%, memory 80%". */
export function autoscalingText(a: Autoscaling): string {
  const targets = [
    a.targetCpuUtilizationPercent ? `cpu ${a.targetCpuUtilizationPercent}%` : "",
    a.targetMemoryUtilizationPercent ? `memory ${a.targetMemoryUtilizationPercent}%` : "",
  ].filter(Boolean);
  return [`${a.minReplicas}–${a.maxReplicas} replicas`, ...targets].join(", ");
}

/** "current 3, desired 4", as the autoscaler last reported; undefined before it has. */
export function autoscalerReplicasText(status: RegionStatus | undefined): string | undefined {
  if (!status || (status.autoscalerCurrentReplicas === 0 && status.autoscalerDesiredReplicas === 0)) return undefined;
  return `current ${status.autoscalerCurrentReplicas}, desired ${status.autoscalerDesiredReplicas}`;
}

/** "set, fingerprint 0123456789abcdef" or "not set": a secret env variable without its value. */
export function secretText(secret: SecretEnvVar): string {
  return secret.set ? `set, fingerprint ${secret.fingerprint}` : "not set";
}
