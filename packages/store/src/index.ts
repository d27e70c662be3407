// The desired-state store: one object per database, shared by every RPC of a ctrl process.
import { AgentTokenRepository } from "./agent-tokens.ts";
import { ChangeLog } from "./changes.ts";
import { ObservationRepository } from "./observations.ts";
import { openDatabase, type OpenDatabase } from "./database.ts";
import { deploymentKind, networkPolicyKind, sentinelKind } from "./kinds.ts";
import { migrateToLatest, pendingMigrations } from "./migrate.ts";
import { RegionRepository } from "./regions.ts";
import { ResourceRepository } from "./resources.ts";

export { DEFAULT_DATABASE_URL, MYSQL, openDatabase, SQLITE, type Dialect, type OpenDatabase } from "./database.ts";
export { StoreError, type StoreErrorCode } from "./errors.ts";
export { migrateToLatest, pendingMigrations } from "./migrate.ts";
export type { Page } from "./paging.ts";
export { ResourceRepository } from "./resources.ts";
export type { Database } from "./schema.ts";
export { takeVersions } from "./outbox.ts";
export { ChangeLog, type Change, type RetentionPolicy } from "./changes.ts";
export type { AgentReport, ReportLeader, StatusInputs, StatusWrite, StoredStatus } from "./observations.ts";
export { LAST_USE_RESOLUTION_MS, type TokenGrant, type TokenScreen } from "./agent-tokens.ts";
export type { RegionRow } from "./regions.ts";
export { readSnapshot, type SnapshotItem, type SnapshotLimits, type SnapshotRow } from "./snapshot.ts";
export { ReadAheadBudget, Slots } from "./read-ahead.ts";

export class Store {
  readonly database: OpenDatabase;
  readonly regions: RegionRepository;
  readonly agentTokens: AgentTokenRepository;
  readonly changes: ChangeLog;
  readonly observations: ObservationRepository;
  readonly deployments: ResourceRepository<typeof deploymentKind.schema>;
  readonly sentinels: ResourceRepository<typeof sentinelKind.schema>;
  readonly networkPolicies: ResourceRepository<typeof networkPolicyKind.schema>;
  readonly #commitListeners = new Set<(regionIds: number[]) => void>();

  constructor(database: OpenDatabase) {
    this.database = database;
    const { db, dialect } = database;
    const onCommit = (regionIds: number[]) => {
      for (const listener of this.#commitListeners) listener(regionIds);
    };
    this.regions = new RegionRepository(db, dialect);
    this.agentTokens = new AgentTokenRepository(db, this.regions);
    this.changes = new ChangeLog(db);
    this.observations = new ObservationRepository(db);
    this.deployments = new ResourceRepository(db, dialect, deploymentKind, onCommit);
    this.sentinels = new ResourceRepository(db, dialect, sentinelKind, onCommit);
    this.networkPolicies = new ResourceRepository(db, dialect, networkPolicyKind, onCommit);
  }

  /** Opens the database at `url` and brings its schema up to date. */
  static async open(url?: string): Promise<Store> {
    const database = openDatabase(url);
    try {
      await migrateToLatest(database.db);
    } catch (error) {
      await database.close();
      throw error;
    }
    return new Store(database);
  }

  /** Subscribes to "these regions' versions moved" after each commit in this process. */
  onCommit(listener: (regionIds: number[]) => void): () => void {
    this.#commitListeners.add(listener);
    return () => this.#commitListeners.delete(listener);
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
