// Server-side printing: `kubectl get` asks for `Accept: application/json;as=Table;v=v1;
// g=meta.k8s.io` and prints the columns the server chose. The columns follow the API
// server's printers (pkg/printers/internalversion/printers.go: printDeployment, printService,
// printNamespace); other kinds get the default table (NAME, AGE), as for a resource without
// printer columns (staging/src/k8s.io/apiserver/pkg/registry/rest/table.go). A watch asking
// for a Table (`kubectl get -w`) gets each event's object as a one-row Table
// (handlers/watch.go, response.go doTransformObject).
import { badRequest } from "./errors.ts";
import type { JsonObject, KubeObject } from "./util.ts";

interface Column {
  name: string;
  type: "string" | "integer";
  format?: string;
  description: string;
  /** 0: shown by default; 1: with -o wide. */
  priority: number;
}

const NAME: Column = { name: "Name", type: "string", format: "name", description: "Name must be unique within a namespace.", priority: 0 };
const AGE: Column = {
  name: "Age",
  type: "string",
  description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
  priority: 0,
};

type Printer = { columns: Column[]; cells(object: KubeObject, now: number): unknown[] };

const num = (value: unknown) => (typeof value === "number" ? value : 0);
const spec = (o: KubeObject) => (o.spec ?? {}) as JsonObject;
const status = (o: KubeObject) => (o.status ?? {}) as JsonObject;

/** The -o wide columns of the workload kinds (Deployment, ReplicaSet). */
const TEMPLATE_COLUMNS: Column[] = [
  { name: "Containers", type: "string", description: "Names of each container in the template.", priority: 1 },
  { name: "Images", type: "string", description: "Images referenced by each container in the template.", priority: 1 },
  { name: "Selector", type: "string", description: "Label selector for pods.", priority: 1 },
];

function templateCells(o: KubeObject): string[] {
  const containers = (((spec(o).template as JsonObject | undefined)?.spec as JsonObject | undefined)?.containers ?? []) as JsonObject[];
  const matchLabels = ((spec(o).selector as JsonObject | undefined)?.matchLabels ?? {}) as Record<string, string>;
  return [
    containers.map((c) => c.name).join(","),
    containers.map((c) => c.image).join(","),
    Object.entries(matchLabels)
      .map(([k, v]) => `${k}=${v}`)
      .join(","),
  ];
}

