// ctrl.v1.ProjectService: projects, their bounds (namespaces, regions) and their role bindings.
// Written by fleet admins; a project's own admins may change its description and roles, never
// its bounds (that would widen what its members may touch). Each write is audited, and reaches
// this replica's decisions at once (others within the catalog's age).
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { ProjectRegionsSchema, type Project, type ProjectService } from "@flotilla/proto/ctrl/v1/project_pb.js";
import { equals } from "@bufbuild/protobuf";
import type { Store } from "@flotilla/store";
import { LabelSelectorError, parseLabelSelector } from "@flotilla/labels";
import { Code, ConnectError } from "@connectrpc/connect";
import { recordWrite } from "../audit-trail.ts";
import { projectAccess } from "../auth.ts";
import type { ProjectCatalog } from "../authorization/catalog.ts";
import { invalidArgument } from "../errors.ts";
import * as validate from "../validate.ts";

/** A namespace or region name, or a glob of them (`*` for any run of characters). */
const NAME_GLOB = /^[a-z0-9*]([-a-z0-9*]*[a-z0-9*])?$/;
const MAX_GLOBS = 100;
const MAX_BINDINGS = 100;
const MAX_SUBJECTS = 1000;
const MAX_GROUP_LENGTH = 256;

function globs(field: string, values: readonly string[]): void {
  if (values.length > MAX_GLOBS) throw invalidArgument(field, `at most ${MAX_GLOBS}`);
  values.forEach((value, i) => {
    if (value.length > 63 || !NAME_GLOB.test(value))
      throw invalidArgument(
        `${field}[${i}]`,
        `${JSON.stringify(value.slice(0, 80))} is not a name or a glob of names (lowercase letters, digits, '-' and '*', at most 63)`,
      );
  });
}

/** The project, checked field by field (INVALID_ARGUMENT naming the field). */
export function validProject(project: Project | undefined): Project {
  if (!project) throw invalidArgument("project", "is required");
  validate.dnsLabel("project.name", project.name);
  if (project.description.length > 1024) throw invalidArgument("project.description", "at most 1024 characters");
  if (project.namespaces.length === 0) throw invalidArgument("project.namespaces", 'at least one (a glob such as "team-a-*", or "*" for every namespace)');
  globs("project.namespaces", project.namespaces);
  globs("project.regions.names", project.regions?.names ?? []);
  if (project.regions?.selector) {
    try {
      parseLabelSelector(project.regions.selector);
    } catch (error) {
      if (error instanceof LabelSelectorError) throw invalidArgument("project.regions.selector", error.message);
      throw error;
    }
  }
  if (project.roles.length > MAX_BINDINGS) throw invalidArgument("project.roles", `at most ${MAX_BINDINGS}`);
  let subjects = 0;
  project.roles.forEach((binding, i) => {
    const field = `project.roles[${i}]`;
    if (binding.role !== Role.VIEWER && binding.role !== Role.DEPLOYER && binding.role !== Role.ADMIN)
      throw invalidArgument(`${field}.role`, "must be ROLE_VIEWER, ROLE_DEPLOYER or ROLE_ADMIN");
    for (const [j, name] of binding.operators.entries()) validate.dnsLabel(`${field}.operators[${j}]`, name);
    for (const [j, group] of binding.groups.entries()) {
      if (group === "" || group.length > MAX_GROUP_LENGTH) throw invalidArgument(`${field}.groups[${j}]`, `1 to ${MAX_GROUP_LENGTH} characters`);
    }
    subjects += binding.operators.length + binding.groups.length;
  });
  if (subjects > MAX_SUBJECTS) throw invalidArgument("project.roles", `at most ${MAX_SUBJECTS} operators and groups in all`);
  return project;
}

export function projectService(store: Store, catalog: ProjectCatalog): ServiceImpl<typeof ProjectService> {
  /** After a write: this replica decides by it at once, and the audit trail has it. */
  const written = async (ctx: HandlerContext, name: string) => {
    catalog.invalidate();
    await recordWrite(store, ctx, "project", name, "", name);
  };
  return {
    async createProject(req, ctx) {
      const project = await store.projects.create(validProject(req.project), req.validateOnly);
      if (!req.validateOnly) await written(ctx, project.name);
      return { project };
    },
    async getProject(req, ctx) {
      projectAccess(ctx).require(validate.id(req.name, "name"));
      return { project: await store.projects.get(req.name) };
    },
    async listProjects(req, ctx) {
      const page = await store.projects.list(req.pageSize, req.pageToken, projectAccess(ctx).visibleProjects());
      return { projects: page.items, nextPageToken: page.nextPageToken };
    },
    async updateProject(req, ctx) {
      const next = validProject(req.project);
      const access = projectAccess(ctx);
      access.require(next.name);
      if (!access.fleetWide) {
        const stored = await store.projects.get(next.name);
        const sameBounds =
          stored.namespaces.join("\n") === next.namespaces.join("\n") &&
          equals(ProjectRegionsSchema, stored.regions ?? ({} as never), next.regions ?? ({} as never));
        if (!sameBounds)
          throw new ConnectError(
            `UpdateProject: only a fleet admin changes project ${JSON.stringify(next.name)}'s namespaces and regions; its admins change its description and roles`,
            Code.PermissionDenied,
          );
      }
      const project = await store.projects.update(next, req.validateOnly);
      if (!req.validateOnly) await written(ctx, project.name);
      return { project };
    },
    async deleteProject(req, ctx) {
      await store.projects.delete(validate.id(req.name, "name"));
      await written(ctx, req.name);
      return {};
    },
  };
}
