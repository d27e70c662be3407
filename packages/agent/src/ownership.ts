// Ownership (ARCHITECTURE §5): the agent writes or deletes an existing object only when its labels
// say this region's agent made it for this very resource, or when someone marked it for adoption.
// Like Helm 3, which refuses to import a resource without its ownership metadata, an object made
// by someone else (Helm, kubectl, another region's agent) is a conflict, never taken over silently.
import { ID_LABEL, MANAGED_BY, MANAGED_BY_LABEL, REGION_LABEL, TYPE_LABEL } from "./manifests.ts";

/** `flotilla.dev/adopt: "true"` on an existing object lets the agent take it over. */
export const ADOPT_ANNOTATION = "flotilla.dev/adopt";

/** An existing object's identity and marks, as the API server returns it. */
export interface LiveMarks {
  kind?: string;
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
}

/** The resource an object would be written for: its type name ("deployment") and id. */
export interface Owner {
  region: string;
  type: string;
  id: string;
}

/**
 * Why the agent must leave `live` alone when acting for `owner`, or undefined when the object is
 * its own (or marked for adoption). The reason names the object and who owns it.
 * (The object's own type/id labels are included: a sentinel and a deployment of the same id in
 * one namespace would otherwise fight over one Deployment.)
 */
export function ownershipConflict(live: LiveMarks, owner: Owner): string | undefined {
  const labels = live.metadata?.labels ?? {};
  if (live.metadata?.annotations?.[ADOPT_ANNOTATION] === "true" || isOwnedBy(live, owner)) return undefined;
  const object = `${(live.kind ?? "object").toLowerCase()} ${live.metadata?.namespace ? `${live.metadata.namespace}/` : ""}${live.metadata?.name ?? ""}`;
  const adopt = `; annotate it ${ADOPT_ANNOTATION}=true to let flotilla take it over`;
  const managedBy = labels[MANAGED_BY_LABEL];
  if (managedBy !== MANAGED_BY) {
    const mark = managedBy === undefined ? `no ${MANAGED_BY_LABEL} label` : `${MANAGED_BY_LABEL}=${managedBy}`;
    return `${object} exists and is not managed by flotilla (${mark})${adopt}`;
  }
  if (labels[REGION_LABEL] !== owner.region) {
    return `${object} exists and is managed by flotilla for another region (${REGION_LABEL}=${labels[REGION_LABEL] ?? ""})${adopt}`;
  }
  return `${object} exists and belongs to another flotilla resource (${labels[TYPE_LABEL] ?? "?"}/${labels[ID_LABEL] ?? "?"})${adopt}`;
}

/** Whether the object's labels say the agent of `owner.region` made it for this resource (adoption aside: deletes need this). */
export function isOwnedBy(live: LiveMarks, owner: Owner): boolean {
  const labels = live.metadata?.labels ?? {};
  return labels[MANAGED_BY_LABEL] === MANAGED_BY && labels[REGION_LABEL] === owner.region && labels[TYPE_LABEL] === owner.type && labels[ID_LABEL] === owner.id;
}
