// Request validation (ARCHITECTURE §6): every field checked, errors name the field.
import { toBinary, type JsonObject } from "@bufbuild/protobuf";
import { timestampDate, type Duration, type Timestamp } from "@bufbuild/protobuf/wkt";
import {
  DeploymentDesiredStatus,
  DeploymentSchema,
  RolloutFailurePolicy,
  SentinelDesiredState,
  type Deployment,
  type Autoscaling,
  type RolloutAnalysis,
  type RolloutStrategy,
  type EnvFromSource,
  type EnvVar,
  type Probe,
  type NetworkPolicy,
  type SecretEnvVar,
  type Sentinel,
} from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { dns1123SubdomainProblem, labelKeyProblem, LabelSelectorError, labelValueProblem, parseLabelSelector, type LabelMatcher } from "@flotilla/labels";
import { mergeEnv } from "@flotilla/store";
import { invalidArgument } from "./errors.ts";
import { renderTemplate, TEMPLATE_NAMES, unknownTemplateNames } from "./rollouts/analysis.ts";
import { compileCondition, ConditionError } from "./rollouts/condition.ts";

export const LIMITS = {
  replicas: 1000,
  commandArgs: 64,
  commandArgBytes: 4096,
  envVars: 256,
  envValueBytes: 32 * 1024,
  regionsPerDeployment: 64,
  cpuMillicores: 256_000,
  memoryMib: 1_048_576,
  policySpecBytes: 256 * 1024,
  /** A whole resource, encoded: many fit in one stream message. */
  resourceBytes: 256 * 1024,
  /** Labels of one region (region.proto says so). */
  regionLabels: 64,
  /** Waves of one rollout strategy (resources.proto says so). */
  wavesPerStrategy: 20,
  /** A wave's bake or progress deadline. */
  waveDurationMs: 24 * 3_600_000,
  envFromSources: 64,
  /** Pod labels and annotations of one workload, each. */
  podMetadataEntries: 64,
  /** Pod annotations of one workload, keys and values together. */
  podAnnotationBytes: 64 * 1024,
  terminationGracePeriodSeconds: 86_400,
  /** An autoscaler's utilization targets, in percent of the pods' requests. */
  utilizationPercent: 1000,
  /** Analyses of one wave, the strategy's and its own (resources.proto says so). */
  analysesPerWave: 10,
  /** An analysis' query or URL. */
  analysisQueryBytes: 4096,
  /** Headers of a web analysis. */
  analysisHeaders: 20,
  /** An analysis' count, failureLimit, inconclusiveLimit and consecutiveErrorLimit. */
  analysisCount: 100,
  /** Secret env variables of one deployment (resources.proto says so). */
  secretEnvVars: 100,
} as const;

/**
 * Pod label and annotation keys an operator may not set: the ownership marks and the
 * selector labels (app.kubernetes.io/managed-by and everything under flotilla.dev/).
 */
const RESERVED_POD_KEY = /^(flotilla\.dev\/|app\.kubernetes\.io\/managed-by$)/;

/**
 * Namespaces refused unless --allowed-system-namespaces lists them: a workload there could
 * replace cluster components (kube-*), and `default` is where strays collect.
 */
export const SYSTEM_NAMESPACES = ["kube-system", "kube-public", "kube-node-lease", "default"] as const;

export interface ValidationOptions {
  /** System namespaces that resources may use anyway. */
  allowedSystemNamespaces: ReadonlySet<string>;
}

export const DEFAULT_VALIDATION: ValidationOptions = { allowedSystemNamespaces: new Set() };

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
// After the distribution/reference grammar: [domain[:port]/]path[:tag][@digest].
const DOMAIN = String.raw`(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?`;
const PATH_COMPONENT = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
const IMAGE_REFERENCE = new RegExp(String.raw`^(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$`);
const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;
const C_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
// A Secret's or ConfigMap's key (IsConfigMapKey): at most 253 of [-._a-zA-Z0-9], not "." or "..".
const CONFIG_KEY = /^[-._a-zA-Z0-9]{1,253}$/;

