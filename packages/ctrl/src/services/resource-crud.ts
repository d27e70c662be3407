// The five AIP methods, shared by the deployment, sentinel and network-policy services:
// validate the request, then one store call (one transaction per write, which records the
// caller as the change's actor). Each asks the call's project access (authorization/) about
// the resource it touches: reads about the stored resource, writes in the write's transaction
// about the locked row and what would replace it; lists show only the caller's projects.
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { projectOf, StoreError, type ChangeAuthor, type Page, type ResourceRepository, type WriteGuard } from "@flotilla/store";
import { actorOf, principalKey, projectAccess } from "../auth.ts";
import type { Placed } from "../authorization/decide.ts";
import * as validate from "../validate.ts";

export interface ResourceCrud<M> {
  /** With `validateOnly`, every check runs and nothing is written (AIP-163). */
  create(resource: M | undefined, ctx: HandlerContext, message: string, validateOnly?: boolean): Promise<M>;
  get(id: string, ctx: HandlerContext): Promise<M>;
  list(pageSize: number, pageToken: string, ctx: HandlerContext): Promise<Page<M>>;
  update(resource: M | undefined, expectedRevision: bigint | undefined, ctx: HandlerContext, message: string, validateOnly?: boolean): Promise<M>;
  delete(id: string, expectedRevision: bigint | undefined, ctx: HandlerContext, message: string): Promise<void>;
}

/** The caller of a write, and its request's message. */
export function authorOf(ctx: HandlerContext, message: string): ChangeAuthor {
  const principal = ctx.values.get(principalKey);
  return { actor: actorOf(principal), message: validate.changeMessage(message), groups: principal.kind === "operator" ? principal.groups : undefined };
}

/** Where a resource is: its project, namespace and placements, as the authorization judges a write. */
function placedOf<Desc extends DescMessage>(repository: ResourceRepository<Desc>, resource: MessageShape<Desc>): Placed {
  return { project: projectOf(resource), namespace: (resource as { namespace?: string }).namespace ?? "", regions: repository.kind.placements(resource) };
}

/** The guard of a write by the caller of `ctx` (called by the store in the write's transaction). */
export async function writeGuard<Desc extends DescMessage>(
  repository: ResourceRepository<Desc>,
  ctx: HandlerContext,
  id: string,
  next: MessageShape<Desc> | undefined,
): Promise<WriteGuard<MessageShape<Desc>>> {
  const access = projectAccess(ctx);
  if (next) await access.knowRegions(repository.kind.placements(next).map((p) => p.region));
  return (write) =>
    access.requireWrite(repository.kind.field, id, write.next && placedOf(repository, write.next), write.existing && placedOf(repository, write.existing));
}

/** NOT_FOUND unless the resource exists, PERMISSION_DENIED (naming its project) unless the caller may read it. */
export async function authorizeResource<Desc extends DescMessage>(repository: ResourceRepository<Desc>, ctx: HandlerContext, id: string): Promise<void> {
  // A fleet-wide reader reads what the store has, as before projects (transitions of a deleted object too).
  if (projectAccess(ctx).coversEveryProject()) return;
  const project = (await repository.projectsOf([id])).get(id);
  if (project === undefined) throw new StoreError("not_found", `${repository.kind.field} ${JSON.stringify(id)} not found`, "id");
  projectAccess(ctx).require(project, `${repository.kind.field} ${JSON.stringify(id)}`);
}

export function resourceCrud<Desc extends DescMessage>(
  repository: ResourceRepository<Desc>,
  validateResource: (resource: MessageShape<Desc> | undefined) => MessageShape<Desc>,
): ResourceCrud<MessageShape<Desc>> {
  const idOf = (resource: MessageShape<Desc>) => (resource as unknown as { id: string }).id;
  const validProject = (resource: MessageShape<Desc> | undefined) => {
    const valid = validateResource(resource);
    const project = (valid as { project?: string }).project;
    if (project) validate.dnsLabel(`${repository.kind.field}.project`, project);
    return valid;
  };
  return {
    async create(resource, ctx, message, validateOnly) {
      const valid = validProject(resource);
      return repository.create(valid, authorOf(ctx, message), validateOnly, await writeGuard(repository, ctx, idOf(valid), valid));
    },
    async get(id, ctx) {
      const found = await repository.get(validate.id(id));
      projectAccess(ctx).require(projectOf(found), `${repository.kind.field} ${JSON.stringify(id)}`);
      return found;
    },
    list: (pageSize, pageToken, ctx) => repository.list(pageSize, pageToken, projectAccess(ctx).visibleProjects()),
    async update(resource, expectedRevision, ctx, message, validateOnly) {
      const valid = validProject(resource);
      return repository.update(valid, expectedRevision, authorOf(ctx, message), validateOnly, await writeGuard(repository, ctx, idOf(valid), valid));
    },
    async delete(id, expectedRevision, ctx, message) {
      validate.id(id);
      return repository.delete(id, expectedRevision, authorOf(ctx, message), await writeGuard(repository, ctx, id, undefined));
    },
  };
}
