// RegionService.ListAgentTokens: token metadata, never a token or its hash.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ListAgentTokensRequest, ListAgentTokensResponseSchema } from "@flotilla/proto/ctrl/v1/region_pb.js";
import type { Store } from "@flotilla/store";
import * as validate from "../../validate.ts";

export function listAgentTokens(store: Store) {
  return async (req: ListAgentTokensRequest): Promise<MessageInitShape<typeof ListAgentTokensResponseSchema>> => {
    if (req.region !== "") validate.dnsLabel("region", req.region);
    const page = await store.agentTokens.list(req.region, req.pageSize, req.pageToken);
    return { agentTokens: page.items, nextPageToken: page.nextPageToken };
  };
}