export function dnsLabel(field: string, value: string): void {
  if (value === "") throw invalidArgument(field, "is required");
  if (value.length > 63 || !DNS1123_LABEL.test(value)) {
    throw invalidArgument(field, `${JSON.stringify(value.slice(0, 80))} is not a DNS-1123 label (lowercase letters, digits and '-', at most 63)`);
  }
}

function namespace(field: string, value: string, options: ValidationOptions): void {
  dnsLabel(field, value);
  if ((SYSTEM_NAMESPACES as readonly string[]).includes(value) && !options.allowedSystemNamespaces.has(value)) {
    throw invalidArgument(field, `${JSON.stringify(value)} is a system namespace, refused unless ctrl's --allowed-system-namespaces lists it`);
  }
}

function image(field: string, value: string): void {
  if (value === "") throw invalidArgument(field, "is required");
  if (value.length > 512 || !IMAGE_REFERENCE.test(value)) {
    throw invalidArgument(field, `${JSON.stringify(value.slice(0, 80))} is not a valid image reference (e.g. nginx:1.27)`);
  }
}

function bounded(field: string, value: number, max: number): void {
  if (!Number.isInteger(value) || value < 0 || value > max) throw invalidArgument(field, `must be between 0 and ${max}, got ${value}`);
}

function byteLength(value: string): number {
  return Buffer.byteLength(value);
}

function command(field: string, args: string[]): void {
  if (args.length > LIMITS.commandArgs) throw invalidArgument(field, `at most ${LIMITS.commandArgs} arguments`);
  args.forEach((arg, i) => {
    if (byteLength(arg) > LIMITS.commandArgBytes) throw invalidArgument(`${field}[${i}]`, `longer than ${LIMITS.commandArgBytes} bytes`);
  });
}

function env(field: string, vars: EnvVar[]): void {
  if (vars.length > LIMITS.envVars) throw invalidArgument(field, `at most ${LIMITS.envVars} variables`);
  const names = new Set<string>();
  vars.forEach((v, i) => {
    if (!ENV_NAME.test(v.name) || v.name.length > 256)
      throw invalidArgument(`${field}[${i}].name`, `${JSON.stringify(v.name.slice(0, 80))} is not a valid variable name`);
    if (names.has(v.name)) throw invalidArgument(`${field}[${i}].name`, `${JSON.stringify(v.name)} is set twice`);
    names.add(v.name);
    if (byteLength(v.value) > LIMITS.envValueBytes) throw invalidArgument(`${field}[${i}].value`, `longer than ${LIMITS.envValueBytes} bytes`);
    const source = v.valueFrom?.source;
    if (v.valueFrom && source?.case === undefined) throw invalidArgument(`${field}[${i}].value_from`, "needs one of secret_key_ref and config_map_key_ref");
    if (source?.case === undefined) return;
    if (v.value !== "") throw invalidArgument(`${field}[${i}].value`, "must be empty when value_from is set");
    const at = `${field}[${i}].value_from.${source.case === "secretKeyRef" ? "secret_key_ref" : "config_map_key_ref"}`;
    objectName(`${at}.name`, source.value.name);
    if (!CONFIG_KEY.test(source.value.key) || source.value.key === "." || source.value.key === "..") {
      throw invalidArgument(
        `${at}.key`,
        `${JSON.stringify(source.value.key.slice(0, 80))} is not a valid key (at most 253 of letters, digits, '-', '_' and '.')`,
      );
    }
  });
}

/**
 * Secret env: names as env names, unique, none also a plain env variable; a value as long as
 * a plain one may be. Set and fingerprint are output only, and what a caller sends as sealed
 * is never used (the store seals: secret-env.ts).
 */
function secretEnv(field: string, secrets: SecretEnvVar[], plain: EnvVar[]): void {
  if (secrets.length > LIMITS.secretEnvVars) throw invalidArgument(field, `at most ${LIMITS.secretEnvVars} variables`);
  const names = new Set<string>();
  const plainNames = new Set(plain.map((v) => v.name));
  secrets.forEach((s, i) => {
    if (!ENV_NAME.test(s.name) || s.name.length > 256)
      throw invalidArgument(`${field}[${i}].name`, `${JSON.stringify(s.name.slice(0, 80))} is not a valid variable name`);
    if (names.has(s.name)) throw invalidArgument(`${field}[${i}].name`, `${JSON.stringify(s.name)} is listed twice`);
    if (plainNames.has(s.name)) throw invalidArgument(`${field}[${i}].name`, `${JSON.stringify(s.name)} is also a plain env variable`);
    names.add(s.name);
    if (s.value !== undefined && byteLength(s.value) > LIMITS.envValueBytes)
      throw invalidArgument(`${field}[${i}].value`, `longer than ${LIMITS.envValueBytes} bytes`);
  });
}

