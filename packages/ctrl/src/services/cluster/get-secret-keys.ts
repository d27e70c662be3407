// ClusterService.GetSecretKeys: the keys that open the secret values of a region's desired
// state, for that region's own agent only (its token, and with mTLS its client certificate). The
// admin token, which every other ClusterService call admits, is refused: no credential but the
// region's opens its values. The keys are those of every key epoch up to the region's current one.
import type { HandlerContext } from "@connectrpc/connect";
import type { GetSecretKeysRequest, GetSecretKeysResponse } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { GetSecretKeysResponseSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { create } from "@bufbuild/protobuf";
import type { Store } from "@flotilla/store";
import { authorizeSecretValues, resolveAuthorizedRegion } from "../../auth.ts";
import * as validate from "../../validate.ts";

export function getSecretKeys(store: Store) {
  return async (req: GetSecretKeysRequest, ctx: HandlerContext): Promise<GetSecretKeysResponse> => {
    validate.dnsLabel("region", req.region);
    const region = await resolveAuthorizedRegion(ctx, store.regions, req.region);
    authorizeSecretValues(ctx, region);
    const epoch = await store.regions.secretKeyEpoch(region.id);
    return create(GetSecretKeysResponseSchema, { keys: store.secrets?.regionKeys(region.id, epoch) ?? [] });
  };
}
