// Manifests: YAML (several documents per file) or JSON files, a directory of them, or stdin.
//
//   apiVersion: flotilla.dev/v1
//   kind: Deployment            # Sentinel, NetworkPolicy, Region, Project
//   metadata:
//     name: web
//     project: team-a           # a Deployment's, Sentinel's or NetworkPolicy's (default: default)
//     labels: { tier: canary }  # a Region's only (Kubernetes label syntax)
//   spec:                       # the protocol's fields (proto/ctrl/v1/resources.proto); a Region's
//                               # only metrics: {prometheus: {address: http://…}} (rollout analysis)
//     namespace: demo
//     image: nginx:1.27
//     regions: [{ region: local, replicas: 2 }]
//     strategy:                 # a staged rollout (ARCHITECTURE §9); durations as 5s, 10m, 1h30m
//       waves: [{ name: canary, regions: [local], bake: 5s }, { name: rest, maxParallel: "50%" }]
//       onFailure: ROLLBACK
//
//   kind: Notifier              # where rollout events go (proto/ctrl/v1/notifier.proto)
//   spec:
//     url: https://hooks.example.com/flotilla
//     format: standard-webhooks # or slack
//     events: [rollout.failed, deployment.failed]   # default: every event
//     selector: { namespaces: [shop-*], labels: team=shop }
//
//   kind: Project               # a team's namespaces, regions and roles (proto/ctrl/v1/project.proto)
//   spec:
//     description: Team A
//     namespaces: [a-*]         # globs
//     regions: { names: [eu-*], selector: tier=prod }
//     roles: [{ role: deployer, operators: [alice], groups: [team-a] }]
//
// Every document is read and checked before anything is sent; a mistake names the file,
// the document and the field.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { extname, join } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { labelKeyProblem, labelValueProblem } from "@flotilla/labels";
import { ProjectSchema, type Project } from "@flotilla/proto/ctrl/v1/project_pb.js";
import { parseAllDocuments } from "yaml";
import { UsageError } from "./errors.ts";
import type { Notifier } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { API_VERSION, notifierFromSpec, RESOURCE_KINDS, resourceFromSpec, SpecFieldError, type AnyResource, type ResourceKindOps } from "./kinds.ts";

export interface ResourceManifest {
  /** "examples/web.yaml#2": the file and the document (1-based). */
  source: string;
  kind: ResourceKindOps<AnyResource>;
  name: string;
  resource: AnyResource;
  /** The spec lists secretEnv (by names): without, apply keeps the secrets the object has (`flotilla secret set`). */
  listsSecretEnv: boolean;
}

export interface RegionManifest {
  source: string;
  kind: "Region";
  name: string;
  labels: Record<string, string>;
  /** spec.metrics.prometheus.address; empty: none. */
  prometheusAddress: string;
}

export interface ProjectManifest {
  source: string;
  kind: "Project";
  name: string;
  project: Project;
}

export interface NotifierManifest {
  source: string;
  kind: "Notifier";
  name: string;
  notifier: Notifier;
}

export type Manifest = ResourceManifest | RegionManifest | ProjectManifest | NotifierManifest;

/** The kind a manifest declares, as `kind/name` and duplicate checks name it. */
export function kindOf(m: Manifest): string {
  return typeof m.kind === "string" ? m.kind : m.kind.kind;
}

const MANIFEST_EXTENSIONS = new Set([".yaml", ".yml", ".json"]);
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** The manifests of every path (a file, a directory, read recursively in name order, or "-" for stdin). */
export function loadManifests(paths: string[], stdin: () => string = () => readFileSync(0, "utf8")): Manifest[] {
  const problems: string[] = [];
  const manifests: Manifest[] = [];
  for (const path of paths) {
    for (const file of path === "-" ? ["-"] : filesOf(path)) {
      const text = file === "-" ? stdin() : readFileSync(file, "utf8");
      const name = file === "-" ? "<stdin>" : file;
      parseFile(name, text, manifests, problems);
    }
  }
  const seen = new Map<string, string>();
  for (const m of manifests) {
    const key = `${kindOf(m)}/${m.name}`;
    const earlier = seen.get(key);
    if (earlier) problems.push(`${m.source}: ${key} is also defined in ${earlier}`);
    seen.set(key, m.source);
  }
  if (problems.length > 0) throw new UsageError(`invalid manifests, nothing was sent:\n  ${problems.join("\n  ")}`);
  if (manifests.length === 0) throw new UsageError(`no manifests in ${paths.join(", ")}`);
  return manifests;
}