/** The name of a Secret or ConfigMap: a DNS-1123 subdomain. */
function objectName(field: string, value: string): void {
  if (value === "") throw invalidArgument(field, "is required");
  const problem = dns1123SubdomainProblem(value);
  if (problem) throw invalidArgument(field, `${JSON.stringify(value.slice(0, 80))}: ${problem}`);
}

function envFrom(field: string, sources: EnvFromSource[]): void {
  if (sources.length > LIMITS.envFromSources) throw invalidArgument(field, `at most ${LIMITS.envFromSources} sources`);
  sources.forEach((s, i) => {
    const { source } = s;
    if (source.case === undefined) throw invalidArgument(`${field}[${i}]`, "needs one of secret_name and config_map_name");
    objectName(`${field}[${i}].${source.case === "secretName" ? "secret_name" : "config_map_name"}`, source.value);
    if (s.prefix !== "" && (s.prefix.length > 253 || !C_IDENTIFIER.test(s.prefix))) {
      throw invalidArgument(
        `${field}[${i}].prefix`,
        `${JSON.stringify(s.prefix.slice(0, 80))} is not a C identifier (letters, digits and '_', not starting with a digit)`,
      );
    }
  });
}

/**
 * An IntOrString as Kubernetes takes it for a count or share of pods: a count ("1") or a
 * percentage ("25%"), at most 100% where it is a share of the pods that may be missing.
 */
function countOrPercent(field: string, value: string, upToHundredPercent: boolean): void {
  const percent = /^(0|[1-9]\d{0,3})%$/.exec(value);
  if (percent ? upToHundredPercent && Number(percent[1]) > 100 : !/^(0|[1-9]\d{0,5})$/.test(value)) {
    throw invalidArgument(
      field,
      `must be a count ("1") or a percentage ("25%"${upToHundredPercent ? ", at most 100%" : ""}), not ${JSON.stringify(value.slice(0, 80))}`,
    );
  }
}

/** The pod template's parameters beyond the container: budget, rolling update, grace, labels and annotations. */
function podParameters(field: string, d: Deployment): void {
  const budget = d.disruptionBudget?.budget;
  if (d.disruptionBudget && budget?.case === undefined) throw invalidArgument(`${field}.disruption_budget`, "needs one of min_available and max_unavailable");
  if (budget?.case !== undefined) {
    countOrPercent(`${field}.disruption_budget.${budget.case === "minAvailable" ? "min_available" : "max_unavailable"}`, budget.value, true);
  }
  if (d.maxSurge !== "") countOrPercent(`${field}.max_surge`, d.maxSurge, false);
  if (d.maxUnavailable !== "") countOrPercent(`${field}.max_unavailable`, d.maxUnavailable, true);
  const zero = (value: string) => value === "0" || value === "0%";
  if (zero(d.maxSurge) && zero(d.maxUnavailable)) throw invalidArgument(`${field}.max_unavailable`, "may not be 0 when max_surge is 0 too");
  const grace = d.terminationGracePeriodSeconds;
  if (grace !== undefined && (grace < 0n || grace > BigInt(LIMITS.terminationGracePeriodSeconds))) {
    throw invalidArgument(`${field}.termination_grace_period_seconds`, `must be from 0 to ${LIMITS.terminationGracePeriodSeconds}, not ${grace}`);
  }
  podMetadata(`${field}.pod_labels`, d.podLabels, labelValueProblem);
  podMetadata(`${field}.pod_annotations`, d.podAnnotations, () => undefined);
  const annotationBytes = Object.entries(d.podAnnotations).reduce((sum, [key, value]) => sum + byteLength(key) + byteLength(value), 0);
  if (annotationBytes > LIMITS.podAnnotationBytes) throw invalidArgument(`${field}.pod_annotations`, `larger than ${LIMITS.podAnnotationBytes} bytes`);
}

