// ctrl.v1.RegionService. The agent-token RPCs are one file each under region/.
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { AgentStatusSchema, type RegionService, type Region } from "@flotilla/proto/ctrl/v1/region_pb.js";
import type { Store } from "@flotilla/store";
import { invalidArgument } from "../errors.ts";
import { agentConnected, type StatusOptions } from "../status/region-status.ts";
import * as validate from "../validate.ts";
import { createAgentToken } from "./region/create-agent-token.ts";
import { listAgentTokens } from "./region/list-agent-tokens.ts";
import { revokeAgentToken } from "./region/revoke-agent-token.ts";

export function regionService(store: Store, statusOptions: StatusOptions): ServiceImpl<typeof RegionService> {
  /** Fills each region's agent liveness: last report, applied version, lag. */
  const withAgents = async (regions: Region[]) => {
    const ids = await store.regions.idsByName(regions.map((r) => r.name));
    const agents = await store.observations.agents([...ids.values()]);
    const now = Date.now();
    for (const r of regions) {
      const id = ids.get(r.name);
      const agent = id === undefined ? undefined : agents.get(id);
      if (!agent) continue;
      r.agent = create(AgentStatusSchema, {
        connected: agentConnected(agent.lastSeen, now, statusOptions),
        lastSeen: timestampFromMs(agent.lastSeen),
        appliedVersion: BigInt(agent.appliedVersion),
        lag: r.headVersion > BigInt(agent.appliedVersion) ? r.headVersion - BigInt(agent.appliedVersion) : 0n,
      });
    }
    return regions;
  };
  return {
    async createRegion(req) {
      if (!req.region) throw invalidArgument("region", "is required");
      validate.dnsLabel("region.name", req.region.name);
      return { region: await store.regions.create(req.region.name) };
    },
    getRegion: async (req) => ({ region: (await withAgents([await store.regions.get(validate.id(req.name, "name"))]))[0] }),
    async listRegions(req) {
      const page = await store.regions.list(req.pageSize, req.pageToken);
      return { regions: await withAgents(page.items), nextPageToken: page.nextPageToken };
    },
    deleteRegion: async (req) => {
      await store.regions.delete(validate.id(req.name, "name"));
      return {};
    },
    createAgentToken: createAgentToken(store),
    listAgentTokens: listAgentTokens(store),
    revokeAgentToken: revokeAgentToken(store),
  };
}