function filesOf(path: string): string[] {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    throw new UsageError(`${path}: no such file or directory`);
  }
  if (!stat.isDirectory()) return [path];
  return readdirSync(path, { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((entry) => {
      const child = join(path, entry.name);
      if (entry.isDirectory()) return filesOf(child);
      return MANIFEST_EXTENSIONS.has(extname(entry.name)) ? [child] : [];
    });
}

function parseFile(file: string, text: string, manifests: Manifest[], problems: string[]): void {
  const documents = parseAllDocuments(text);
  if (!Array.isArray(documents)) return; // an empty file
  documents.forEach((document, index) => {
    const source = `${file}#${index + 1}`;
    if (document.errors.length > 0) {
      problems.push(`${source}: ${document.errors[0]!.message.split("\n")[0]}`);
      return;
    }
    const value = document.toJS() as unknown;
    if (value === null || value === undefined) return; // an empty document (a trailing ---)
    try {
      manifests.push(parseDocument(source, value));
    } catch (error) {
      problems.push(`${source}: ${(error as Error).message}`);
    }
  });
}

/** spec of a Region: nothing, or metrics.prometheus.address (a string; ctrl checks the URL). */
function regionPrometheusAddress(spec: unknown): string {
  if (spec === undefined || spec === null) return "";
  const isMapping = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  const only = (v: unknown, at: string, key: string): unknown => {
    if (!isMapping(v)) throw new Error(`${at}: must be a mapping`);
    const extra = Object.keys(v).find((k) => k !== key);
    if (extra !== undefined) throw new Error(`${at}.${extra}: unknown field (a Region's spec has metrics.prometheus.address only)`);
    return v[key];
  };
  const metrics = only(spec, "spec", "metrics");
  if (metrics === undefined) return "";
  const prometheus = only(metrics, "spec.metrics", "prometheus");
  if (prometheus === undefined) return "";
  const address = only(prometheus, "spec.metrics.prometheus", "address") ?? "";
  if (typeof address !== "string") throw new Error("spec.metrics.prometheus.address: must be a string (a URL)");
  return address;
}

/** metadata.labels of a Region: a mapping of strings in Kubernetes label syntax. */
function regionLabels(value: unknown): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) throw new Error("metadata.labels: must be a mapping of label keys to values");
  const labels = value as Record<string, unknown>;
  for (const [key, v] of Object.entries(labels)) {
    const field = `metadata.labels[${JSON.stringify(key)}]`;
    if (typeof v !== "string") throw new Error(`${field}: must be a string (quote a number or true/false)`);
    const problem = labelKeyProblem(key) ?? labelValueProblem(v);
    if (problem) throw new Error(`${field}: ${problem}`);
  }
  return labels as Record<string, string>;
}

