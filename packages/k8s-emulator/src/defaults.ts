// Defaulting as done by the real server's defaulters and registry strategies.
// Defaulted fields are not owned by the applier, exactly like upstream, so a
// repeated apply of the same manifest is a no-op.
// Sources: pkg/apis/apps/v1/defaults.go (Deployment), pkg/apis/core/v1/defaults.go
// (PodSpec, Container, Probe, volumes, Service), pkg/registry/core/service
// (cluster IP, node port allocation and IP families).
import type { ResourceType } from "./resources.ts";
import { isObject, type JsonObject, type KubeObject } from "./util.ts";

function obj(parent: JsonObject, key: string): JsonObject {
  if (!isObject(parent[key])) parent[key] = {};
  return parent[key] as JsonObject;
}

function setDefault(target: JsonObject, key: string, value: unknown): void {
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

function defaultDeployment(d: KubeObject): void {
  const spec = obj(d, "spec");
  setDefault(spec, "replicas", 1);
  setDefault(spec, "revisionHistoryLimit", 10);
  setDefault(spec, "progressDeadlineSeconds", 600);
  const strategy = obj(spec, "strategy");
  setDefault(strategy, "type", "RollingUpdate");
  if (strategy.type === "RollingUpdate") {
    const ru = obj(strategy, "rollingUpdate");
    setDefault(ru, "maxUnavailable", "25%");
    setDefault(ru, "maxSurge", "25%");
  }
  const template = obj(spec, "template");
  obj(template, "metadata");
  const pod = obj(template, "spec");
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

function defaultService(s: KubeObject, previous: KubeObject | undefined, allocate: Allocators): void {
  const spec = obj(s, "spec");
  setDefault(spec, "type", "ClusterIP");
  setDefault(spec, "sessionAffinity", "None");
  if (spec.sessionAffinity === "ClientIP") {
    const config = obj(spec, "sessionAffinityConfig");
    setDefault(obj(config, "clientIP"), "timeoutSeconds", 10800);
  }
  const external = spec.type === "NodePort" || spec.type === "LoadBalancer";
  if (external) setDefault(spec, "externalTrafficPolicy", "Cluster");
  if (spec.type === "LoadBalancer") setDefault(spec, "allocateLoadBalancerNodePorts", true);
  if (spec.type !== "ExternalName") {
    // The cluster IP is allocated once and carried over by updates that omit it.
    const prevSpec = previous && isObject(previous.spec) ? previous.spec : {};
    setDefault(spec, "clusterIP", prevSpec.clusterIP ?? allocate.ip());
    setDefault(spec, "clusterIPs", [spec.clusterIP]);
    setDefault(spec, "ipFamilies", ["IPv4"]);
    setDefault(spec, "ipFamilyPolicy", "SingleStack");
    setDefault(spec, "internalTrafficPolicy", "Cluster");
  }
  const prevPorts = previous && isObject(previous.spec) && Array.isArray(previous.spec.ports) ? (previous.spec.ports as JsonObject[]) : [];
  if (Array.isArray(spec.ports)) {
    for (const p of spec.ports) {
      if (!isObject(p)) continue;
      setDefault(p, "protocol", "TCP");
      // targetPort 0 or "" means "same as port".
      if (p.targetPort === 0) delete p.targetPort;
      setDefault(p, "targetPort", p.port);
      if (external) {
        // Node ports survive updates that omit them, like cluster IPs.
        const kept = prevPorts.find((q) => isObject(q) && q.port === p.port && q.protocol === p.protocol)?.nodePort;
        setDefault(p, "nodePort", kept ?? allocate.nodePort());
      }
    }
  }
  if (!isObject(s.status)) s.status = { loadBalancer: {} };
}

function defaultNamespace(ns: KubeObject): void {
  const spec = obj(ns, "spec");
  setDefault(spec, "finalizers", ["kubernetes"]);
  if (!isObject(ns.status)) ns.status = { phase: "Active" };
  // Set by the NamespaceDefaultLabelName admission since 1.21.
  ns.metadata.labels = { ...(ns.metadata.labels ?? {}), "kubernetes.io/metadata.name": ns.metadata.name ?? "" };
}

/** Type Opaque (SetDefaults_Secret); stringData is written into data, base64, and not stored (core/v1 conversion). */
function defaultSecret(secret: KubeObject): void {
  setDefault(secret as JsonObject, "type", "Opaque");
  if (!isObject(secret.stringData)) return;
  const data = isObject(secret.data) ? secret.data : {};
  for (const [key, value] of Object.entries(secret.stringData)) data[key] = Buffer.from(String(value)).toString("base64");
  secret.data = data;
  delete secret.stringData;
}

export function applyDefaults(rt: ResourceType, o: KubeObject, previous: KubeObject | undefined, allocate: Allocators): void {
  if (rt.kind === "Deployment") defaultDeployment(o);
  else if (rt.kind === "Service") defaultService(o, previous, allocate);
  else if (rt.kind === "Namespace") defaultNamespace(o);
  else if (rt.kind === "Secret") defaultSecret(o);
}
