// RegionService.CreateAgentToken: mints a token for a region, optionally expiring.
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { CreateAgentTokenRequest, CreateAgentTokenResponseSchema } from "@flotilla/proto/ctrl/v1/region_pb.js";
import type { Store } from "@flotilla/store";
import { invalidArgument } from "../../errors.ts";
import * as validate from "../../validate.ts";

export function createAgentToken(store: Store) {
  return async (req: CreateAgentTokenRequest): Promise<MessageInitShape<typeof CreateAgentTokenResponseSchema>> => {
    const region = validate.id(req.region, "region");
    const expireTime = expiry(req, Date.now());
    const { id, token } = await store.agentTokens.create(region, expireTime);
    return { token, tokenId: id, expireTime: expireTime === undefined ? undefined : timestampFromMs(expireTime) };
  };
}

/** Unix ms of the requested expiry, or undefined for none. */
function expiry(req: CreateAgentTokenRequest, now: number): number | undefined {
  const { expiration } = req;
  if (expiration.case === "expireTime") {
    const at = timestampDate(expiration.value).getTime();
    if (!(at > now)) throw invalidArgument("expire_time", "must be in the future");
    return at;
  }
  if (expiration.case === "ttl") {
    const ms = Number(expiration.value.seconds) * 1000 + Math.floor(expiration.value.nanos / 1e6);
    if (!(ms > 0)) throw invalidArgument("ttl", "must be positive");
    return now + ms;
  }
  return undefined;
}
