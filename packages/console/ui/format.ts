// Small formatting helpers shared by the views.
import { timestampMs, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Phase } from "@flotilla/proto/ctrl/v1/resources_pb.js";

export function phaseName(phase: Phase): string {
  return Phase[phase] ?? "UNSPECIFIED";
}

/** "45s ago", "12m ago": relative, as people read ages. */
export function ago(ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 90) return `${s}s ago`;
  if (s < 5400) return `${Math.round(s / 60)}m ago`;
  if (s < 172_800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86_400)}d ago`;
}

export const msOf = (t: Timestamp | undefined) => (t ? timestampMs(t) : undefined);

/** Leaf paths → JSON values, for a field-by-field diff of two specs. */
export function flatten(value: unknown, prefix = "", into = new Map<string, string>()): Map<string, string> {
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) flatten(v, `${prefix}[${i}]`, into);
  } else if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, into);
  } else into.set(prefix, JSON.stringify(value));
  return into;
}
