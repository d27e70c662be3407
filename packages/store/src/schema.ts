// Row types of the desired-state database (see the repository's migrations/). Times are Unix milliseconds.
import type { Generated } from "kysely";

export interface RegionsTable {
  id: Generated<number>;
  name: string;
  /** The region's commit-ordered version: +1 per write transaction touching the region. */
  head_version: number;
  create_time: number;
  /** The region's labels as a JSON object of strings; NULL: none. */
  labels: string | null;
  /** Moved by each revocation of one of its agent tokens: the region's secret keys derive from it. */
  secret_key_epoch: Generated<number>;
  /** Where the region's agent runs analysis queries (Region.metrics.prometheus.address); NULL: none. */
  prometheus_address?: string | null;
}

/** Shape shared by the operator-owned resource tables; `body` is the API message, protobuf-encoded. */
export interface ResourceTable {
  id: string;
  /** The project it belongs to (projects.name); the body's own field is not read. */
  project: string;
  revision: number;
  body: Uint8Array;
  create_time: number;
  update_time: number;
}

/** Which regions a resource is placed in, whatever its desired status (guards region deletion). */
export interface PlacementsTable {
  resource_type: number;
  resource_id: string;
  region_id: number;
}

/** The current region-resolved desired state; what SyncDesiredState streams. */
export interface DesiredResourcesTable {
  region_id: number;
  resource_type: number;
  resource_id: string;
  namespace: string;
  version: number;
  /** ctrl.v1.DesiredResource with version unset, and without its workload's secret_env_sealed (desired-seals.ts). */
  body: Uint8Array;
  /** The workload's secret_env_sealed: its values sealed as one for the region's agent; null without secret values. */
  secret_env_sealed: Uint8Array | null;
}

/** The transactional outbox: one row per changed resource per region and version. */
export interface DeploymentChangesTable {
  region_id: number;
  version: number;
  resource_type: number;
  resource_id: string;
  /** ctrl.v1.ChangeEvent: full desired state or tombstone. */
  body: Uint8Array;
  create_time: number;
}

export interface AgentTokensTable {
  id: string;
  region_id: number;
  /** SHA-256 of the token, hex. The token itself is never stored. */
  token_hash: string;
  create_time: number;
  /** Null: never expires. */
  expire_time: number | null;
  /** Updated at most once per LAST_USE_RESOLUTION_MS. */
  last_use_time: number | null;
  /** 1: minted before tokens carried a MAC (known by hash only); 2: carries a MAC (agent-tokens.ts). */
  token_format: number;
}

/** Keys of this deployment, made by a migration and shared by every ctrl replica. */
export interface ServerKeysTable {
  name: string;
  key_hex: string;
}

/** The latest observation of a resource in a region, and the status projected from it. */
export interface ObservationsTable {
  region_id: number;
  resource_type: number;
  resource_id: string;
  /** ctrl.v1.ResourceObservation. */
  body: Uint8Array;
  observed_at: number;
  phase: number;
  reason: string;
}

/** The newest leader (epoch and holder) each region's agents reported with: older ones are fenced. */
export interface LeaderEpochsTable {
  region_id: number;
  epoch: number;
  holder_identity: string;
  updated_at: number;
  /** When this epoch's first report arrived; null for rows written before it was recorded. */
  leader_since: number | null;
}

/** Liveness of each region's agent. */
export interface AgentsTable {
  region_id: number;
  last_seen: number;
  applied_version: number;
  /** The last_seen of the silence an agent.lost event was written for (migrations/0016_notifiers.ts). */
  lost_seen?: number | null;
}

/** A named operator token with a role (ctrl.v1.Role). Only a SHA-256 of the token is stored. */
export interface OperatorsTable {
  name: string;
  role: number;
  token_hash: string;
  create_time: number;
  expire_time: number | null;
  last_use_time: number | null;
  created_by: string;
}

/** Every accepted spec of an operator-owned object, the last N per object. */
export interface ResourceRevisionsTable {
  resource_type: number;
  resource_id: string;
  revision: number;
  /** The API message at this revision, output fields cleared, protobuf-encoded. */
  body: Uint8Array;
  actor: string;
  message: string;
  create_time: number;
}

/** Who did what, when, to which object. */
export interface AuditEventsTable {
  id: Generated<number>;
  time: number;
  actor: string;
  action: string;
  object_kind: string;
  object_id: string;
  revision: number;
  message: string;
  /** The project of the object; empty for what belongs to none (regions, tokens, operators). */
  project: Generated<string>;
  /** The identity provider's groups of the principal (a signed-in person), comma-separated; empty otherwise. */
  principal_groups: Generated<string>;
  /** "allowed" (an accepted write) or "denied" (a refused attempt). */
  decision: Generated<string>;
}

