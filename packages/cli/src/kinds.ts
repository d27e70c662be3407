// The kinds a manifest or `flotilla get` names, and how each maps to the protocol: its
// message, its RPCs, and its spec (the message's fields an operator writes).
import { clone, create, equals, fromJson, toJson, type DescMessage, type JsonObject, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { formatDuration, millisecondsIn } from "@flotilla/runtime";
import {
  DeploymentSchema,
  NetworkPolicySchema,
  ResourceType,
  SecretEnvVarSchema,
  SentinelSchema,
  type SecretEnvVar,
} from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { ProjectSchema, type Project } from "@flotilla/proto/ctrl/v1/project_pb.js";
import { NotificationEvent, NotifierFormat, NotifierSchema, type Notifier } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { EVENT_TYPES, SUBSCRIBABLE_EVENTS } from "@flotilla/store/notification-events";
import type { Clients } from "./client.ts";

export const API_VERSION = "flotilla.dev/v1";

/** What apply, diff, delete and get do with one kind of operator-owned resource. */
export interface ResourceKindOps<M> {
  kind: "Deployment" | "Sentinel" | "NetworkPolicy";
  /** Lowercase, as `kind/name` output and `flotilla get` name it. */
  singular: string;
  names: string[];
  type: ResourceType;
  schema: DescMessage;
  /** The regions it is placed in. */
  regions(resource: M): string[];
  get(clients: Clients, id: string): Promise<M | undefined>;
  list(clients: Clients): Promise<M[]>;
  create(clients: Clients, resource: M, message: string, validateOnly: boolean): Promise<M>;
  update(clients: Clients, resource: M, message: string, validateOnly: boolean): Promise<M>;
  delete(clients: Clients, id: string, message: string): Promise<void>;
}

/** Pages through a List RPC. */
async function all<T>(page: (token: string) => Promise<{ items: T[]; next: string }>): Promise<T[]> {
  const items: T[] = [];
  let token = "";
  do {
    const result = await page(token);
    items.push(...result.items);
    token = result.next;
  } while (token !== "");
  return items;
}

async function orUndefined<T>(call: Promise<T>): Promise<T | undefined> {
  try {
    return await call;
  } catch (error) {
    if (error instanceof ConnectError && error.code === Code.NotFound) return undefined;
    throw error;
  }
}

type Deployment = MessageShape<typeof DeploymentSchema>;
type Sentinel = MessageShape<typeof SentinelSchema>;
type NetworkPolicy = MessageShape<typeof NetworkPolicySchema>;

const deployment: ResourceKindOps<Deployment> = {
  kind: "Deployment",
  singular: "deployment",
  names: ["deployment", "deployments", "deploy"],
  type: ResourceType.DEPLOYMENT,
  schema: DeploymentSchema,
  regions: (d) => d.regions.map((p) => p.region),
  get: async (c, id) => (await orUndefined(c.deployments.getDeployment({ id })))?.deployment,
  list: (c) =>
    all(async (pageToken) => {
      const r = await c.deployments.listDeployments({ pageSize: 1000, pageToken });
      return { items: r.deployments, next: r.nextPageToken };
    }),
  create: async (c, resource, message, validateOnly) => (await c.deployments.createDeployment({ deployment: resource, message, validateOnly })).deployment!,
  update: async (c, resource, message, validateOnly) => (await c.deployments.updateDeployment({ deployment: resource, message, validateOnly })).deployment!,
  delete: async (c, id, message) => void (await c.deployments.deleteDeployment({ id, message })),
};

const sentinel: ResourceKindOps<Sentinel> = {
  kind: "Sentinel",
  singular: "sentinel",
  names: ["sentinel", "sentinels"],
  type: ResourceType.SENTINEL,
  schema: SentinelSchema,
  regions: (s) => [s.region],
  get: async (c, id) => (await orUndefined(c.sentinels.getSentinel({ id })))?.sentinel,
  list: (c) =>
    all(async (pageToken) => {
      const r = await c.sentinels.listSentinels({ pageSize: 1000, pageToken });
      return { items: r.sentinels, next: r.nextPageToken };
    }),
  create: async (c, resource, message, validateOnly) => (await c.sentinels.createSentinel({ sentinel: resource, message, validateOnly })).sentinel!,
  update: async (c, resource, message, validateOnly) => (await c.sentinels.updateSentinel({ sentinel: resource, message, validateOnly })).sentinel!,
  delete: async (c, id, message) => void (await c.sentinels.deleteSentinel({ id, message })),
};

const networkPolicy: ResourceKindOps<NetworkPolicy> = {
  kind: "NetworkPolicy",
  singular: "networkpolicy",
  names: ["networkpolicy", "networkpolicies", "netpol"],
  type: ResourceType.CILIUM_NETWORK_POLICY,
  schema: NetworkPolicySchema,
  regions: (p) => [p.region],
  get: async (c, id) => (await orUndefined(c.networkPolicies.getNetworkPolicy({ id })))?.networkPolicy,
  list: (c) =>
    all(async (pageToken) => {
      const r = await c.networkPolicies.listNetworkPolicies({ pageSize: 1000, pageToken });
      return { items: r.networkPolicies, next: r.nextPageToken };
    }),
  create: async (c, resource, message, validateOnly) =>
    (await c.networkPolicies.createNetworkPolicy({ networkPolicy: resource, message, validateOnly })).networkPolicy!,
  update: async (c, resource, message, validateOnly) =>
    (await c.networkPolicies.updateNetworkPolicy({ networkPolicy: resource, message, validateOnly })).networkPolicy!,
  delete: async (c, id, message) => void (await c.networkPolicies.deleteNetworkPolicy({ id, message })),
};

export type AnyResource = Deployment | Sentinel | NetworkPolicy;
export const RESOURCE_KINDS = [deployment, sentinel, networkPolicy] as ResourceKindOps<AnyResource>[];

export { all, orUndefined };

/** The kind `name` names (deployment, deploy, networkpolicies, …), or undefined. */
export function resourceKindNamed(name: string): ResourceKindOps<AnyResource> | undefined {
  return RESOURCE_KINDS.find((k) => k.names.includes(name.toLowerCase()));
}

/** Output-only fields: never part of a spec. */
const OUTPUT_FIELDS = ["id", "revision", "createTime", "updateTime", "status", "rollout"];
/** Fields a manifest writes in its metadata, not its spec. */
const METADATA_FIELDS = ["project"];

/** A field of a manifest's spec at fault: `field` is its path in the spec (strategy.waves[0].bake). */
export class SpecFieldError extends Error {
  readonly field: string;
  constructor(field: string, message: string) {
    super(message);
    this.field = field;
  }
}

/** Fields a manifest may give as a number or a string ("2" or "50%"), as Kubernetes' IntOrString. */
const COUNT_OR_PERCENT_FIELDS = new Set([
  "ctrl.v1.RolloutWave.max_parallel",
  "ctrl.v1.DisruptionBudget.min_available",
  "ctrl.v1.DisruptionBudget.max_unavailable",
  "ctrl.v1.Deployment.max_surge",
  "ctrl.v1.Deployment.max_unavailable",
]);

/**
 * How a manifest writes a message's fields, converted to or from the protocol's JSON, nested
 * messages included: enums by their short names (ROLLBACK, not ROLLOUT_FAILURE_POLICY_ROLLBACK),
 * durations as people write them (5s, 10m, 1h30m, not "5400s").
 */
function convert(schema: DescMessage, json: JsonObject, toManifest: boolean, path: string): JsonObject {
  const out: Record<string, JsonValue> = { ...json };
  for (const field of schema.fields) {
    const key = field.jsonName in out ? field.jsonName : field.name in out ? field.name : undefined;
    if (key === undefined || out[key] === null) continue;
    const at = path ? `${path}.${key}` : key;
    const one = (value: JsonValue, at: string): JsonValue => {
      if (field.fieldKind === "enum" || (field.fieldKind === "list" && field.listKind === "enum")) {
        if (typeof value !== "string") return value;
        const values = field.enum!.values;
        return (toManifest ? values.find((v) => v.name === value)?.localName : values.find((v) => v.localName === value)?.name) ?? value;
      }
      const message = field.fieldKind === "message" ? field.message : field.fieldKind === "list" && field.listKind === "message" ? field.message : undefined;
      if (message?.typeName === "google.protobuf.Duration") return toManifest ? manifestDuration(value) : protocolDuration(value, at);
      if (message && !message.typeName.startsWith("google.protobuf.") && typeof value === "object" && !Array.isArray(value))
        return convert(message, value as JsonObject, toManifest, at);
      if (!toManifest && COUNT_OR_PERCENT_FIELDS.has(`${schema.typeName}.${field.name}`) && typeof value === "number") return String(value);
      return value;
    };
    const value = out[key]!;
    out[key] = field.fieldKind === "list" && Array.isArray(value) ? value.map((v, i) => one(v, `${at}[${i}]`)) : one(value, at);
  }
  return out;
}

/** "5400s" (the protocol's JSON) → "90m". */
function manifestDuration(value: JsonValue): JsonValue {
  if (typeof value !== "string" || !value.endsWith("s")) return value;
  return formatDuration(Math.round(Number(value.slice(0, -1)) * 1000));
}

/** "1h30m" → "5400s"; anything else is refused naming the field. */
function protocolDuration(value: JsonValue, field: string): string {
  const ms = typeof value === "string" ? millisecondsIn(value) : undefined;
  if (ms === undefined) throw new SpecFieldError(field, `${JSON.stringify(value)} is not a duration (such as 5s, 10m, 1h30m)`);
  return `${ms / 1000}s`;
}

/** A message as people read it: JSON names, enums by their short names, durations as 5s or 10m. */
export function readableJson(schema: DescMessage, message: MessageShape<DescMessage>): JsonObject {
  return convert(schema, toJson(schema, message) as JsonObject, true, "");
}

/**
 * The spec of a resource as a manifest writes it (readableJson), without output fields. Secret
 * env by names only: a manifest never holds a value, and set and fingerprint are output.
 */
export function specOf(schema: DescMessage, resource: MessageShape<DescMessage>): JsonObject {
  const json = readableJson(schema, resource) as Record<string, JsonValue>;
  for (const field of [...OUTPUT_FIELDS, ...METADATA_FIELDS]) delete json[field];
  if (Array.isArray(json.secretEnv)) json.secretEnv = json.secretEnv.map((s) => ({ name: (s as JsonObject).name ?? "" }));
  return json;
}

/**
 * The message a manifest's name and spec describe (`nameField`: the message's field the name
 * goes to); throws with the field at fault (a secret value among them).
 */
export function resourceFromSpec(schema: DescMessage, name: string, spec: JsonObject, nameField = "id"): MessageShape<DescMessage> {
  for (const field of METADATA_FIELDS) if (field in spec) throw new SpecFieldError(field, `the ${field} is metadata.${field}`);
  const secretEnv = spec.secretEnv ?? spec.secret_env;
  if (Array.isArray(secretEnv)) {
    secretEnv.forEach((s, i) => {
      if (s !== null && typeof s === "object" && "value" in s)
        throw new SpecFieldError(`secretEnv[${i}].value`, "a manifest never holds a secret value: list the name; set the value with `flotilla secret set`");
    });
  }
  return fromJson(schema, { ...convert(schema, spec, false, ""), [nameField]: name }, { ignoreUnknownFields: false });
}

/** A resource's secret env by names only: what apply sends to keep every stored value. */
export function secretNames(resource: MessageShape<DescMessage>): SecretEnvVar[] {
  const secretEnv = (resource as { secretEnv?: SecretEnvVar[] }).secretEnv ?? [];
  return secretEnv.map((s) => create(SecretEnvVarSchema, { name: s.name }));
}

/** Whether two resources have the same spec (output fields aside). */
export function sameSpec(schema: DescMessage, a: MessageShape<DescMessage>, b: MessageShape<DescMessage>): boolean {
  const strip = (m: MessageShape<DescMessage>) => {
    const copy = clone(schema, m) as Record<string, unknown>;
    const blank = create(schema) as Record<string, unknown>;
    for (const field of OUTPUT_FIELDS) if (field in copy) copy[field] = blank[field];
    if ("secretEnv" in copy) copy.secretEnv = secretNames(m);
    return copy as MessageShape<DescMessage>;
  };
  return equals(schema, strip(a), strip(b));
}

/** A Project's spec as a manifest writes it: roles as people name them (deployer). */
export function projectSpec(project: Project): JsonObject {
  const json = readableJson(ProjectSchema, project) as Record<string, JsonValue>;
  for (const field of ["name", "createTime", "updateTime"]) delete json[field];
  if (Array.isArray(json.roles)) json.roles = json.roles.map((b) => ({ ...(b as JsonObject), role: String((b as JsonObject).role ?? "").toLowerCase() }));
  return json;
}

/** Whether two projects have the same spec (name and times aside). */
export function sameProject(a: Project, b: Project): boolean {
  return equals(ProjectSchema, { ...a, createTime: undefined, updateTime: undefined }, { ...b, createTime: undefined, updateTime: undefined });
}

/** A Notifier's format as a manifest writes it. */
export const NOTIFIER_FORMATS: Readonly<Record<string, NotifierFormat>> = {
  "standard-webhooks": NotifierFormat.STANDARD_WEBHOOKS,
  slack: NotifierFormat.SLACK,
};

/** A Notifier's events as a manifest writes them: the body's "type" (rollout.failed). */
export const NOTIFIER_EVENTS: Readonly<Record<string, NotificationEvent>> = Object.fromEntries(
  SUBSCRIBABLE_EVENTS.map((event) => [EVENT_TYPES[event]!, event]),
);

/** An event's name as people read it (rollout.failed; notifier.test for TestNotifier's). */
export function eventName(event: NotificationEvent): string {
  return EVENT_TYPES[event] ?? String(event);
}

/** A Notifier's spec as a manifest writes it (no name, times, nor secret: ctrl never shows it). */
export function notifierSpec(notifier: Notifier): JsonObject {
  const spec: Record<string, JsonValue> = {
    url: notifier.url,
    format: Object.entries(NOTIFIER_FORMATS).find(([, f]) => f === notifier.format)?.[0] ?? String(notifier.format),
  };
  if (notifier.events.length > 0) spec.events = notifier.events.map(eventName);
  const selector: Record<string, JsonValue> = {};
  if (notifier.selector?.namespaces.length) selector.namespaces = [...notifier.selector.namespaces];
  if (notifier.selector?.labels) selector.labels = notifier.selector.labels;
  if (Object.keys(selector).length > 0) spec.selector = selector;
  return spec;
}

/** The Notifier a manifest's spec describes; throws naming the field at fault. */
export function notifierFromSpec(name: string, spec: unknown): Notifier {
  if (typeof spec !== "object" || spec === null || Array.isArray(spec)) throw new SpecFieldError("", "is required (url, format, events, selector)");
  const { format, events, ...rest } = spec as Record<string, unknown>;
  const known = Object.keys(NOTIFIER_FORMATS);
  if (typeof format !== "string" || !(format in NOTIFIER_FORMATS))
    throw new SpecFieldError("format", `must be ${known.join(" or ")}, not ${JSON.stringify(format)}`);
  if (events !== undefined && !Array.isArray(events)) throw new SpecFieldError("events", "must be a list of event names");
  const eventValues = ((events as unknown[] | undefined) ?? []).map((e, i) => {
    const value = typeof e === "string" ? NOTIFIER_EVENTS[e] : undefined;
    if (value === undefined) throw new SpecFieldError(`events[${i}]`, `${JSON.stringify(e)} is not one of ${Object.keys(NOTIFIER_EVENTS).join(", ")}`);
    return NotificationEvent[value];
  });
  const json = {
    ...(rest as JsonObject),
    name,
    format: `NOTIFIER_FORMAT_${NotifierFormat[NOTIFIER_FORMATS[format]!]}`,
    events: eventValues.map((e) => `NOTIFICATION_EVENT_${e}`),
  };
  return fromJson(NotifierSchema, json, { ignoreUnknownFields: false });
}

/** Whether two notifiers have the same spec (times aside). */
export function sameNotifier(a: Notifier, b: Notifier): boolean {
  const strip = (n: Notifier) => ({ ...n, createTime: undefined, updateTime: undefined, secretTime: undefined });
  return equals(NotifierSchema, strip(a), strip(b));
}