/** Keys in Kubernetes' qualified-name syntax, none of them ours; an error names the key. */
function podMetadata(field: string, entries: Record<string, string>, valueProblem: (value: string) => string | undefined): void {
  const keys = Object.keys(entries);
  if (keys.length > LIMITS.podMetadataEntries) throw invalidArgument(field, `at most ${LIMITS.podMetadataEntries} entries, got ${keys.length}`);
  for (const key of keys) {
    const at = `${field}[${JSON.stringify(key.slice(0, 80))}]`;
    if (RESERVED_POD_KEY.test(key)) throw invalidArgument(at, "is reserved for flotilla's ownership marks and selector labels");
    const problem = labelKeyProblem(key) ?? valueProblem(entries[key]!);
    if (problem) throw invalidArgument(at, problem);
  }
}

function required<T>(field: string, value: T | undefined): T {
  if (value === undefined) throw invalidArgument(field, "is required");
  return value;
}

export function deployment(value: Deployment | undefined, options = DEFAULT_VALIDATION, field = "deployment"): Deployment {
  const d = required(field, value);
  dnsLabel(`${field}.id`, d.id);
  namespace(`${field}.namespace`, d.namespace, options);
  image(`${field}.image`, d.image);
  command(`${field}.command`, d.command);
  env(`${field}.env`, d.env);
  envFrom(`${field}.env_from`, d.envFrom);
  secretEnv(`${field}.secret_env`, d.secretEnv, d.env);
  podParameters(field, d);
  bounded(`${field}.port`, d.port, 65535);
  bounded(`${field}.cpu_millicores`, d.cpuMillicores, LIMITS.cpuMillicores);
  bounded(`${field}.memory_mib`, d.memoryMib, LIMITS.memoryMib);
  if (!(d.desiredStatus in DeploymentDesiredStatus)) throw invalidArgument(`${field}.desired_status`, `unknown value ${d.desiredStatus}`);
  if (d.regions.length > LIMITS.regionsPerDeployment) throw invalidArgument(`${field}.regions`, `at most ${LIMITS.regionsPerDeployment} regions`);
  const regions = new Set<string>();
  d.regions.forEach((p, i) => {
    dnsLabel(`${field}.regions[${i}].region`, p.region);
    if (regions.has(p.region)) throw invalidArgument(`${field}.regions[${i}].region`, `${JSON.stringify(p.region)} is listed twice`);
    regions.add(p.region);
    bounded(`${field}.regions[${i}].replicas`, p.replicas, LIMITS.replicas);
    if (p.autoscaling) autoscaling(`${field}.regions[${i}].autoscaling`, p.autoscaling);
    regionEnv(`${field}.regions[${i}].env`, p.env, d);
  });
  probes(field, d);
  if (d.strategy) rolloutStrategy(`${field}.strategy`, d.strategy, regions, new Set(d.secretEnv.map((s) => s.name)));
  if (toBinary(DeploymentSchema, d).length > LIMITS.resourceBytes) throw invalidArgument(field, `larger than ${LIMITS.resourceBytes} bytes encoded`);
  return d;
}

/** An autoscaler's bounds (Kubernetes': min at least 1, max at least min) and targets, in percent of the requests. */
function autoscaling(field: string, a: Autoscaling): void {
  if (!Number.isInteger(a.minReplicas) || a.minReplicas < 1) throw invalidArgument(`${field}.min_replicas`, `must be at least 1, got ${a.minReplicas}`);
  if (!Number.isInteger(a.maxReplicas) || a.maxReplicas > LIMITS.replicas) {
    throw invalidArgument(`${field}.max_replicas`, `must be at most ${LIMITS.replicas}, got ${a.maxReplicas}`);
  }
  if (a.maxReplicas < a.minReplicas) throw invalidArgument(`${field}.max_replicas`, `must be at least min_replicas (${a.minReplicas}), got ${a.maxReplicas}`);
  const targets = { target_cpu_utilization_percent: a.targetCpuUtilizationPercent, target_memory_utilization_percent: a.targetMemoryUtilizationPercent };
  for (const [name, value] of Object.entries(targets)) {
    if (!Number.isInteger(value) || value < 0 || value > LIMITS.utilizationPercent) {
      throw invalidArgument(`${field}.${name}`, `must be from 1 to ${LIMITS.utilizationPercent} percent, got ${value}`);
    }
  }
  if (a.targetCpuUtilizationPercent === 0 && a.targetMemoryUtilizationPercent === 0) {
    throw invalidArgument(field, "needs target_cpu_utilization_percent or target_memory_utilization_percent");
  }
}

