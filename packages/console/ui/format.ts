// Small formatting helpers shared by the views.
import { html } from "htm/preact";
import { durationMs, timestampMs, type Duration, type Timestamp } from "@bufbuild/protobuf/wkt";
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

/** A relative time, the absolute one on hover. */
export function Time({ ms }: { ms: number | undefined }) {
  if (ms === undefined) return html`<span>never</span>`;
  const iso = new Date(ms).toISOString();
  return html`<time datetime=${iso} title=${iso}>${ago(ms)}</time>`;
}

export const msOf = (t: Timestamp | undefined) => (t ? timestampMs(t) : undefined);

export const spanOf = (d: Duration | undefined) => (d ? durationMs(d) : 0);

/** "45s", "2m 05s", "1h 02m": a span of time, to the second under an hour. */
export function span(ms: number): string {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const two = (n: number) => String(n).padStart(2, "0");
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${two(s % 60)}s`;
  return `${Math.floor(s / 3600)}h ${two(Math.floor(s / 60) % 60)}m`;
}

/** Leaf paths → JSON values, for a field-by-field diff of two specs. */
export function flatten(value: unknown, prefix = "", into = new Map<string, string>()): Map<string, string> {
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) flatten(v, `${prefix}[${i}]`, into);
  } else if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, into);
  } else into.set(prefix, JSON.stringify(value));
  return into;
}
