// The generated Connect clients of one connection (Connect protocol over HTTP/1.1 or TLS).
import type { DescService } from "@bufbuild/protobuf";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { HistoryService } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { NotifierService } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { OperatorService } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { ProjectService } from "@flotilla/proto/ctrl/v1/project_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import { StatusService } from "@flotilla/proto/ctrl/v1/status_pb.js";
import type { Connection } from "./config.ts";

export interface Clients {
  server: string;
  deployments: Client<typeof DeploymentService>;
  sentinels: Client<typeof SentinelService>;
  networkPolicies: Client<typeof NetworkPolicyService>;
  regions: Client<typeof RegionService>;
  operators: Client<typeof OperatorService>;
  projects: Client<typeof ProjectService>;
  history: Client<typeof HistoryService>;
  rollouts: Client<typeof RolloutService>;
  status: Client<typeof StatusService>;
  notifiers: Client<typeof NotifierService>;
}

export function connect(connection: Connection): Clients {
  const auth: Interceptor = (next) => async (req) => {
    const token = connection.token ?? (await connection.tokenSource?.());
    if (token) req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
  const transport = createConnectTransport({
    baseUrl: connection.server,
    httpVersion: "1.1",
    interceptors: [auth],
    nodeOptions: connection.caCert ? { ca: connection.caCert } : undefined,
  });
  const client = <S extends DescService>(service: S) => createClient(service, transport);
  return {
    server: connection.server,
    deployments: client(DeploymentService),
    sentinels: client(SentinelService),
    networkPolicies: client(NetworkPolicyService),
    regions: client(RegionService),
    operators: client(OperatorService),
    projects: client(ProjectService),
    history: client(HistoryService),
    rollouts: client(RolloutService),
    status: client(StatusService),
    notifiers: client(NotifierService),
  };
}
