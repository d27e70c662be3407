// Which role each RPC needs. Roles nest: admin ⊃ deployer ⊃ viewer (operator.proto).
// Reads (Get*, List*, Watch*, WhoAmI) need viewer; writes of the operator-owned resources
// rollback and the rollout controls need deployer; everything else (regions, agent tokens, operators) admin.
// ClusterService is the agents' protocol: agent tokens (and the admin token) only.
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { HistoryService } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";

/** The services whose writes a deployer may make. */
const DEPLOYER_SERVICES = new Set([
  DeploymentService.typeName,
  SentinelService.typeName,
  NetworkPolicyService.typeName,
  HistoryService.typeName,
  RolloutService.typeName,
]);
const READ = /^(Get|List|Watch|WhoAmI)/;

/** The role an operator needs to call `method` of `service`; "agent" for the agents' own protocol. */
export function requiredRole(service: string, method: string): Role | "agent" {
  if (service === ClusterService.typeName) return "agent";
  if (READ.test(method)) return Role.VIEWER;
  if (DEPLOYER_SERVICES.has(service)) return Role.DEPLOYER;
  return Role.ADMIN;
}

/** "viewer", "deployer", "admin": how people and the CLI name roles. */
export function roleName(role: Role): string {
  return Role[role]?.toLowerCase() ?? "unspecified";
}

/** Whether `held` includes `needed`. */
export function roleAllows(held: Role, needed: Role): boolean {
  return held >= needed;
}
