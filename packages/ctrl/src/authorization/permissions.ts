// The one table of what every RPC needs. Each entry is a role and the scope it must be held in:
//
//   fleet        fleet-wide (the bootstrap admin token, or an operator account's own role);
//   project      in the project of what the call reads or writes — the handler names it, and
//                lists and streams show only the projects where the caller holds the role;
//   any-project  fleet-wide or in at least one project (shared, non-project data: regions);
//   signed-in    any operator credential (WhoAmI);
//   agent        an agent token, for its own region (checked by the handler), or the admin token.
//
// Typed by each service's methods: a new RPC without an entry here does not compile, and a
// service served without a table here fails a test (authorization-matrix.test.ts).
import type { DescService } from "@bufbuild/protobuf";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { HistoryService } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { NotifierService } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { OperatorService, Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { ProjectService } from "@flotilla/proto/ctrl/v1/project_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import { StatusService } from "@flotilla/proto/ctrl/v1/status_pb.js";

export type Scope = "fleet" | "project" | "any-project" | "signed-in" | "agent";

export interface Permission {
  scope: Scope;
  /** The least role that allows the call (roles nest: admin ⊃ deployer ⊃ viewer); NONE for agent and signed-in scopes. */
  role: Role;
}

/** An entry for every method of the service, by its local name (createDeployment). */
type ServiceTable<S extends DescService> = { readonly [M in keyof S["method"]]: Permission };

const fleet = (role: Role): Permission => ({ scope: "fleet", role });
const inProject = (role: Role): Permission => ({ scope: "project", role });
const READ = inProject(Role.VIEWER);
const WRITE = inProject(Role.DEPLOYER);
const FLEET_ADMIN = fleet(Role.ADMIN);

const deployments: ServiceTable<typeof DeploymentService> = {
  createDeployment: WRITE,
  getDeployment: READ,
  listDeployments: READ,
  updateDeployment: WRITE,
  deleteDeployment: WRITE,
};

const sentinels: ServiceTable<typeof SentinelService> = {
  createSentinel: WRITE,
  getSentinel: READ,
  listSentinels: READ,
  updateSentinel: WRITE,
  deleteSentinel: WRITE,
};

const networkPolicies: ServiceTable<typeof NetworkPolicyService> = {
  createNetworkPolicy: WRITE,
  getNetworkPolicy: READ,
  listNetworkPolicies: READ,
  updateNetworkPolicy: WRITE,
  deleteNetworkPolicy: WRITE,
};

const history: ServiceTable<typeof HistoryService> = {
  listRevisions: READ,
  getRevision: READ,
  rollback: WRITE,
  listAuditEvents: READ,
  listStatusTransitions: READ,
};

const rollouts: ServiceTable<typeof RolloutService> = {
  getRollout: READ,
  listRollouts: READ,
  pauseRollout: WRITE,
  resumeRollout: WRITE,
  approveRollout: WRITE,
  promoteRollout: WRITE,
  abortRollout: WRITE,
};

const status: ServiceTable<typeof StatusService> = {
  watchStatus: READ,
};

const projects: ServiceTable<typeof ProjectService> = {
  createProject: FLEET_ADMIN,
  getProject: READ,
  listProjects: READ,
  // A project's admin edits its description and roles; its namespaces and regions, which bound
  // what its members may touch, only a fleet admin (project-service.ts).
  updateProject: inProject(Role.ADMIN),
  deleteProject: FLEET_ADMIN,
};

const regions: ServiceTable<typeof RegionService> = {
  createRegion: FLEET_ADMIN,
  getRegion: { scope: "any-project", role: Role.VIEWER },
  listRegions: { scope: "any-project", role: Role.VIEWER },
  updateRegion: FLEET_ADMIN,
  deleteRegion: FLEET_ADMIN,
  createAgentToken: FLEET_ADMIN,
  listAgentTokens: FLEET_ADMIN,
  revokeAgentToken: FLEET_ADMIN,
};

const operators: ServiceTable<typeof OperatorService> = {
  createOperator: FLEET_ADMIN,
  listOperators: FLEET_ADMIN,
  revokeOperator: FLEET_ADMIN,
  whoAmI: { scope: "signed-in", role: Role.UNSPECIFIED },
};

// Notifiers see every project's deployments (their selectors are namespaces and labels):
// fleet-wide, like regions' writes. Reading them and their deliveries needs a fleet-wide viewer.
const FLEET_VIEWER = fleet(Role.VIEWER);
const notifiers: ServiceTable<typeof NotifierService> = {
  createNotifier: FLEET_ADMIN,
  getNotifier: FLEET_VIEWER,
  listNotifiers: FLEET_VIEWER,
  updateNotifier: FLEET_ADMIN,
  deleteNotifier: FLEET_ADMIN,
  rotateNotifierSecret: FLEET_ADMIN,
  testNotifier: FLEET_ADMIN,
  listDeliveries: FLEET_VIEWER,
};

const AGENT: Permission = { scope: "agent", role: Role.UNSPECIFIED };
const cluster: ServiceTable<typeof ClusterService> = {
  syncDesiredState: AGENT,
  watchDeploymentChanges: AGENT,
  reportObservedState: AGENT,
  reportMeasurements: AGENT,
  getSecretKeys: AGENT,
  getSecretEnvSeals: AGENT,
};

/** Every served API service and its table, by the service's type name. */
export const PERMISSIONS: ReadonlyMap<string, { service: DescService; methods: Readonly<Record<string, Permission>> }> = new Map(
  [
    [DeploymentService, deployments],
    [SentinelService, sentinels],
    [NetworkPolicyService, networkPolicies],
    [HistoryService, history],
    [RolloutService, rollouts],
    [StatusService, status],
    [ProjectService, projects],
    [RegionService, regions],
    [OperatorService, operators],
    [NotifierService, notifiers],
    [ClusterService, cluster],
  ].map(([service, methods]) => [(service as DescService).typeName, { service: service as DescService, methods: methods as Record<string, Permission> }]),
);

/** What calling `method` (its local name) of `service` needs; undefined for an RPC with no entry, which is refused. */
export function permissionOf(service: string, method: string): Permission | undefined {
  return PERMISSIONS.get(service)?.methods[method];
}
