// ctrl.v1.HistoryService: the kept revisions of each operator-owned object, rollback to one
// of them, and the audit trail.
import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { timestampDate, timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { RevisionSchema, type HistoryService, type Revision } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { ResourceType } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { ResourceRepository, Store, StoredRevision } from "@flotilla/store";
import { projectAccess } from "../auth.ts";
import { invalidArgument } from "../errors.ts";
import * as validate from "../validate.ts";
import { authorizeResource, authorOf, writeGuard } from "./resource-crud.ts";

/** The Revision oneof case of each type. */
const SPEC_CASE = {
  [ResourceType.DEPLOYMENT]: "deployment",
  [ResourceType.SENTINEL]: "sentinel",
  [ResourceType.CILIUM_NETWORK_POLICY]: "networkPolicy",
} as const;

export function historyService(store: Store, validation: validate.ValidationOptions): ServiceImpl<typeof HistoryService> {
  const repositoryOf = (type: ResourceType): ResourceRepository<DescMessage> => {
    const repository = store.repository(type);
    if (!repository) throw invalidArgument("resource_type", "must be DEPLOYMENT, SENTINEL or CILIUM_NETWORK_POLICY");
    return repository;
  };
  const toRevision = (type: ResourceType, id: string, stored: StoredRevision<MessageShape<DescMessage>>): Revision =>
    create(RevisionSchema, {
      resourceType: type,
      id,
      revision: BigInt(stored.revision),
      actor: stored.actor,
      createTime: timestampFromMs(stored.createTime),
      message: stored.message,
      spec: { case: SPEC_CASE[type as keyof typeof SPEC_CASE], value: stored.resource } as Revision["spec"],
    });
  /** A rollback target passes the validation a create of it would (the rules may have tightened since). */
  const validateSpec = (type: ResourceType, spec: MessageShape<DescMessage>) => {
    if (type === ResourceType.DEPLOYMENT) validate.deployment(spec as never, validation);
    else if (type === ResourceType.SENTINEL) validate.sentinel(spec as never, validation);
    else validate.networkPolicy(spec as never, validation);
  };
  return {
    async listRevisions(req, ctx) {
      const repository = repositoryOf(req.resourceType);
      await authorizeResource(repository, ctx, validate.id(req.id));
      const page = await repository.revisions(req.id, req.pageSize, req.pageToken);
      return { revisions: page.items.map((r) => toRevision(req.resourceType, req.id, r)), nextPageToken: page.nextPageToken };
    },
    async getRevision(req, ctx) {
      const repository = repositoryOf(req.resourceType);
      await authorizeResource(repository, ctx, validate.id(req.id));
      const stored = await repository.revision(req.id, revisionNumber(req.revision, "revision"));
      return { revision: toRevision(req.resourceType, req.id, stored) };
    },
    async rollback(req, ctx: HandlerContext) {
      const repository = repositoryOf(req.resourceType);
      const id = validate.id(req.id);
      const to = revisionNumber(req.toRevision, "to_revision");
      // Before the target is read (its validation would tell of it); again in the write's transaction.
      await authorizeResource(repository, ctx, id);
      const target = (await repository.revision(id, to)).resource;
      validateSpec(req.resourceType, target);
      const guard = await writeGuard(repository, ctx, id, target);
      const result = (await repository.rollback(id, to, req.expectedRevision, authorOf(ctx, req.message), guard)) as unknown as { revision: bigint };
      return { revision: toRevision(req.resourceType, id, await repository.revision(id, Number(result.revision))) };
    },
    async listStatusTransitions(req, ctx) {
      const repository = repositoryOf(req.resourceType);
      const id = validate.id(req.id);
      if (req.limit < 0) throw invalidArgument("limit", "must not be negative");
      await authorizeResource(repository, ctx, id);
      const rows = await store.observations.transitions(repository.kind.type, id, Math.min(req.limit || 20, 1000));
      return {
        transitions: rows.map((t) => ({ region: t.region, time: timestampFromMs(t.time), fromPhase: t.from, toPhase: t.to, reason: t.reason })),
      };
    },
    async listAuditEvents(req, ctx) {
      const access = projectAccess(ctx);
      let projects = access.visibleProjects();
      if (req.project !== "") {
        access.require(validate.id(req.project, "project"));
        projects = new Set([req.project]);
      }
      const page = await store.audit.list(
        { since: req.since ? timestampDate(req.since).getTime() : undefined, actor: req.actor || undefined, projects },
        req.pageSize,
        req.pageToken,
      );
      return { events: page.items, nextPageToken: page.nextPageToken };
    },
  };
}

function revisionNumber(value: bigint, field: string): number {
  if (value < 1n || value > BigInt(Number.MAX_SAFE_INTEGER)) throw invalidArgument(field, "must be a revision number (1 or more)");
  return Number(value);
}
