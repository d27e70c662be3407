// What commands print: aligned tables (kubectl's layout), JSON and YAML, relative ages.
import { type Timestamp, timestampMs } from "@bufbuild/protobuf/wkt";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { stringify } from "yaml";

export const OUTPUT_FORMATS = ["table", "wide", "json", "yaml"] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** Columns separated by three spaces, each as wide as its widest cell, headers upper case. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("   ")
      .trimEnd();
  return `${[line(headers), ...rows.map(line)].join("\n")}\n`;
}

/** kubectl's age: 45s, 12m, 3h, 5d. */
export function age(time: Timestamp | undefined, now = Date.now()): string {
  if (!time) return "<none>";
  const seconds = Math.max(0, Math.floor((now - timestampMs(time)) / 1000));
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 172_800) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86_400)}d`;
}

export function isoTime(time: Timestamp | undefined): string {
  return time ? new Date(timestampMs(time)).toISOString() : "<none>";
}

/** A document or list in JSON (two-space indent) or YAML. */
export function structured(value: unknown, format: "json" | "yaml"): string {
  return format === "json" ? `${JSON.stringify(value, null, 2)}\n` : stringify(value);
}

/** viewer, deployer, admin (unspecified: an agent's token). */
export function roleName(role: Role): string {
  return Role[role]?.toLowerCase() ?? "unspecified";
}
