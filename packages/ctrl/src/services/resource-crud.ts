// The five AIP methods, shared by the deployment, sentinel and network-policy services:
// validate the request, then one store call (one transaction per write).
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import type { Page, ResourceRepository } from "@flotilla/store";
import * as validate from "../validate.ts";

export interface ResourceCrud<M> {
  create(resource: M | undefined): Promise<M>;
  get(id: string): Promise<M>;
  list(pageSize: number, pageToken: string): Promise<Page<M>>;
  update(resource: M | undefined, expectedRevision: bigint | undefined): Promise<M>;
  delete(id: string, expectedRevision: bigint | undefined): Promise<void>;
}

export function resourceCrud<Desc extends DescMessage>(
  repository: ResourceRepository<Desc>,
  validateResource: (resource: MessageShape<Desc> | undefined) => MessageShape<Desc>,
): ResourceCrud<MessageShape<Desc>> {
  return {
    create: (resource) => repository.create(validateResource(resource)),
    get: (id) => repository.get(validate.id(id)),
    list: (pageSize, pageToken) => repository.list(pageSize, pageToken),
    update: (resource, expectedRevision) => repository.update(validateResource(resource), expectedRevision),
    delete: (id, expectedRevision) => repository.delete(validate.id(id), expectedRevision),
  };
}
