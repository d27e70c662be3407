// ctrl.v1.NetworkPolicyService.
import type { ServiceImpl } from "@connectrpc/connect";
import type { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import type { Store } from "@flotilla/store";
import * as validate from "../validate.ts";
import { resourceCrud } from "./resource-crud.ts";

export function networkPolicyService(store: Store, validation: validate.ValidationOptions): ServiceImpl<typeof NetworkPolicyService> {
  const crud = resourceCrud(store.networkPolicies, (resource) => validate.networkPolicy(resource, validation));
  return {
    createNetworkPolicy: async (req, ctx) => ({ networkPolicy: await crud.create(req.networkPolicy, ctx, req.message, req.validateOnly) }),
    getNetworkPolicy: async (req, ctx) => ({ networkPolicy: await crud.get(req.id, ctx) }),
    async listNetworkPolicies(req, ctx) {
      const page = await crud.list(req.pageSize, req.pageToken, ctx);
      return { networkPolicies: page.items, nextPageToken: page.nextPageToken };
    },
    updateNetworkPolicy: async (req, ctx) => ({
      networkPolicy: await crud.update(req.networkPolicy, req.expectedRevision, ctx, req.message, req.validateOnly),
    }),
    deleteNetworkPolicy: async (req, ctx) => {
      await crud.delete(req.id, req.expectedRevision, ctx, req.message);
      return {};
    },
  };
}
