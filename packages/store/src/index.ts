// The desired-state store: one object per database, shared by every RPC of a ctrl process.
import type { DescMessage } from "@bufbuild/protobuf";
import { AgentTokenRepository } from "./agent-tokens.ts";
import { ChangeLog } from "./changes.ts";
import { ObservationRepository } from "./observations.ts";
import { openDatabase, type OpenDatabase } from "./database.ts";
import { deploymentKind, networkPolicyKind, sentinelKind, type DeploymentMessage } from "./kinds.ts";
import { migrateToLatest, pendingMigrations } from "./migrate.ts";
import { RegionRepository } from "./regions.ts";
import { ResourceRepository, type CommitListener } from "./resources.ts";
import { AuditLog } from "./audit.ts";
import { OperatorRepository } from "./operators.ts";
import { ProjectRepository } from "./projects.ts";
import { StatusEvents } from "./status-events.ts";
import { Leases } from "./leases.ts";
import { AnalysisRepository } from "./analysis.ts";
import { RolloutRepository, type RolloutDecisions } from "./rollouts.ts";
import { NotificationRepository } from "./notifications.ts";
import { writeDesiredMany } from "./outbox.ts";
import { ResourceType, type RolloutStrategy } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { checkSecretKeys, rotateSecrets, upgradeStoredSeals, type Rotation } from "./secret-rotation.ts";
import type { SecretKeyRing } from "./secrets.ts";

export { DEFAULT_DATABASE_URL, MYSQL, openDatabase, SQLITE, type Dialect, type OpenDatabase } from "./database.ts";
export { StoreError, type StoreErrorCode } from "./errors.ts";
export { migrateToLatest, pendingMigrations } from "./migrate.ts";
export { DEFAULT_PAGE_BYTES, type Page } from "./paging.ts";
export { DEFAULT_REVISION_HISTORY_LIMIT, projectOf, ResourceRepository, type CommitListener, type StoredRevision, type WriteGuard } from "./resources.ts";
export { DEFAULT_PROJECT, ProjectRepository } from "./projects.ts";
export { ADMIN_AUTHOR, AuditLog, type AuditRecord, type ChangeAuthor } from "./audit.ts";
export { OPERATOR_TOKEN_PREFIX, type OperatorGrant } from "./operators.ts";
export { StatusEvents, type StatusEvent } from "./status-events.ts";
export { Leases } from "./leases.ts";
export {
  AnalysisRepository,
  DEFAULT_ANALYSIS_INTERVAL_MS,
  DEFAULT_CONSECUTIVE_ERROR_LIMIT,
  planAnalysis,
  type AnalysisPlan,
  type BakeKey,
  type StoredMeasurement,
} from "./analysis.ts";
export {
  ACTIVE_ROLLOUT_STATES,
  ROLLOUT_ACTIONS,
  RolloutRepository,
  toRolloutMessage,
  type PlacedRegion,
  type RolloutAction,
  type RolloutChange,
  type RolloutDecisions,
  type RolloutStart,
  type RolloutStep,
  type RolloutTransition,
  type StoredRollout,
  type WavePlan,
  type WaveRegion,
} from "./rollouts.ts";
export {
  EVENT_TYPES,
  NotificationRepository,
  newSigningSecret,
  recordNotifications,
  rolloutNotifications,
  SUBSCRIBABLE_EVENTS,
  type ClaimedDelivery,
  type DeliveryOutcome,
  type NotificationInput,
} from "./notifications.ts";
export type { Database } from "./schema.ts";
export { takeVersions } from "./outbox.ts";
export { ChangeLog, changeOf, type Change, type CommittedChange, type RetentionPolicy } from "./changes.ts";
export { observationBody, type AgentReport, type ReportLeader, type StatusInputs, type StatusWrite, type StoredStatus } from "./observations.ts";
export { LAST_USE_RESOLUTION_MS, type TokenGrant, type TokenScreen } from "./agent-tokens.ts";
export type { RegionRow } from "./regions.ts";
export { mergeEnv } from "./kinds.ts";
export { readSecretEnvSeals, readSnapshot, type SnapshotItem, type SnapshotLimits, type SnapshotRow } from "./snapshot.ts";
export { ReadAheadBudget, Slots } from "./read-ahead.ts";
export { generateKeyFile, SecretKeyRing } from "./secrets.ts";
export { regionSecretEnv, secretContext, valueContext } from "./secret-env.ts";
export { rotateSecrets, scanSealedKeys, type Rotation } from "./secret-rotation.ts";
export { bodyWithSeal, clearSecretEnvSeals, storedParts, wholeResource } from "./desired-seals.ts";

export interface StoreOptions {
  /** Revisions kept per object (DEFAULT_REVISION_HISTORY_LIMIT). */
  revisionHistoryLimit?: number;
  /** The rollout strategy of deployments without one (ctrl's --default-rollout-strategy). */
  defaultStrategy?: RolloutStrategy;
  /** The data keys secret values are sealed under (ctrl's --secrets-key-file); without, a write carrying a value is refused. */
  secrets?: SecretKeyRing;
  /** ctrl's rollout decisions (packages/ctrl/src/rollouts/, storeDecisions); without, a change of a deployment with a strategy is refused. */
  rollouts?: RolloutDecisions;
  /** The stored bodies one page of resources or revisions carries at most (DEFAULT_PAGE_BYTES, ctrl's --list-page-bytes). */
  pageBytes?: number;
}

