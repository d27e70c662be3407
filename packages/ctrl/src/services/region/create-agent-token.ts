// RegionService.CreateAgentToken: mints a token for a region, optionally expiring.
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { CreateAgentTokenRequest, CreateAgentTokenResponseSchema } from "@flotilla/proto/ctrl/v1/region_pb.js";
import type { HandlerContext } from "@connectrpc/connect";
import type { Store } from "@flotilla/store";
import { recordWrite } from "../../audit-trail.ts";
import * as validate from "../../validate.ts";

export function createAgentToken(store: Store) {
  return async (req: CreateAgentTokenRequest, ctx: HandlerContext): Promise<MessageInitShape<typeof CreateAgentTokenResponseSchema>> => {
    const region = validate.id(req.region, "region");
    const expireTime = validate.expiry(req, Date.now());
    const { id, token } = await store.agentTokens.create(region, expireTime);
    await recordWrite(store, ctx, "agent_token", id);
    return { token, tokenId: id, expireTime: expireTime === undefined ? undefined : timestampFromMs(expireTime) };
  };
}
