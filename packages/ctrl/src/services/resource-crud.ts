// The five AIP methods, shared by the deployment, sentinel and network-policy services:
// validate the request, then one store call (one transaction per write, which records the
// caller as the change's actor).
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { ChangeAuthor, Page, ResourceRepository } from "@flotilla/store";
import { actorOf, principalKey } from "../auth.ts";
import * as validate from "../validate.ts";

export interface ResourceCrud<M> {
  /** With `validateOnly`, every check runs and nothing is written (AIP-163). */
  create(resource: M | undefined, author: ChangeAuthor, validateOnly?: boolean): Promise<M>;
  get(id: string): Promise<M>;
  list(pageSize: number, pageToken: string): Promise<Page<M>>;
  update(resource: M | undefined, expectedRevision: bigint | undefined, author: ChangeAuthor, validateOnly?: boolean): Promise<M>;
  delete(id: string, expectedRevision: bigint | undefined, author: ChangeAuthor): Promise<void>;
}

/** The caller of a write, and its request's message. */
export function authorOf(ctx: HandlerContext, message: string): ChangeAuthor {
  return { actor: actorOf(ctx.values.get(principalKey)), message: validate.changeMessage(message) };
}

export function resourceCrud<Desc extends DescMessage>(
  repository: ResourceRepository<Desc>,
  validateResource: (resource: MessageShape<Desc> | undefined) => MessageShape<Desc>,
): ResourceCrud<MessageShape<Desc>> {
  return {
    create: (resource, author, validateOnly) => repository.create(validateResource(resource), author, validateOnly),
    get: (id) => repository.get(validate.id(id)),
    list: (pageSize, pageToken) => repository.list(pageSize, pageToken),
    update: (resource, expectedRevision, author, validateOnly) => repository.update(validateResource(resource), expectedRevision, author, validateOnly),
    delete: (id, expectedRevision, author) => repository.delete(validate.id(id), expectedRevision, author),
  };
}
