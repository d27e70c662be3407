// ctrl.v1.ClusterService: the agent-facing API. One file per RPC under cluster/.
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import type { Store } from "@flotilla/store";
import type { CtrlMetrics } from "../metrics.ts";
import type { SendBudget } from "../send-budget.ts";
import type { StatusOptions } from "../status/region-status.ts";
import type { ChangePoller } from "../streaming/poller.ts";
import type { StreamOptions } from "./cluster/options.ts";
import { getSecretEnvSeals } from "./cluster/get-secret-env-seals.ts";
import { getSecretKeys } from "./cluster/get-secret-keys.ts";
import { reportMeasurements } from "./cluster/report-measurements.ts";
import { reportObservedState } from "./cluster/report-observed-state.ts";
import { syncDesiredState } from "./cluster/sync-desired-state.ts";
import { resyncRequired, watchDeploymentChanges } from "./cluster/watch-deployment-changes.ts";

export function clusterService(
  store: Store,
  poller: ChangePoller,
  metrics: CtrlMetrics,
  options: StreamOptions,
  statusOptions: StatusOptions,
  sendBudget: SendBudget,
  /** Deployments whose rollouts got analysis measurements stored (the rollout driver looks at them). */
  measured?: (deploymentIds: string[]) => void,
): ServiceImpl<typeof ClusterService> {
  return {
    syncDesiredState: syncDesiredState(store, metrics, options, sendBudget),
    watchDeploymentChanges: watchDeploymentChanges(store, poller, metrics, options, sendBudget),
    reportObservedState: reportObservedState(store, metrics, statusOptions),
    reportMeasurements: reportMeasurements(store, metrics, measured),
    getSecretKeys: getSecretKeys(store),
    getSecretEnvSeals: getSecretEnvSeals(store, options),
  };
}

/** How the poller ends streams it can no longer serve. */
export function lostStreamError(regionName: string, why: "region_deleted" | "pruned", position: number): Error {
  if (why === "region_deleted") return new ConnectError(`region ${JSON.stringify(regionName)} was deleted`, Code.NotFound);
  return resyncRequired(`changes after version ${position} of region ${regionName} are past the outbox retention`, position);
}