const PRINTERS: Record<string, Printer> = {
  Deployment: {
    columns: [
      NAME,
      { name: "Ready", type: "string", description: "Number of the pod with ready state", priority: 0 },
      {
        name: "Up-to-date",
        type: "string",
        description: "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
        priority: 0,
      },
      {
        name: "Available",
        type: "string",
        description: "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
        priority: 0,
      },
      AGE,
      ...TEMPLATE_COLUMNS,
    ],
    cells: (o, now) => [
      o.metadata.name,
      `${num(status(o).readyReplicas)}/${num(spec(o).replicas ?? 1)}`,
      num(status(o).updatedReplicas),
      num(status(o).availableReplicas),
      age(o, now),
      ...templateCells(o),
    ],
  },
  ReplicaSet: {
    columns: [
      NAME,
      { name: "Desired", type: "integer", description: "Number of desired pods.", priority: 0 },
      { name: "Current", type: "integer", description: "The most recently observed number of replicas.", priority: 0 },
      { name: "Ready", type: "integer", description: "The number of pods targeted by this ReplicaSet with a Ready Condition.", priority: 0 },
      AGE,
      ...TEMPLATE_COLUMNS,
    ],
    cells: (o, now) => [o.metadata.name, num(spec(o).replicas ?? 1), num(status(o).replicas), num(status(o).readyReplicas), age(o, now), ...templateCells(o)],
  },
  Pod: {
    columns: [
      NAME,
      { name: "Ready", type: "string", description: "The aggregate readiness state of this pod for accepting traffic.", priority: 0 },
      { name: "Status", type: "string", description: "The aggregate status of the containers in this pod.", priority: 0 },
      { name: "Restarts", type: "string", description: "The number of times the containers in this pod have been restarted.", priority: 0 },
      AGE,
      { name: "IP", type: "string", description: "IP address allocated to the pod.", priority: 1 },
      { name: "Node", type: "string", description: "Name of the Node this pod runs on.", priority: 1 },
      { name: "Nominated Node", type: "string", description: "Name of the node nominated to run this pod.", priority: 1 },
      { name: "Readiness Gates", type: "string", description: "Pod readiness gates.", priority: 1 },
    ],
    cells(o, now) {
      const containers = (spec(o).containers ?? []) as JsonObject[];
      const statuses = (status(o).containerStatuses ?? []) as JsonObject[];
      // printPod: the phase, unless a container is waiting or terminated with a reason.
      let reason = String(status(o).reason ?? status(o).phase ?? "Unknown");
      for (const c of statuses) {
        const state = (c.state ?? {}) as Record<string, JsonObject | undefined>;
        const why = state.waiting?.reason ?? state.terminated?.reason;
        if (typeof why === "string" && why !== "") reason = why;
      }
      if (o.metadata.deletionTimestamp) reason = "Terminating";
      return [
        o.metadata.name,
        `${statuses.filter((c) => c.ready === true).length}/${containers.length}`,
        reason,
        String(statuses.reduce((n, c) => n + num(c.restartCount), 0)),
        age(o, now),
        status(o).podIP ?? "<none>",
        spec(o).nodeName ?? "<none>",
        "<none>",
        "<none>",
      ];
    },
  },
  Event: {
    columns: [
      { name: "Last Seen", type: "string", description: "The time at which the most recent occurrence of this event was recorded.", priority: 0 },
      { name: "Type", type: "string", description: "Type of this event (Normal, Warning).", priority: 0 },
      { name: "Reason", type: "string", description: "A short, machine understandable reason.", priority: 0 },
      { name: "Object", type: "string", description: "The object that this event is about.", priority: 0 },
      { name: "Subobject", type: "string", description: "The part of the object, e.g. a container.", priority: 1 },
      { name: "Source", type: "string", description: "The component reporting this event.", priority: 1 },
      { name: "Message", type: "string", description: "A human-readable description of the status of this operation.", priority: 0 },
      { name: "First Seen", type: "string", description: "The time at which the event was first recorded.", priority: 1 },
      { name: "Count", type: "string", description: "The number of times this event has occurred.", priority: 1 },
      { name: "Name", type: "string", format: "name", description: "Name must be unique within a namespace.", priority: 1 },
    ],
    cells(o, now) {
      const involved = (o.involvedObject ?? {}) as JsonObject;
      const source = (o.source ?? {}) as JsonObject;
      const since = (t: unknown) => (typeof t === "string" && t !== "" ? humanDuration(now - Date.parse(t)) : "<unknown>");
      return [
        since(o.lastTimestamp),
        o.type ?? "",
        o.reason ?? "",
        `${String(involved.kind ?? "").toLowerCase()}/${String(involved.name ?? "")}`,
        involved.fieldPath ?? "",
        [source.component, source.host].filter((x) => typeof x === "string" && x !== "").join(", "),
        o.message ?? "",
        since(o.firstTimestamp),
        // printEvent: an int64; 0 (a singleton event of the events.k8s.io API) shows as 1.
        num(o.count) || 1,
        o.metadata.name,
      ];
    },
  },
  Service: {
    columns: [
      NAME,
      { name: "Type", type: "string", description: "The type of the service.", priority: 0 },
      { name: "Cluster-IP", type: "string", description: "The cluster IP of the service.", priority: 0 },
      { name: "External-IP", type: "string", description: "The external IP of the service.", priority: 0 },
      { name: "Port(s)", type: "string", description: "The ports of the service.", priority: 0 },
      AGE,
      { name: "Selector", type: "string", description: "The selector of the service.", priority: 1 },
    ],
    cells(o, now) {
      const ports = (spec(o).ports ?? []) as JsonObject[];
      const selector = (spec(o).selector ?? {}) as Record<string, string>;
      return [
        o.metadata.name,
        spec(o).type ?? "ClusterIP",
        spec(o).clusterIP ?? "<none>",
        "<none>",
        ports.length === 0 ? "<none>" : ports.map((p) => `${p.port}${p.nodePort ? `:${p.nodePort}` : ""}/${p.protocol ?? "TCP"}`).join(","),
        age(o, now),
        Object.keys(selector).length === 0
          ? "<none>"
          : Object.entries(selector)
              .map(([k, v]) => `${k}=${v}`)
              .join(","),
      ];
    },
  },
  Namespace: {
    columns: [NAME, { name: "Status", type: "string", description: "The status of the namespace", priority: 0 }, AGE],
    cells: (o, now) => [o.metadata.name, status(o).phase ?? "Active", age(o, now)],
  },
};

