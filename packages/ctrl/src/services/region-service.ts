// ctrl.v1.RegionService. The agent-token RPCs are one file each under region/.
import type { ServiceImpl } from "@connectrpc/connect";
import type { RegionService, Region } from "@flotilla/proto/ctrl/v1/region_pb.js";
import type { Store } from "@flotilla/store";
import { recordWrite } from "../audit-trail.ts";
import { invalidArgument } from "../errors.ts";
import { withAgentStatus, type StatusOptions } from "../status/region-status.ts";
import * as validate from "../validate.ts";
import { createAgentToken } from "./region/create-agent-token.ts";
import { listAgentTokens } from "./region/list-agent-tokens.ts";
import { revokeAgentToken } from "./region/revoke-agent-token.ts";

export function regionService(store: Store, statusOptions: StatusOptions): ServiceImpl<typeof RegionService> {
  const withAgents = (regions: Region[]) => withAgentStatus(store, regions, statusOptions);
  return {
    async createRegion(req, ctx) {
      if (!req.region) throw invalidArgument("region", "is required");
      validate.dnsLabel("region.name", req.region.name);
      const region = await store.regions.create(
        req.region.name,
        validate.regionLabels(req.region.labels),
        validate.prometheusAddress(req.region.metrics?.prometheus?.address ?? ""),
      );
      await recordWrite(store, ctx, "region", req.region.name);
      return { region };
    },
    getRegion: async (req) => ({ region: (await withAgents([await store.regions.get(validate.id(req.name, "name"))]))[0] }),
    async listRegions(req) {
      const page = await store.regions.list(req.pageSize, req.pageToken, validate.labelSelector(req.labelSelector));
      return { regions: await withAgents(page.items), nextPageToken: page.nextPageToken };
    },
    async updateRegion(req, ctx) {
      if (!req.region) throw invalidArgument("region", "is required");
      validate.dnsLabel("region.name", req.region.name);
      const region = await store.regions.update(
        req.region.name,
        validate.regionLabels(req.region.labels),
        validate.prometheusAddress(req.region.metrics?.prometheus?.address ?? ""),
      );
      await recordWrite(store, ctx, "region", req.region.name);
      return { region: (await withAgents([region]))[0] };
    },
    deleteRegion: async (req, ctx) => {
      await store.regions.delete(validate.id(req.name, "name"));
      await recordWrite(store, ctx, "region", req.name);
      return {};
    },
    createAgentToken: createAgentToken(store),
    listAgentTokens: listAgentTokens(store),
    revokeAgentToken: revokeAgentToken(store),
  };
}
