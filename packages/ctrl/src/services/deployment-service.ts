// ctrl.v1.DeploymentService.
import type { ServiceImpl } from "@connectrpc/connect";
import type { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { ResourceType, type Deployment } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Store } from "@flotilla/store";
import { statusesOf, type StatusOptions } from "../status/region-status.ts";
import * as validate from "../validate.ts";
import { resourceCrud } from "./resource-crud.ts";
import { rolloutMessages } from "./rollout-service.ts";

export function deploymentService(store: Store, statusOptions: StatusOptions, validation: validate.ValidationOptions): ServiceImpl<typeof DeploymentService> {
  const crud = resourceCrud(store.deployments, (resource) => validate.deployment(resource, validation));
  const withStatus = async (deployments: Deployment[]) => {
    const statuses = await statusesOf(
      store,
      ResourceType.DEPLOYMENT,
      deployments.map((d) => d.id),
      statusOptions,
    );
    const rollouts = await store.rollouts.newestOf(deployments.map((d) => d.id));
    const shown = new Map((await rolloutMessages(store, [...rollouts.values()], statusOptions, statuses)).map((r) => [r.deployment, r]));
    for (const d of deployments) {
      d.status = statuses.get(d.id) ?? [];
      d.rollout = shown.get(d.id);
    }
    return deployments;
  };
  const one = async (d: Deployment) => ({ deployment: (await withStatus([d]))[0] });
  return {
    createDeployment: async (req, ctx) => one(await crud.create(req.deployment, ctx, req.message, req.validateOnly)),
    getDeployment: async (req, ctx) => one(await crud.get(req.id, ctx)),
    async listDeployments(req, ctx) {
      const page = await crud.list(req.pageSize, req.pageToken, ctx);
      return { deployments: await withStatus(page.items), nextPageToken: page.nextPageToken };
    },
    updateDeployment: async (req, ctx) => one(await crud.update(req.deployment, req.expectedRevision, ctx, req.message, req.validateOnly)),
    deleteDeployment: async (req, ctx) => {
      await crud.delete(req.id, req.expectedRevision, ctx, req.message);
      return {};
    },
  };
}