function parseDocument(source: string, value: unknown): Manifest {
  if (typeof value !== "object" || Array.isArray(value)) throw new Error("a manifest is a mapping (apiVersion, kind, metadata, spec)");
  const doc = value as Record<string, unknown>;
  for (const key of Object.keys(doc)) {
    if (!["apiVersion", "kind", "metadata", "spec", "status"].includes(key)) throw new Error(`${key}: unknown field (apiVersion, kind, metadata, spec)`);
  }
  if (doc.apiVersion !== API_VERSION) throw new Error(`apiVersion: must be ${API_VERSION}, not ${JSON.stringify(doc.apiVersion)}`);
  const metadata = doc.metadata as Record<string, unknown> | undefined;
  const name = metadata?.name;
  if (typeof name !== "string" || name === "") throw new Error("metadata.name: is required");
  if (!DNS_LABEL.test(name) || name.length > 63)
    throw new Error(`metadata.name: ${JSON.stringify(name)} is not a DNS-1123 label (lowercase letters, digits and '-', at most 63)`);
  const kindName = doc.kind;
  if (kindName === "Project") return { source, kind: "Project", name, project: projectFromSpec(name, doc.spec) };
  if (kindName === "Notifier") {
    try {
      return { source, kind: "Notifier", name, notifier: notifierFromSpec(name, doc.spec) };
    } catch (error) {
      if (error instanceof SpecFieldError && error.field === "") throw new Error(`spec: ${error.message}`);
      throw specError(error);
    }
  }
  if (kindName === "Region") {
    return { source, kind: "Region", name, labels: regionLabels(metadata?.labels), prometheusAddress: regionPrometheusAddress(doc.spec) };
  }
  const kind = RESOURCE_KINDS.find((k) => k.kind === kindName);
  if (!kind) throw new Error(`kind: must be Deployment, Sentinel, NetworkPolicy, Region, Project or Notifier, not ${JSON.stringify(kindName)}`);
  const project = metadata?.project ?? DEFAULT_PROJECT;
  if (typeof project !== "string" || !DNS_LABEL.test(project) || project.length > 63)
    throw new Error(`metadata.project: ${JSON.stringify(project)} is not a project name (a DNS-1123 label)`);
  const spec = doc.spec;
  if (typeof spec !== "object" || spec === null || Array.isArray(spec)) throw new Error("spec: is required (a mapping of the resource's fields)");
  if ("id" in spec) throw new Error("spec.id: the name is metadata.name");
  try {
    const resource = resourceFromSpec(kind.schema, name, spec as JsonObject) as AnyResource;
    resource.project = project;
    return { source, kind, name, resource, listsSecretEnv: "secretEnv" in spec || "secret_env" in spec };
  } catch (error) {
    throw specError(error);
  }
}

/** The project a manifest has nothing to say about: what names none. */
export const DEFAULT_PROJECT = "default";

/** A spec's refusal, naming the field at fault. */
function specError(error: unknown): Error {
  if (error instanceof SpecFieldError) return new Error(`spec.${error.field}: ${error.message}`);
  // protobuf-es: `cannot decode message ctrl.v1.Deployment from JSON: key "imag" is unknown`
  return new Error(`spec: ${(error as Error).message.replace(/^cannot decode message [\w.]+ from JSON: /, "")}`);
}

const ROLES = ["viewer", "deployer", "admin"];

/** A Project's spec; roles are written as people name them (deployer), the protocol's enum (ROLE_DEPLOYER) too. */
function projectFromSpec(name: string, spec: unknown): Project {
  if (typeof spec !== "object" || spec === null || Array.isArray(spec)) throw new Error("spec: is required (namespaces, regions, roles)");
  const roles = (spec as { roles?: unknown }).roles;
  const converted = Array.isArray(roles)
    ? roles.map((binding, i) => {
        const role = (binding as { role?: unknown } | null)?.role;
        if (typeof role !== "string" || !ROLES.includes(role.toLowerCase().replace(/^role_/, "")))
          throw new Error(`spec.roles[${i}].role: must be ${ROLES.join(", ")}, not ${JSON.stringify(role)}`);
        return { ...(binding as object), role: `ROLE_${role.toUpperCase().replace(/^ROLE_/, "")}` };
      })
    : roles;
  try {
    return resourceFromSpec(
      ProjectSchema,
      name,
      { ...(spec as JsonObject), ...(converted === undefined ? {} : { roles: converted }) } as JsonObject,
      "name",
    ) as Project;
  } catch (error) {
    throw specError(error);
  }
}
