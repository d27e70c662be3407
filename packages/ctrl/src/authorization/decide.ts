// Authorization: what a caller may do, decided in one place from one table.
//
// Rules:
//  * Every RPC has exactly one entry in permissions.ts (a role and the scope it must be held
//    in); an RPC without one is refused. The interceptor (auth.ts) looks the entry up and calls
//    `decide` once per call, before the handler runs.
//  * Fleet-wide roles (the bootstrap admin token, an operator account's own role) reach every
//    project. Project roles come from the projects' bindings of operator accounts and
//    identity-provider groups; the highest of them counts. Roles nest: admin ⊃ deployer ⊃ viewer.
//  * For a project-scoped RPC, `decide` hands the handler a ProjectAccess bound to the RPC's
//    role; the handler names only *what* it touches (the project of the resource, as stored,
//    and for a write what it would store), never the role. A handler that answers without
//    asking is a bug, and its call fails (auth.ts) rather than answer unchecked.
//  * A write is checked in the store's transaction, against the locked row (WriteGuard): the
//    caller's role in the project of the resource as stored and as it would be, and that the
//    namespace and every region of what would be stored are the project's. A refusal is
//    PERMISSION_DENIED naming the project, and nothing is written.
//  * Lists and streams show only the projects where the caller holds the role; they never fail
//    for, nor name, another project's resources.
//  * Agents are unchanged: an agent token calls ClusterService only, for its own region.
import { Code, ConnectError } from "@connectrpc/connect";
import type { Labels } from "@flotilla/labels";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import type { Principal } from "../auth.ts";
import type { CatalogSnapshot, ProjectBounds } from "./catalog.ts";
import type { Permission } from "./permissions.ts";

/** "viewer", "deployer", "admin": how people and the CLI name roles. */
export function roleName(role: Role): string {
  return Role[role]?.toLowerCase() ?? "unspecified";
}

/** The role a principal holds fleet-wide (agents and anonymous callers hold none). */
export function fleetRoleOf(principal: Principal): Role {
  if (principal.kind === "admin") return Role.ADMIN;
  return principal.kind === "operator" ? principal.role : Role.UNSPECIFIED;
}

/** The role `principal` holds in `project` by the project's own bindings (not counting a fleet-wide role). */
export function projectRoleOf(principal: Principal, project: ProjectBounds): Role {
  if (principal.kind !== "operator") return Role.UNSPECIFIED;
  let role = project.operatorRoles.get(principal.name) ?? Role.UNSPECIFIED;
  for (const group of principal.groups) role = Math.max(role, project.groupRoles.get(group) ?? Role.UNSPECIFIED);
  return role;
}

/** The role `principal` holds in each project that grants it one. */
export function projectRoles(principal: Principal, catalog: CatalogSnapshot): Map<string, Role> {
  const roles = new Map<string, Role>();
  for (const project of catalog.projects.values()) {
    const role = projectRoleOf(principal, project);
    if (role !== Role.UNSPECIFIED) roles.set(project.name, role);
  }
  return roles;
}

function who(principal: Principal): string {
  switch (principal.kind) {
    case "operator":
      return `operator ${JSON.stringify(principal.name)}`;
    case "agent":
      return `the agent token of region ${JSON.stringify(principal.region)}`;
    default:
      return "the caller";
  }
}

function denied(message: string): ConnectError {
  return new ConnectError(message, Code.PermissionDenied);
}

/** A resource as a project-scoped write would store it. */
export interface Placed {
  project: string;
  namespace: string;
  /** Each region it is placed in, with the request field naming it. */
  regions: { region: string; field: string }[];
}

/**
 * A project-scoped call's access: the RPC's role, and the projects the caller holds it in.
 * Every method throws PERMISSION_DENIED (naming the project, never another resource) or answers.
 */
export class ProjectAccess {
  readonly #principal: Principal;
  readonly #rpc: string;
  readonly #role: Role;
  readonly #refreshRegions: () => Promise<CatalogSnapshot>;
  #catalog: CatalogSnapshot;
  /** Whether the handler asked (auth.ts fails a call whose handler never did). */
  consulted = false;
  /** The project of the last refusal (the audit trail records it). */
  deniedProject: string | undefined;

  constructor(principal: Principal, rpc: string, role: Role, catalog: CatalogSnapshot, refreshRegions: () => Promise<CatalogSnapshot>) {
    this.#principal = principal;
    this.#rpc = rpc;
    this.#role = role;
    this.#catalog = catalog;
    this.#refreshRegions = refreshRegions;
  }

