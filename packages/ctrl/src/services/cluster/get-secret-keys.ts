// ClusterService.GetSecretKeys: the keys that open the secret values of a region's desired
// state, for that region's own agent only. The admin token, which every other ClusterService
// call admits, is refused: no credential but the region's opens its values.
import type { HandlerContext } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import type { GetSecretKeysRequest, GetSecretKeysResponse } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { GetSecretKeysResponseSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { create } from "@bufbuild/protobuf";
import type { Store } from "@flotilla/store";
import { principalKey, resolveAuthorizedRegion } from "../../auth.ts";
import * as validate from "../../validate.ts";

export function getSecretKeys(store: Store) {
  return async (req: GetSecretKeysRequest, ctx: HandlerContext): Promise<GetSecretKeysResponse> => {
    validate.dnsLabel("region", req.region);
    if (ctx.values.get(principalKey).kind !== "agent") {
      throw new ConnectError(`only region ${JSON.stringify(req.region)}'s agent token may have its secret keys`, Code.PermissionDenied);
    }
    const region = await resolveAuthorizedRegion(ctx, store.regions, req.region);
    return create(GetSecretKeysResponseSchema, { keys: store.secrets?.regionKeys(region.id) ?? [] });
  };
}