export class Store {
  readonly database: OpenDatabase;
  readonly regions: RegionRepository;
  readonly agentTokens: AgentTokenRepository;
  readonly changes: ChangeLog;
  readonly observations: ObservationRepository;
  readonly deployments: ResourceRepository<typeof deploymentKind.schema>;
  readonly sentinels: ResourceRepository<typeof sentinelKind.schema>;
  readonly networkPolicies: ResourceRepository<typeof networkPolicyKind.schema>;
  readonly operators: OperatorRepository;
  readonly projects: ProjectRepository;
  readonly audit: AuditLog;
  readonly statusEvents: StatusEvents;
  readonly rollouts: RolloutRepository;
  readonly analysis: AnalysisRepository;
  readonly leases: Leases;
  readonly notifications: NotificationRepository;
  readonly #commitListeners = new Set<CommitListener>();
  readonly #statusListeners = new Set<() => void>();
  /** The key ring of secret values, if ctrl has one (what the agent streams open them with). */
  readonly secrets: SecretKeyRing | undefined;

  constructor(database: OpenDatabase, options: StoreOptions = {}) {
    this.database = database;
    const { db, dialect } = database;
    const onStatusEvents = () => {
      for (const listener of this.#statusListeners) listener();
    };
    // Every resource write appends status events; only some move region versions.
    const onCommit: CommitListener = (regionIds, written) => {
      if (regionIds.length > 0) for (const listener of this.#commitListeners) listener(regionIds, written);
      onStatusEvents();
    };
    this.regions = new RegionRepository(db, dialect);
    this.agentTokens = new AgentTokenRepository(db, this.regions);
    this.changes = new ChangeLog(db);
    this.observations = new ObservationRepository(db, dialect, onStatusEvents);
    const limit = options.revisionHistoryLimit;
    const defaultStrategy = options.defaultStrategy;
    const deployments = {
      ...deploymentKind,
      ...(defaultStrategy && { strategy: (d: DeploymentMessage) => d.strategy ?? defaultStrategy }),
      rollouts: options.rollouts,
    };
    this.secrets = options.secrets;
    const pageBytes = options.pageBytes;
    this.deployments = new ResourceRepository(db, dialect, deployments, onCommit, limit, options.secrets, pageBytes);
    this.sentinels = new ResourceRepository(db, dialect, sentinelKind, onCommit, limit, undefined, pageBytes);
    this.networkPolicies = new ResourceRepository(db, dialect, networkPolicyKind, onCommit, limit, undefined, pageBytes);
    this.operators = new OperatorRepository(db, () => this.agentTokens.macKey());
    this.projects = new ProjectRepository(db);
    this.audit = new AuditLog(db);
    this.statusEvents = new StatusEvents(db);
    this.leases = new Leases(db);
    this.notifications = new NotificationRepository(db, options.secrets);
    this.analysis = new AnalysisRepository(db, dialect, onStatusEvents);
    this.rollouts = new RolloutRepository(
      db,
      dialect,
      onCommit,
      {
        writeDesired: (tx, writes, now) => writeDesiredMany(tx, dialect, ResourceType.DEPLOYMENT, writes, now),
        desiredOf: (tx, ids) => this.deployments.desiredManyInTx(tx, ids),
        revise: (tx, id, toRevision, author, now, shape) => this.deployments.reviseInTx(tx, id, toRevision, author, now, shape),
      },
      options.rollouts,
    );
  }

  /**
   * Opens the database at `url` and brings its schema up to date, and the secret values an
   * earlier version stored to this version's form (secret-rotation.ts). Throws when stored
   * secret values are sealed under keys `options.secrets` does not hold (nothing is changed then).
   */
  static async open(url?: string, options?: StoreOptions): Promise<Store> {
    const database = openDatabase(url);
    try {
      await migrateToLatest(database.db);
      if (await checkSecretKeys(database.db, options?.secrets)) await upgradeStoredSeals(database.db, options!.secrets!);
    } catch (error) {
      await database.close();
      throw error;
    }
    return new Store(database, options);
  }

  /** The repository of an operator-owned resource type, or undefined for another type. */
  repository(type: number): ResourceRepository<DescMessage> | undefined {
    for (const repository of [this.deployments, this.sentinels, this.networkPolicies] as ResourceRepository<DescMessage>[]) {
      if (repository.kind.type === type) return repository;
    }
    return undefined;
  }

  /** Re-seals every stored secret value under the newest key, then scans for older ones (secret-rotation.ts). */
  rotateSecrets(): Promise<Rotation> {
    if (!this.secrets) throw new Error("no secrets key file: nothing to rotate to");
    return rotateSecrets(this.database.db, this.secrets);
  }

  /** Subscribes to "these regions' versions moved" after each commit in this process (see CommitListener). */
  onCommit(listener: CommitListener): () => void {
    this.#commitListeners.add(listener);
    return () => this.#commitListeners.delete(listener);
  }

  /** Subscribes to "status events were appended" after each such commit in this process. */
  onStatusEvents(listener: () => void): () => void {
    this.#statusListeners.add(listener);
    return () => this.#statusListeners.delete(listener);
  }

  /**
   * Why this store cannot serve (the database does not answer, or its schema is behind this
   * version's migrations, e.g. while another replica is rolling out), or undefined when it can.
   */
  async unavailable(): Promise<string | undefined> {
    try {
      const pending = await pendingMigrations(this.database.db);
      return pending.length === 0 ? undefined : `database schema behind: migrations ${pending.join(", ")} not applied`;
    } catch (error) {
      return `database unreachable: ${error instanceof Error ? error.message : String(error)}`;
    }
  }

  close(): Promise<void> {
    return this.database.close();
  }
}
