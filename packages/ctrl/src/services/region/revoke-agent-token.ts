// RegionService.RevokeAgentToken: deletes the token. Other replicas stop accepting it within
// their known-token cache lifetime (auth.ts), well under 1 s.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { RevokeAgentTokenRequest, RevokeAgentTokenResponseSchema } from "@flotilla/proto/ctrl/v1/region_pb.js";
import type { HandlerContext } from "@connectrpc/connect";
import type { Store } from "@flotilla/store";
import { recordWrite } from "../../audit-trail.ts";
import * as validate from "../../validate.ts";

export function revokeAgentToken(store: Store) {
  return async (req: RevokeAgentTokenRequest, ctx: HandlerContext): Promise<MessageInitShape<typeof RevokeAgentTokenResponseSchema>> => {
    await store.agentTokens.revoke(validate.id(req.id, "id"));
    await recordWrite(store, ctx, "agent_token", req.id);
    return {};
  };
}