  /** Whether the caller holds the RPC's role in every project (fleet-wide). */
  get fleetWide(): boolean {
    return fleetRoleOf(this.#principal) >= this.#role;
  }

  /** Whether the caller holds the RPC's role in every project; a question the call's decision may rest on, so it counts as asked. */
  coversEveryProject(): boolean {
    this.consulted = true;
    return this.fleetWide;
  }

  /** The projects whose resources the call may show; undefined: every project. */
  visibleProjects(): ReadonlySet<string> | undefined {
    this.consulted = true;
    if (this.fleetWide) return undefined;
    const visible = new Set<string>();
    for (const [name, role] of projectRoles(this.#principal, this.#catalog)) if (role >= this.#role) visible.add(name);
    return visible;
  }

  /** Throws unless the caller holds the RPC's role in `project`; `what` says what belongs to it ('deployment "web"'). */
  require(project: string, what?: string): void {
    this.consulted = true;
    if (this.fleetWide) return;
    const bounds = this.#catalog.projects.get(project);
    const held = bounds ? projectRoleOf(this.#principal, bounds) : Role.UNSPECIFIED;
    if (held >= this.#role) return;
    const subject = what ? `${what} belongs to project ${JSON.stringify(project)}` : `project ${JSON.stringify(project)}`;
    const holds = held === Role.UNSPECIFIED ? "has no role there" : `has role ${roleName(held)} there`;
    this.deniedProject = project;
    throw denied(`${this.#rpc} needs role ${roleName(this.#role)} in project ${JSON.stringify(project)} (${subject}); ${who(this.#principal)} ${holds}`);
  }

  /**
   * Throws unless the caller may write `next` (in its project, within the project's namespaces
   * and regions) over `existing` (in its project). The store calls it in the write's transaction.
   */
  requireWrite(field: string, id: string, next: Placed | undefined, existing: Placed | undefined): void {
    const what = `${field} ${JSON.stringify(id)}`;
    if (existing) this.require(existing.project, what);
    if (!next) return;
    if (next.project !== existing?.project) this.require(next.project, what);
    const bounds = this.#catalog.projects.get(next.project);
    if (!bounds) throw new ConnectError(`${field}.project: project ${JSON.stringify(next.project)} not found`, Code.NotFound);
    if (!bounds.namespaceAllowed(next.namespace)) {
      throw denied(
        `${field}.namespace: project ${JSON.stringify(next.project)} does not include namespace ${JSON.stringify(next.namespace)} (its namespaces: ${bounds.namespaces.join(", ")})`,
      );
    }
    for (const { region, field: regionField } of next.regions) {
      // A region the catalog does not know does not exist (knowRegions read it again): only its
      // name can place it in the project, and the store answers NOT_FOUND if it may.
      const labels: Labels | undefined = this.#catalog.regionLabels.get(region);
      if (!bounds.regionAllowed(region, labels ?? {})) {
        throw denied(`${regionField}: project ${JSON.stringify(next.project)} does not include region ${JSON.stringify(region)}`);
      }
    }
  }

  /** Reads the regions again when `names` includes one the catalog does not know yet (created since it was read). */
  async knowRegions(names: readonly string[]): Promise<void> {
    if (names.every((name) => this.#catalog.regionLabels.has(name))) return;
    this.#catalog = await this.#refreshRegions();
  }
}

/** The first decision of every call: throws unless the caller may call the RPC at all. */
export function decide(principal: Principal, permission: Permission, rpc: string, catalog: CatalogSnapshot | undefined): void {
  if (principal.kind === "admin") return;
  if (permission.scope === "agent") {
    if (principal.kind === "agent") return;
    throw denied(`${rpc} is for agents: call it with an agent token (or the admin token)`);
  }
  if (principal.kind === "agent") throw denied(`agent tokens may not call ${rpc}; use an operator token`);
  if (principal.kind !== "operator") throw denied(`${rpc} needs an operator credential`);
  if (permission.scope === "signed-in") return;
  const fleetRole = fleetRoleOf(principal);
  if (fleetRole >= permission.role) return;
  const holds = fleetRole === Role.UNSPECIFIED ? "has no fleet-wide role" : `has role ${roleName(fleetRole)}`;
  if (permission.scope === "fleet") throw denied(`${rpc} needs role ${roleName(permission.role)}; ${who(principal)} ${holds}`);
  // project and any-project: the role in at least one project lets the call go on.
  const held = projectRoles(principal, catalog!);
  for (const role of held.values()) if (role >= permission.role) return;
  const inProjects =
    held.size === 0
      ? "none in any project"
      : `only ${[...held].map(([project, role]) => `${roleName(role)} in project ${JSON.stringify(project)}`).join(", ")}`;
  throw denied(`${rpc} needs role ${roleName(permission.role)} in a project; ${who(principal)} ${holds} and ${inProjects}`);
}
