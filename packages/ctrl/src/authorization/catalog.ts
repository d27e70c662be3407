// The projects and the regions' labels, as the authorization decides from them: read whole
// (both are small), kept for a short while and shared by every call, so a call costs no query
// when nothing changed. A project edited through this replica applies at once (`invalidate`);
// through another replica within `maxAgeMs` — the same bound as a revoked token's.
import { parseLabelSelector, type LabelMatcher, type Labels } from "@flotilla/labels";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import type { Project } from "@flotilla/proto/ctrl/v1/project_pb.js";
import type { Store } from "@flotilla/store";
import { globMatcher } from "./glob.ts";

/** A project compiled for decisions. */
export interface ProjectBounds {
  name: string;
  namespaces: readonly string[];
  namespaceAllowed(namespace: string): boolean;
  /** Whether a region (by its name and labels) is one of the project's. */
  regionAllowed(name: string, labels: Labels): boolean;
  /** The role each operator account holds in it. */
  operatorRoles: ReadonlyMap<string, Role>;
  /** The role each identity-provider group holds in it. */
  groupRoles: ReadonlyMap<string, Role>;
}

export interface CatalogSnapshot {
  projects: ReadonlyMap<string, ProjectBounds>;
  regionLabels: ReadonlyMap<string, Labels>;
}

export const DEFAULT_CATALOG_MAX_AGE_MS = 500;

export class ProjectCatalog {
  readonly #store: Store;
  readonly #maxAgeMs: number;
  #snapshot: { value: CatalogSnapshot; readAt: number } | undefined;
  #reading: Promise<CatalogSnapshot> | undefined;
  /** +1 per invalidation: a read begun before one is not kept (it may have missed the write). */
  #generation = 0;

  constructor(store: Store, maxAgeMs = DEFAULT_CATALOG_MAX_AGE_MS) {
    this.#store = store;
    this.#maxAgeMs = maxAgeMs;
  }

  /** The catalog no older than `maxAgeMs` (one read at a time, shared by the calls that wait for it). */
  async current(now = Date.now()): Promise<CatalogSnapshot> {
    if (this.#snapshot && now - this.#snapshot.readAt < this.#maxAgeMs) return this.#snapshot.value;
    return this.#read();
  }

  /** Read again: after a write of a project or a region through this replica, or when a region is not in the snapshot yet. */
  invalidate(): void {
    this.#generation++;
    this.#snapshot = undefined;
    this.#reading = undefined;
  }

  async #read(): Promise<CatalogSnapshot> {
    if (this.#reading !== undefined) return this.#reading;
    const generation = this.#generation;
    let reading: Promise<CatalogSnapshot> | undefined;
    reading = (async () => {
      try {
        const readAt = Date.now();
        const [projects, regions] = await Promise.all([this.#store.projects.all(), this.#store.regions.allLabels()]);
        const value = { projects: new Map(projects.map((p) => [p.name, compile(p)])), regionLabels: regions };
        if (generation === this.#generation) this.#snapshot = { value, readAt };
        return value;
      } finally {
        if (this.#reading === reading) this.#reading = undefined;
      }
    })();
    this.#reading = reading;
    return reading;
  }
}

export function compile(project: Project): ProjectBounds {
  const namespaces = project.namespaces.map(globMatcher);
  const regionNames = (project.regions?.names ?? []).map(globMatcher);
  const selector: LabelMatcher | undefined = project.regions?.selector ? parseLabelSelector(project.regions.selector) : undefined;
  const operatorRoles = new Map<string, Role>();
  const groupRoles = new Map<string, Role>();
  for (const binding of project.roles) {
    // Several bindings of one subject: the highest role counts.
    for (const name of binding.operators) operatorRoles.set(name, Math.max(operatorRoles.get(name) ?? Role.UNSPECIFIED, binding.role));
    for (const group of binding.groups) groupRoles.set(group, Math.max(groupRoles.get(group) ?? Role.UNSPECIFIED, binding.role));
  }
  return {
    name: project.name,
    namespaces: project.namespaces,
    namespaceAllowed: (namespace) => namespaces.some((matches) => matches(namespace)),
    regionAllowed: (name, labels) => regionNames.some((matches) => matches(name)) || (selector?.(labels) ?? false),
    operatorRoles,
    groupRoles,
  };
}