/** A region's env values: valid variables, none of them a secret one, and with the deployment's at most LIMITS.envVars together. */
function regionEnv(field: string, vars: EnvVar[], d: Deployment): void {
  env(field, vars);
  const secrets = new Set(d.secretEnv.map((s) => s.name));
  vars.forEach((v, i) => {
    if (secrets.has(v.name)) throw invalidArgument(`${field}[${i}].name`, `${JSON.stringify(v.name)} is a secret env variable`);
  });
  if (mergeEnv(d.env, vars).length > LIMITS.envVars) throw invalidArgument(field, `with the deployment's env, more than ${LIMITS.envVars} variables`);
}

/** A workload's probes: one handler each, ports and bounds as Kubernetes takes them. */
function probes(field: string, w: { readinessProbe?: Probe; livenessProbe?: Probe; startupProbe?: Probe }): void {
  if (w.readinessProbe) probe(`${field}.readiness_probe`, w.readinessProbe, false);
  if (w.livenessProbe) probe(`${field}.liveness_probe`, w.livenessProbe, true);
  if (w.startupProbe) probe(`${field}.startup_probe`, w.startupProbe, true);
}

function probe(field: string, p: Probe, successMustBeOne: boolean): void {
  const port = (at: string, value: number) => {
    if (!Number.isInteger(value) || value < 1 || value > 65535) throw invalidArgument(at, `must be a port from 1 to 65535, not ${value}`);
  };
  const handler = p.handler;
  if (handler.case === undefined) throw invalidArgument(field, "needs one of http_get, tcp_socket and exec");
  if (handler.case === "httpGet") {
    port(`${field}.http_get.port`, handler.value.port);
    const path = handler.value.path;
    if (path !== "" && (!path.startsWith("/") || path.length > 2048 || /[\s\p{Cc}]/u.test(path))) {
      throw invalidArgument(`${field}.http_get.path`, "must start with / and hold no spaces or control characters (at most 2048)");
    }
  } else if (handler.case === "tcpSocket") {
    port(`${field}.tcp_socket.port`, handler.value.port);
  } else {
    const command = handler.value.command;
    if (command.length === 0 || command.length > LIMITS.commandArgs)
      throw invalidArgument(`${field}.exec.command`, `needs 1 to ${LIMITS.commandArgs} arguments`);
    command.forEach((arg, i) => {
      if (Buffer.byteLength(arg) > LIMITS.commandArgBytes) throw invalidArgument(`${field}.exec.command[${i}]`, `longer than ${LIMITS.commandArgBytes} bytes`);
    });
  }
  const within = (name: string, value: number, max: number) => {
    if (!Number.isInteger(value) || value < 0 || value > max) throw invalidArgument(`${field}.${name}`, `must be from 0 to ${max}, not ${value}`);
  };
  within("initial_delay_seconds", p.initialDelaySeconds, 3600);
  within("period_seconds", p.periodSeconds, 3600);
  within("timeout_seconds", p.timeoutSeconds, 3600);
  within("success_threshold", p.successThreshold, 100);
  within("failure_threshold", p.failureThreshold, 100);
  if (successMustBeOne && p.successThreshold > 1) throw invalidArgument(`${field}.success_threshold`, "must be 1 for liveness and startup probes");
}

/**
 * Waves of distinct names, naming placement regions (`placed`; any region for a default
 * strategy, whose waves apply to the regions a deployment has), with selectors that parse and
 * bounds that hold.
 */
/**
 * `placed`: the deployment's regions; `secrets`: its secret env variables' names (a web
 * analysis' secret headers must name one). Without them (a strategy of no deployment), regions
 * are names only and no secret header is allowed.
 */
