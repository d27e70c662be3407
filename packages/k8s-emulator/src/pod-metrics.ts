// The pods' own metrics, as an instrumented service exposes them and Prometheus scrapes them:
// `http_requests_total{namespace,deployment,pod,revision,code}` per ready pod, rising at
// REQUESTS_PER_SECOND from the moment the pod became ready. A pod whose image matches the
// erroring pattern is ready (its probes pass) but answers ERROR_SHARE of its requests with 500:
// the healthy-but-wrong release that only a metric analysis catches. Served at
// /_emulator/metrics (not /metrics: on an API server that path is the server's own).
//
// Derived from the Pod objects at scrape time, so nothing is kept: a counter is the time since
// the pod's Ready condition turned True times the rate. Both codes are written for every pod
// (a healthy pod's 500 series is 0), so an error-rate query has data for a healthy revision too.
import { isObject, type JsonObject, type KubeObject } from "./util.ts";
import { POD_TEMPLATE_HASH } from "./workloads.ts";

export const REQUESTS_PER_SECOND = 10;
/** The share of an erroring pod's requests answered with 500. */
export const ERROR_SHARE = 0.2;
/** The pod label that names the revision (the agent's flotilla.dev/revision). */
export const REVISION_LABEL = "flotilla.dev/revision";

/** When the pod became ready (ms since the epoch), or undefined while it is not. */
function readySince(pod: KubeObject): number | undefined {
  const status = isObject(pod.status) ? pod.status : {};
  const conditions = Array.isArray(status.conditions) ? (status.conditions as JsonObject[]) : [];
  const ready = conditions.find((c) => c.type === "Ready");
  if (ready?.status !== "True" || typeof ready.lastTransitionTime !== "string") return undefined;
  const at = Date.parse(ready.lastTransitionTime);
  return Number.isNaN(at) ? undefined : at;
}

/** The Deployment a pod belongs to: its ReplicaSet's name without the pod-template-hash. */
function deploymentOf(pod: KubeObject): string {
  const owners = Array.isArray(pod.metadata.ownerReferences) ? (pod.metadata.ownerReferences as JsonObject[]) : [];
  const replicaSet = owners.find((o) => o.kind === "ReplicaSet" && typeof o.name === "string")?.name as string | undefined;
  const hash = pod.metadata.labels?.[POD_TEMPLATE_HASH];
  if (replicaSet === undefined) return "";
  return hash !== undefined && replicaSet.endsWith(`-${hash}`) ? replicaSet.slice(0, -hash.length - 1) : replicaSet;
}

function images(pod: KubeObject): string[] {
  const spec = isObject(pod.spec) ? pod.spec : {};
  const containers = Array.isArray(spec.containers) ? (spec.containers as JsonObject[]) : [];
  return containers.map((c) => (typeof c.image === "string" ? c.image : ""));
}

const escapeLabelValue = (value: string) => value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");

/** The Prometheus text exposition of `pods` at `now`. */
export function podMetricsText(pods: readonly KubeObject[], erroringImage: RegExp, now: number): string {
  const lines = ["# HELP http_requests_total HTTP requests the pod answered, by status code (emulated traffic).", "# TYPE http_requests_total counter"];
  for (const pod of pods) {
    const since = readySince(pod);
    if (since === undefined) continue;
    const total = Math.floor((Math.max(0, now - since) / 1000) * REQUESTS_PER_SECOND);
    const errors = images(pod).some((image) => erroringImage.test(image)) ? Math.floor(total * ERROR_SHARE) : 0;
    const labels = [
      ["namespace", pod.metadata.namespace ?? ""],
      ["deployment", deploymentOf(pod)],
      ["pod", pod.metadata.name],
      ["revision", pod.metadata.labels?.[REVISION_LABEL] ?? ""],
    ]
      .map(([name, value]) => `${name}="${escapeLabelValue(value!)}"`)
      .join(",");
    lines.push(`http_requests_total{${labels},code="200"} ${total - errors}`);
    lines.push(`http_requests_total{${labels},code="500"} ${errors}`);
  }
  return `${lines.join("\n")}\n`;
}
