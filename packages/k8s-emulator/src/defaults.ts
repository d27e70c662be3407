// Defaulting helpers shared by the kinds' strategies (kinds/), which call them from their
// `defaults`. Defaulted fields are not owned by the applier, exactly like upstream, so a
// repeated apply of the same manifest is a no-op.
// Source: pkg/apis/core/v1/defaults.go (PodSpec, Container, Probe, volumes).
import { isObject, type JsonObject } from "./util.ts";

/** The object at `parent[key]`, created empty when missing. */
export function objectField(parent: JsonObject, key: string): JsonObject {
  if (!isObject(parent[key])) parent[key] = {};
  return parent[key] as JsonObject;
}

export function setDefault(target: JsonObject, key: string, value: unknown): void {
  if (target[key] === undefined || target[key] === null) target[key] = value;
}

function defaultContainer(c: unknown): void {
  if (!isObject(c)) return;
  const image = typeof c.image === "string" ? c.image : "";
  const lastPart = image.slice(image.lastIndexOf("/") + 1);
  const tagged = lastPart.includes(":") || image.includes("@");
  setDefault(c, "imagePullPolicy", !tagged || image.endsWith(":latest") ? "Always" : "IfNotPresent");
  setDefault(c, "terminationMessagePath", "/dev/termination-log");
  setDefault(c, "terminationMessagePolicy", "File");
  setDefault(c, "resources", {});
  if (Array.isArray(c.ports)) for (const p of c.ports) if (isObject(p)) setDefault(p, "protocol", "TCP");
  for (const probe of ["livenessProbe", "readinessProbe", "startupProbe"]) if (isObject(c[probe])) defaultProbe(c[probe]);
  // SetDefaults_ObjectFieldSelector: env valueFrom.fieldRef.apiVersion v1.
  if (Array.isArray(c.env)) {
    for (const e of c.env) {
      if (isObject(e) && isObject(e.valueFrom) && isObject(e.valueFrom.fieldRef)) setDefault(e.valueFrom.fieldRef, "apiVersion", "v1");
    }
  }
}

/** SetDefaults_Probe and SetDefaults_HTTPGetAction. */
function defaultProbe(p: JsonObject): void {
  setDefault(p, "timeoutSeconds", 1);
  setDefault(p, "periodSeconds", 10);
  setDefault(p, "successThreshold", 1);
  setDefault(p, "failureThreshold", 3);
  if (isObject(p.httpGet)) {
    setDefault(p.httpGet, "path", "/");
    setDefault(p.httpGet, "scheme", "HTTP");
  }
}

/** Secret, ConfigMap, DownwardAPI and Projected volumes default to mode 0644 (420). */
function defaultVolume(v: unknown): void {
  if (!isObject(v)) return;
  for (const source of ["secret", "configMap", "downwardAPI", "projected"]) {
    if (isObject(v[source])) setDefault(v[source], "defaultMode", 420);
  }
}

/** The pod spec defaults (SetDefaults_PodSpec) and those of its containers and volumes. */
export function defaultPodSpec(pod: JsonObject): void {
  setDefault(pod, "restartPolicy", "Always");
  setDefault(pod, "terminationGracePeriodSeconds", 30);
  setDefault(pod, "dnsPolicy", "ClusterFirst");
  setDefault(pod, "securityContext", {});
  setDefault(pod, "schedulerName", "default-scheduler");
  for (const list of ["containers", "initContainers"]) {
    if (Array.isArray(pod[list])) for (const c of pod[list] as unknown[]) defaultContainer(c);
  }
  if (Array.isArray(pod.volumes)) for (const v of pod.volumes) defaultVolume(v);
}

/** Allocates cluster IPs and node ports (the registry's allocators). */
export interface Allocators {
  ip(): string;
  nodePort(): number;
}