export function rolloutStrategy(field: string, s: RolloutStrategy, placed?: ReadonlySet<string>, secrets: ReadonlySet<string> = new Set()): void {
  if (s.waves.length > LIMITS.wavesPerStrategy) throw invalidArgument(`${field}.waves`, `at most ${LIMITS.wavesPerStrategy} waves`);
  if (!(s.onFailure in RolloutFailurePolicy)) throw invalidArgument(`${field}.on_failure`, `unknown value ${s.onFailure}`);
  const names = new Set<string>();
  s.waves.forEach((wave, i) => {
    const at = `${field}.waves[${i}]`;
    dnsLabel(`${at}.name`, wave.name);
    if (names.has(wave.name)) throw invalidArgument(`${at}.name`, `${JSON.stringify(wave.name)} names two waves`);
    names.add(wave.name);
    wave.regions.forEach((region, j) => {
      if (!placed) dnsLabel(`${at}.regions[${j}]`, region);
      else if (!placed.has(region)) throw invalidArgument(`${at}.regions[${j}]`, `${JSON.stringify(region)} is not one of the deployment's regions`);
    });
    if (wave.selector !== "") {
      try {
        parseLabelSelector(wave.selector);
      } catch (error) {
        throw invalidArgument(`${at}.selector`, error instanceof Error ? error.message : String(error));
      }
    }
    if (wave.maxParallel !== "" && !/^([1-9]\d{0,3}|([1-9]\d?|100)%)$/.test(wave.maxParallel)) {
      throw invalidArgument(
        `${at}.max_parallel`,
        `must be a count from 1 ("2") or a percentage from 1 to 100 ("50%"), not ${JSON.stringify(wave.maxParallel)}`,
      );
    }
    waveDuration(`${at}.bake`, wave.bake, 0);
    waveDuration(`${at}.progress_deadline`, wave.progressDeadline, 1000);
    wave.analysis.forEach((a, j) => {
      rolloutAnalysis(`${at}.analysis[${j}]`, a, secrets);
    });
    const inWave = [...s.analysis, ...wave.analysis];
    if (inWave.length > LIMITS.analysesPerWave)
      throw invalidArgument(`${at}.analysis`, `at most ${LIMITS.analysesPerWave} analyses per wave, the strategy's included`);
    const twice = inWave.find((a, j) => inWave.findIndex((b) => b.name === a.name) !== j);
    if (twice) throw invalidArgument(`${at}.analysis`, `${JSON.stringify(twice.name)} names two analyses of the wave (the strategy's included)`);
  });
  s.analysis.forEach((a, j) => {
    rolloutAnalysis(`${field}.analysis[${j}]`, a, secrets);
  });
  if (s.analysis.length > LIMITS.analysesPerWave) throw invalidArgument(`${field}.analysis`, `at most ${LIMITS.analysesPerWave} analyses`);
  if (new Set(s.analysis.map((a) => a.name)).size !== s.analysis.length) throw invalidArgument(`${field}.analysis`, "an analysis name is used twice");
}