const DEFAULT_PRINTER: Printer = { columns: [NAME, AGE], cells: (o, now) => [o.metadata.name, age(o, now)] };

/** metav1.TableOptions: what each row carries of its object, and whether the column definitions are left out. */
export interface TableOptions {
  includeObject: "Object" | "Metadata" | "None";
  noHeaders?: boolean;
}

/**
 * Whether the Accept header asks for a Table (what kubectl get sends first): its first clause
 * the emulator serves (JSON), with the parameters in any order, as the server negotiates.
 */
export function wantsTable(accept: string | undefined): boolean {
  for (const clause of (accept ?? "").split(",")) {
    const [type = "", ...pairs] = clause.split(";").map((part) => part.trim());
    if (!["application/json", "application/*", "*/*"].includes(type.toLowerCase())) continue;
    const params = new Map(pairs.map((pair) => [pair.split("=")[0]!.trim(), pair.slice(pair.indexOf("=") + 1).trim()]));
    if (!params.has("as")) return false;
    if (params.get("as") === "Table" && params.get("g") === "meta.k8s.io" && ["v1", "v1beta1"].includes(params.get("v") ?? "")) return true;
  }
  return false;
}

/** The request's TableOptions (includeObject defaults to Metadata), checked as ValidateTableOptions does. */
export function tableOptions(query: Record<string, string>): TableOptions {
  const value = query.includeObject ?? "";
  if (value === "") return { includeObject: "Metadata" };
  if (value === "Object" || value === "Metadata" || value === "None") return { includeObject: value };
  throw badRequest(
    `Unable to convert to Table as requested: includeObject: Invalid value: ${JSON.stringify(value)}: must be 'Metadata', 'Object', 'None', or empty`,
  );
}

/**
 * The objects as a meta.k8s.io/v1 Table (GenerateTable). Each row carries its object, its
 * metadata as a PartialObjectMetadata, or nothing (asTable); with noHeaders the column
 * definitions are null, as a watch sends them after its first event.
 */
export function toTable(kind: string, objects: KubeObject[], metadata: JsonObject, options: TableOptions, now = Date.now()): JsonObject {
  const printer = PRINTERS[kind] ?? DEFAULT_PRINTER;
  const carried = (object: KubeObject) =>
    options.includeObject === "Object"
      ? object
      : options.includeObject === "Metadata"
        ? { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: object.metadata }
        : null;
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata,
    columnDefinitions: options.noHeaders ? null : (printer.columns as unknown as JsonObject[]),
    rows: objects.map((object) => ({ cells: printer.cells(object, now), object: carried(object) })) as unknown as JsonObject[],
  };
}

function age(o: KubeObject, now: number): string {
  const created = Date.parse(String(o.metadata.creationTimestamp ?? ""));
  return Number.isNaN(created) ? "<unknown>" : humanDuration(now - created);
}

/** k8s.io/apimachinery/pkg/util/duration HumanDuration: how kubectl shows an age. */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 192) return hours % 24 === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  if (hours < 24 * 365 * 8) {
    const days = Math.floor(hours / 24) % 365;
    return days === 0 ? `${Math.floor(hours / 24 / 365)}y` : `${Math.floor(hours / 24 / 365)}y${days}d`;
  }
  return `${Math.floor(hours / 24 / 365)}y`;
}
