// Server-side printing: `kubectl get` asks for `Accept: application/json;as=Table;v=v1;
// g=meta.k8s.io` and prints the columns the server chose. Each kind's columns are its
// strategy's printer (kinds/, after pkg/printers/internalversion/printers.go); other kinds get
// the default table (NAME, AGE), as for a resource without printer columns
// (staging/src/k8s.io/apiserver/pkg/registry/rest/table.go). A watch asking
// for a Table (`kubectl get -w`) gets each event's object as a one-row Table
// (handlers/watch.go, response.go doTransformObject).
import { badRequest } from "./errors.ts";
import type { JsonObject, KubeObject } from "./util.ts";

export interface Column {
  name: string;
  type: "string" | "integer";
  format?: string;
  description: string;
  /** 0: shown by default; 1: with -o wide. */
  priority: number;
}

// The descriptions are ObjectMeta's field docs, as the real server's columns carry them.
export const NAME: Column = {
  name: "Name",
  type: "string",
  format: "name",
  description:
    "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
  priority: 0,
};
export const AGE: Column = {
  name: "Age",
  type: "string",
  description:
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
  priority: 0,
};

/** A kind's Table: its column definitions, and one row's cells in their order. */
export interface Printer {
  columns: Column[];
  cells(object: KubeObject, now: number): unknown[];
}

/** A number cell; an unset count prints as 0, as Go's zero value. */
export const num = (value: unknown) => (typeof value === "number" ? value : 0);
export const specOf = (o: KubeObject) => (o.spec ?? {}) as JsonObject;
export const statusOf = (o: KubeObject) => (o.status ?? {}) as JsonObject;

/** `k=v,k2=v2`, as the printers show a map of labels. */
export function labelsCell(labels: Record<string, string>): string {
  return Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
}

/** The -o wide columns of the workload kinds (Deployment, ReplicaSet); the selector's description is the kind's spec doc. */
export function templateColumns(selectorDescription: string): Column[] {
  return [
    { name: "Containers", type: "string", description: "Names of each container in the template.", priority: 1 },
    { name: "Images", type: "string", description: "Images referenced by each container in the template.", priority: 1 },
    { name: "Selector", type: "string", description: selectorDescription, priority: 1 },
  ];
}

export function templateCells(o: KubeObject): string[] {
  const containers = (((specOf(o).template as JsonObject | undefined)?.spec as JsonObject | undefined)?.containers ?? []) as JsonObject[];
  const matchLabels = ((specOf(o).selector as JsonObject | undefined)?.matchLabels ?? {}) as Record<string, string>;
  return [containers.map((c) => c.name).join(","), containers.map((c) => c.image).join(","), labelsCell(matchLabels)];
}

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
 * The objects as a meta.k8s.io/v1 Table (GenerateTable) with their kind's printer. Each row carries its object, its
 * metadata as a PartialObjectMetadata, or nothing (asTable); with noHeaders the column
 * definitions are null, as a watch sends them after its first event.
 */
export function toTable(printer: Printer = DEFAULT_PRINTER, objects: KubeObject[], metadata: JsonObject, options: TableOptions, now = Date.now()): JsonObject {
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
    // Go's TableColumnDefinition has no omitempty: a column without a format says "".
    columnDefinitions: options.noHeaders ? null : printer.columns.map((c) => ({ ...c, format: c.format ?? "" })),
    rows: objects.map((object) => ({ cells: printer.cells(object, now), object: carried(object) })) as unknown as JsonObject[],
  };
}

export function age(o: KubeObject, now: number): string {
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