/** An HTTP header's name (RFC 9110 token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A JSON path as a web analysis' json_path takes it: $ then .name, [index] or ['name'] steps. */
const JSON_PATH = /^\$(\.[A-Za-z_][A-Za-z0-9_-]*|\[\d+\]|\['[^']*'\])*$/;

/** One analysis: a provider, templates, durations, conditions that compile and limits in bounds. */
function rolloutAnalysis(at: string, a: RolloutAnalysis, secrets: ReadonlySet<string>): void {
  dnsLabel(`${at}.name`, a.name);
  const template = (field: string, text: string) => {
    if (text.trim() === "") throw invalidArgument(field, "is required");
    if (Buffer.byteLength(text) > LIMITS.analysisQueryBytes) throw invalidArgument(field, `at most ${LIMITS.analysisQueryBytes} bytes`);
    const unknown = unknownTemplateNames(text);
    if (unknown.length > 0) throw invalidArgument(field, `unknown template {{${unknown[0]}}} (known: ${TEMPLATE_NAMES.map((n) => `{{${n}}}`).join(", ")})`);
  };
  switch (a.provider.case) {
    case "prometheus":
      template(`${at}.prometheus.query`, a.provider.value.query);
      break;
    case "web": {
      const web = a.provider.value;
      template(`${at}.web.url`, web.url);
      let url: URL | undefined;
      try {
        url = new URL(renderTemplate(web.url, { region: "r", namespace: "n", deployment: "d", revision: "1" }));
      } catch {}
      if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) throw invalidArgument(`${at}.web.url`, "must be an http or https URL");
      if (url.username || url.password) throw invalidArgument(`${at}.web.url`, "must not carry credentials (use headers)");
      if (!JSON_PATH.test(web.jsonPath))
        throw invalidArgument(`${at}.web.json_path`, `must be like $.data.value or $.items[0].value, not ${JSON.stringify(web.jsonPath)}`);
      const headers = Object.entries(web.headers);
      if (headers.length > LIMITS.analysisHeaders) throw invalidArgument(`${at}.web.headers`, `at most ${LIMITS.analysisHeaders}`);
      for (const [name, value] of headers) {
        if (!HEADER_NAME.test(name)) throw invalidArgument(`${at}.web.headers`, `${JSON.stringify(name)} is not a header name`);
        if (/[\r\n\0]/.test(value) || value.length > 4096) throw invalidArgument(`${at}.web.headers[${name}]`, "at most 4096 characters, no line breaks");
      }
      const secretHeaders = Object.entries(web.secretHeaders);
      if (headers.length + secretHeaders.length > LIMITS.analysisHeaders)
        throw invalidArgument(`${at}.web.secret_headers`, `at most ${LIMITS.analysisHeaders} headers in all`);
      for (const [name, variable] of secretHeaders) {
        if (!HEADER_NAME.test(name)) throw invalidArgument(`${at}.web.secret_headers`, `${JSON.stringify(name)} is not a header name`);
        if (web.headers[name] !== undefined) throw invalidArgument(`${at}.web.secret_headers[${name}]`, "is in headers too");
        if (!secrets.has(variable))
          throw invalidArgument(`${at}.web.secret_headers[${name}]`, `${JSON.stringify(variable)} is not one of the deployment's secret env variables`);
      }
      break;
    }
    default:
      throw invalidArgument(`${at}`, "needs a provider: prometheus or web");
  }
  waveDuration(`${at}.interval`, a.interval, 1000);
  waveDuration(`${at}.initial_delay`, a.initialDelay, 0);
  if (a.count !== undefined && !(a.count >= 1 && a.count <= LIMITS.analysisCount))
    throw invalidArgument(`${at}.count`, `must be from 1 to ${LIMITS.analysisCount}`);
  for (const [name, value] of [
    ["failure_limit", a.failureLimit],
    ["inconclusive_limit", a.inconclusiveLimit],
    ["consecutive_error_limit", a.consecutiveErrorLimit],
  ] as const) {
    if (value !== undefined && !(value >= 0 && value <= LIMITS.analysisCount))
      throw invalidArgument(`${at}.${name}`, `must be from 0 to ${LIMITS.analysisCount}`);
  }
  if (a.successCondition === "" && a.failureCondition === "")
    throw invalidArgument(`${at}`, "needs a success_condition, a failure_condition or both (e.g. result < 0.01)");
  for (const [name, text] of [
    ["success_condition", a.successCondition],
    ["failure_condition", a.failureCondition],
  ] as const) {
    if (text === "") continue;
    try {
      compileCondition(text);
    } catch (error) {
      throw invalidArgument(`${at}.${name}`, error instanceof ConditionError ? error.message : String(error));
    }
  }
}

/** Absent, or from `min` ms to LIMITS.waveDurationMs. */
function waveDuration(field: string, value: Duration | undefined, min: number): void {
  if (!value) return;
  const ms = Number(value.seconds) * 1000 + Math.floor(value.nanos / 1_000_000);
  if (value.seconds < 0n || value.nanos < 0 || ms < min || ms > LIMITS.waveDurationMs) {
    throw invalidArgument(field, `must be from ${min / 1000}s to ${LIMITS.waveDurationMs / 3_600_000}h`);
  }
}

