// The manifest page: each kind `flotilla apply` takes, its spec's fields as a manifest writes
// them (the protocol's JSON names; enums by short name; durations as 5s, 10m) with their
// comments from proto/ctrl/v1, the limits ctrl's validation enforces, and the examples/ files.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { LIMITS } from "@flotilla/ctrl/validate";
import { anchor, cell, generatedHeader, table } from "./markdown.ts";
import type { Field, Protocol } from "./proto.ts";

const KINDS = [
  { kind: "Deployment", message: "ctrl.v1.Deployment" },
  { kind: "Sentinel", message: "ctrl.v1.Sentinel" },
  { kind: "NetworkPolicy", message: "ctrl.v1.NetworkPolicy" },
];
/** Fields a server fills in or the name carries: never in a spec (packages/cli/src/kinds.ts). */
const NOT_IN_SPEC = new Set(["id", "revision", "create_time", "update_time", "status", "rollout"]);
const isOutput = (field: Field) => NOT_IN_SPEC.has(field.name) || /^(?:Output only|Internal)\b/.test(field.comment);

/** How a manifest writes a value of `type`. */
function manifestType(protocol: Protocol, type: string): string {
  const e = protocol.enums.get(type);
  if (e) {
    const prefix = e.values[0]!.name.replace(/UNSPECIFIED$/, "");
    const names = e.values.filter((v) => v.number !== 0).map((v) => `\`${v.name.startsWith(prefix) ? v.name.slice(prefix.length) : v.name}\``);
    return `one of ${names.join(", ")}`;
  }
  if (type === "google.protobuf.Duration") return "duration (`5s`, `10m`, `1h30m`)";
  if (type === "google.protobuf.Struct") return "object";
  if (type === "google.protobuf.Timestamp") return "time (RFC 3339)";
  if (protocol.messages.has(type)) return "object";
  if (/int(?:32|64)$/.test(type)) return "integer";
  if (type === "bool") return "boolean";
  return type;
}

/** Rows for `message`'s spec fields and, below each object, its own fields (path like regions[].autoscaling.minReplicas). */
function fieldRows(protocol: Protocol, messageName: string, prefix: string, seen: Set<string>): string[][] {
  const message = protocol.messages.get(messageName)!;
  const rows: string[][] = [];
  for (const field of message.fields.filter((f) => !isOutput(f))) {
    const path = `${prefix}${field.jsonName}${field.repeated && !field.map ? "[]" : ""}`;
    const type = field.map
      ? `map of ${manifestType(protocol, field.map.key)} to ${manifestType(protocol, field.map.value)}`
      : `${field.repeated ? "list of " : ""}${manifestType(protocol, field.type)}`;
    rows.push([`\`${path}\``, type, cell(`${field.oneof ? `One of \`${field.oneof}\`. ` : ""}${field.comment}`)]);
    const nested = protocol.messages.get(field.type);
    if (nested && !nested.mapEntry && !seen.has(nested.fullName))
      rows.push(...fieldRows(protocol, nested.fullName, `${path}.`, new Set([...seen, nested.fullName])));
  }
  return rows;
}

function exampleFiles(root: string): { path: string; text: string }[] {
  const files: { path: string; text: string }[] = [];
  for (const dir of readdirSync(join(root, "examples")).sort()) {
    for (const name of readdirSync(join(root, "examples", dir)).sort()) {
      const path = `examples/${dir}/${name}`;
      files.push({ path, text: readFileSync(join(root, path), "utf8") });
    }
  }
  return files;
}

export function manifestsPage(protocol: Protocol, root: string): string {
  const region = protocol.messages.get("ctrl.v1.Region")!;
  const labels = region.fields.find((f) => f.name === "labels")!;
  const lines = [
    generatedHeader("Manifests", "proto/ctrl/v1 (through `buf build`), LIMITS (packages/ctrl/src/validate.ts) and examples/"),
    "`flotilla apply -f`, `diff -f` and `delete -f` read YAML (several documents per file) or JSON: `apiVersion: flotilla.dev/v1`, a `kind`, `metadata.name` (a DNS-1123 label; the resource's id) and a `spec` holding the protocol's fields under their JSON names. Enums are written by their short names (`desiredStatus: STOPPED`), durations as `5s`, `10m`, `1h30m`. Every manifest is parsed and every change checked by ctrl (`validate_only`) before the first write: a mistake names the file, the document and the field, and nothing is written. What `flotilla get -o yaml` prints applies unchanged. A field not listed is refused.",
    "",
    `Kinds: ${[...KINDS.map((k) => k.kind), "Region"].map((k) => `[${k}](#${anchor(k)})`).join(", ")}.`,
    "",
  ];
  for (const { kind, message } of KINDS) {
    const described = protocol.messages.get(message)!;
    lines.push(`## ${kind}`, "");
    if (described.comment) lines.push(cell(described.comment), "");
    lines.push(table(["Field of `spec`", "Type", "Meaning, default and rules"], fieldRows(protocol, message, "", new Set([message]))), "");
  }
  lines.push(
    "## Region",
    "",
    "A Region has no `spec`; applying one creates it, or updates its labels when they differ.",
    "",
    table(["Field", "Type", "Meaning"], [["`metadata.labels`", "map of string to string", cell(labels.comment)]]),
    "",
    "## Limits",
    "",
    "ctrl refuses a write past one of these with `INVALID_ARGUMENT` naming the field (`LIMITS` in `packages/ctrl/src/validate.ts`).",
    "",
    table(
      ["Limit", "Value"],
      Object.entries(LIMITS).map(([name, value]) => [`\`${name}\``, value.toLocaleString("en-US")]),
    ),
    "",
    "## Examples",
    "",
  );
  for (const { path, text } of exampleFiles(root)) lines.push(`### ${path}`, "", "```yaml", text.trimEnd(), "```", "");
  return lines.join("\n");
}