/** "This object's status may have changed": what the operators' status stream follows. */
export interface StatusEventsTable {
  seq: Generated<number>;
  resource_type: number;
  resource_id: string;
  create_time: number;
}

/** One row: every status event up to through_seq may have been pruned. */
export interface StatusEventsPrunedTable {
  id: number;
  through_seq: number;
}

/** A change of a resource's projected phase in one region. */
export interface StatusTransitionsTable {
  id: Generated<number>;
  region_id: number;
  resource_type: number;
  resource_id: string;
  time: number;
  from_phase: number;
  to_phase: number;
  reason: string;
}

export interface RolloutsTable {
  id: string;
  deployment_id: string;
  to_revision: number;
  from_revision: number;
  state: number;
  current_wave: number;
  generation: number;
  on_failure: number;
  reason: string;
  /** JSON: the waves and their regions' progress (rollouts.ts RolloutPlan). */
  plan: string;
  due_at: number | null;
  create_time: number;
  update_time: number;
}

export interface RolloutTransitionsTable {
  id: Generated<number>;
  rollout_id: string;
  generation: number;
  from_state: number;
  to_state: number;
  wave: number;
  action: string;
  actor: string;
  reason: string;
  time: number;
}

/** A project: its fields but name and times, as proto3 JSON of ctrl.v1.Project. */
export interface ProjectsTable {
  name: string;
  spec: string;
  create_time: number;
  update_time: number;
}

export interface LeasesTable {
  name: string;
  holder: string;
  expires_at: number;
}

/** A measurement of a rollout analysis taken in a region (analysis.ts). */
export interface AnalysisMeasurementsTable {
  rollout_id: string;
  wave: number;
  /** The bake's start (ms): a bake that starts again is measured anew. */
  bake_start: number;
  analysis: string;
  region: string;
  idx: number;
  revision: number;
  taken_at: number;
  value: number | null;
  error: string | null;
}

export interface Database {
  regions: RegionsTable;
  deployments: ResourceTable;
  sentinels: ResourceTable;
  network_policies: ResourceTable;
  placements: PlacementsTable;
  desired_resources: DesiredResourcesTable;
  deployment_changes: DeploymentChangesTable;
  agent_tokens: AgentTokensTable;
  observations: ObservationsTable;
  agents: AgentsTable;
  leader_epochs: LeaderEpochsTable;
  server_keys: ServerKeysTable;
  operators: OperatorsTable;
  resource_revisions: ResourceRevisionsTable;
  audit_events: AuditEventsTable;
  status_events: StatusEventsTable;
  status_events_pruned: StatusEventsPrunedTable;
  status_transitions: StatusTransitionsTable;
  rollouts: RolloutsTable;
  analysis_measurements: AnalysisMeasurementsTable;
  rollout_transitions: RolloutTransitionsTable;
  leases: LeasesTable;
  projects: ProjectsTable;
  notifiers: NotifiersTable;
  notification_events: NotificationEventsTable;
  notification_deliveries: NotificationDeliveriesTable;
}

/** A notifier: its fields but name, times and secret as proto3 JSON of ctrl.v1.Notifier. */
export interface NotifiersTable {
  name: string;
  spec: string;
  secret: Uint8Array;
  /** 1: `secret` (and `url_secret`) are sealed under ctrl's secrets key file; 0: they are the bytes. */
  secret_sealed: number;
  /** A Slack notifier's webhook URL (its path is the credential); the spec holds it redacted. */
  url_secret: Uint8Array | null;
  secret_time: number;
  create_time: number;
  update_time: number;
}

/** An event to notify: its id is every delivery's webhook-id; `data` its JSON payload. */
export interface NotificationEventsTable {
  id: string;
  event: number;
  subject: string;
  data: string;
  time: number;
}

/** One event to one notifier (packages/ctrl/src/notifications/ tells its states). */
export interface NotificationDeliveriesTable {
  id: Generated<number>;
  event_id: string;
  notifier: string;
  state: number;
  generation: number;
  attempts: number;
  next_attempt_at: number;
  last_status: number;
  last_error: string;
  create_time: number;
  update_time: number;
}

export type ResourceTableName = "deployments" | "sentinels" | "network_policies";
