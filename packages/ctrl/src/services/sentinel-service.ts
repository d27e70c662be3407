// ctrl.v1.SentinelService.
import type { ServiceImpl } from "@connectrpc/connect";
import { ResourceType, type Sentinel } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import type { Store } from "@flotilla/store";
import { statusesOf, type StatusOptions } from "../status/region-status.ts";
import * as validate from "../validate.ts";
import { resourceCrud } from "./resource-crud.ts";

export function sentinelService(store: Store, statusOptions: StatusOptions, validation: validate.ValidationOptions): ServiceImpl<typeof SentinelService> {
  const crud = resourceCrud(store.sentinels, (resource) => validate.sentinel(resource, validation));
  const withStatus = async (sentinels: Sentinel[]) => {
    const statuses = await statusesOf(
      store,
      ResourceType.SENTINEL,
      sentinels.map((s) => s.id),
      statusOptions,
    );
    for (const s of sentinels) s.status = statuses.get(s.id)?.[0];
    return sentinels;
  };
  const one = async (s: Sentinel) => ({ sentinel: (await withStatus([s]))[0] });
  return {
    createSentinel: async (req, ctx) => one(await crud.create(req.sentinel, ctx, req.message, req.validateOnly)),
    getSentinel: async (req, ctx) => one(await crud.get(req.id, ctx)),
    async listSentinels(req, ctx) {
      const page = await crud.list(req.pageSize, req.pageToken, ctx);
      return { sentinels: await withStatus(page.items), nextPageToken: page.nextPageToken };
    },
    updateSentinel: async (req, ctx) => one(await crud.update(req.sentinel, req.expectedRevision, ctx, req.message, req.validateOnly)),
    deleteSentinel: async (req, ctx) => {
      await crud.delete(req.id, req.expectedRevision, ctx, req.message);
      return {};
    },
  };
}