export function sentinel(value: Sentinel | undefined, options = DEFAULT_VALIDATION, field = "sentinel"): Sentinel {
  const s = required(field, value);
  dnsLabel(`${field}.id`, s.id);
  dnsLabel(`${field}.region`, s.region);
  namespace(`${field}.namespace`, s.namespace, options);
  image(`${field}.image`, s.image);
  bounded(`${field}.replicas`, s.replicas, LIMITS.replicas);
  bounded(`${field}.port`, s.port, 65535);
  if (!(s.desiredState in SentinelDesiredState)) throw invalidArgument(`${field}.desired_state`, `unknown value ${s.desiredState}`);
  probes(field, s);
  return s;
}

export function networkPolicy(value: NetworkPolicy | undefined, options = DEFAULT_VALIDATION, field = "network_policy"): NetworkPolicy {
  const p = required(field, value);
  dnsLabel(`${field}.id`, p.id);
  dnsLabel(`${field}.region`, p.region);
  namespace(`${field}.namespace`, p.namespace, options);
  const spec: JsonObject = required(`${field}.spec`, p.spec);
  if (Object.keys(spec).length === 0) throw invalidArgument(`${field}.spec`, "must not be empty");
  if (byteLength(JSON.stringify(spec)) > LIMITS.policySpecBytes) {
    throw invalidArgument(`${field}.spec`, `larger than ${LIMITS.policySpecBytes} bytes`);
  }
  return p;
}

/** A region's Prometheus address: empty (none), or an http(s) URL without credentials, query or fragment. */
export function prometheusAddress(address: string, field = "region.metrics.prometheus.address"): string {
  if (address === "") return "";
  let url: URL | undefined;
  try {
    url = new URL(address);
  } catch {}
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || address.length > 2048)
    throw invalidArgument(field, "must be an http or https URL of at most 2048 characters");
  if (url.username || url.password || url.search || url.hash) throw invalidArgument(field, "must carry no credentials, query or fragment");
  return address.replace(/\/+$/, "");
}

/** A region's labels: Kubernetes label syntax, at most LIMITS.regionLabels; an error names the label. */
export function regionLabels(labels: Record<string, string>, field = "region.labels"): Record<string, string> {
  const keys = Object.keys(labels);
  if (keys.length > LIMITS.regionLabels) throw invalidArgument(field, `at most ${LIMITS.regionLabels} labels, got ${keys.length}`);
  for (const key of keys) {
    const problem = labelKeyProblem(key) ?? labelValueProblem(labels[key]!);
    if (problem) throw invalidArgument(`${field}[${JSON.stringify(key.slice(0, 80))}]`, problem);
  }
  return labels;
}

/** A label selector's matcher (Kubernetes syntax; empty selects everything). */
export function labelSelector(value: string, field = "label_selector"): LabelMatcher {
  try {
    return parseLabelSelector(value);
  } catch (error) {
    if (error instanceof LabelSelectorError) throw invalidArgument(field, error.message);
    throw error;
  }
}

/** A resource id in Get/Delete requests. */
export function id(value: string, field = "id"): string {
  dnsLabel(field, value);
  return value;
}

export const MAX_CHANGE_MESSAGE_LENGTH = 1024;

/** A write's message (why it was made): at most MAX_CHANGE_MESSAGE_LENGTH characters. */
export function changeMessage(value: string, field = "message"): string {
  if (value.length > MAX_CHANGE_MESSAGE_LENGTH) throw invalidArgument(field, `at most ${MAX_CHANGE_MESSAGE_LENGTH} characters`);
  return value;
}

/** A token's requested expiration (CreateAgentToken, CreateOperator). */
type Expiration = { case: "expireTime"; value: Timestamp } | { case: "ttl"; value: Duration } | { case: undefined; value?: undefined };

/** Unix ms of the requested expiry, or undefined for none. */
export function expiry(req: { expiration: Expiration }, now: number): number | undefined {
  const { expiration } = req;
  if (expiration.case === "expireTime") {
    const at = timestampDate(expiration.value).getTime();
    if (!(at > now)) throw invalidArgument("expire_time", "must be in the future");
    return at;
  }
  if (expiration.case === "ttl") {
    const ms = Number(expiration.value.seconds) * 1000 + Math.floor(expiration.value.nanos / 1e6);
    if (!(ms > 0)) throw invalidArgument("ttl", "must be positive");
    return now + ms;
  }
  return undefined;
}
