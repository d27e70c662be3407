// Observations reported by agents, the status last projected from each, and agent liveness.
// The projection itself is ctrl's (a pure function); this is only its storage.
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { ResourceObservationSchema, type ResourceObservation } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DesiredResourceSchema, Phase, ResourceType, type DesiredResource } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { NotificationEvent } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { recordNotifications } from "./notifications.ts";
import { type Kysely, type RawBuilder, sql } from "kysely";
import type { Dialect } from "./database.ts";
import { isDuplicateKey } from "./regions.ts";
import type { Database } from "./schema.ts";
import { StatusEvents } from "./status-events.ts";

export interface StoredStatus {
  /** Decoded from `body` on first use (a report's no-change check needs only the bytes). */
  readonly observation: ResourceObservation;
  /** The stored encoding, `observationBody` of the observation. */
  body: Uint8Array;
  observedAt: number;
  phase: number;
  reason: string;
}

/** Everything a status projection of one resource in one region starts from. */
export interface StatusInputs {
  regionId: number;
  region: string;
  type: number;
  id: string;
  /** Undefined when the resource is not desired in the region (stopped, standby, removed). */
  desired: DesiredResource | undefined;
  stored: StoredStatus | undefined;
  /** When the region's agent last reported, if ever. */
  agentLastSeen: number | undefined;
  agentAppliedVersion: number | undefined;
}

export interface AgentLiveness {
  lastSeen: number;
  appliedVersion: number;
  /** The newest leader's identity (agents with leader election), else undefined. */
  leader: string | undefined;
  leaderSince: number | undefined;
}

export interface StatusWrite {
  type: number;
  id: string;
  /** The phase stored before (undefined: first observation); a different `phase` is a transition. */
  previousPhase: number | undefined;
  /** `observationBody` of the observation. */
  body: Uint8Array;
  observedAt: number;
  phase: number;
  reason: string;
}

const key = (type: number, id: string) => `${type}/${id}`;

/**
 * An observation as stored: encoded without its time (the row's observed_at holds the time), so
 * an unchanged observation encodes to the stored bytes. Deterministic: protobuf-es writes fields
 * in field-number order and the message has no maps.
 */
export function observationBody(observation: ResourceObservation): Uint8Array {
  // Cleared and put back rather than copied: a spread copy encodes at half the speed.
  const observedAt = observation.observedAt;
  observation.observedAt = undefined;
  const body = toBinary(ResourceObservationSchema, observation);
  observation.observedAt = observedAt;
  return body;
}

/** Rows per multi-row statement: within SQLite's 32,766 parameters at 7 columns a row. */
export const ROWS_PER_STATEMENT = 1000;

export class ObservationRepository {
  readonly #db: Kysely<Database>;
  readonly #dialect: Dialect;
  readonly #onStatusEvents: () => void;

  /** `onStatusEvents`: called after a report that appended status events has committed. */
  constructor(db: Kysely<Database>, dialect: Dialect, onStatusEvents: () => void) {
    this.#db = db;
    this.#dialect = dialect;
    this.#onStatusEvents = onStatusEvents;
  }

  /** Stored statuses and desired states of these resources in one region (two queries at once). */
  async load(regionId: number, keys: { type: number; id: string }[]): Promise<Map<string, { stored?: StoredStatus; desired?: DesiredResource }>> {
    const result = new Map<string, { stored?: StoredStatus; desired?: DesiredResource }>();
    if (keys.length === 0) return result;
    const ids = [...new Set(keys.map((k) => k.id))];
    const [stored, desired] = await Promise.all([
      this.#db.selectFrom("observations").selectAll().where("region_id", "=", regionId).where("resource_id", "in", ids).execute(),
      this.#db
        .selectFrom("desired_resources")
        .select(["resource_type", "resource_id", "version", "body"])
        .where("region_id", "=", regionId)
        .where("resource_id", "in", ids)
        .execute(),
    ]);
    for (const k of keys) result.set(key(k.type, k.id), {});
    for (const row of stored) {
      result.get(key(row.resource_type, row.resource_id))!.stored = toStored(row);
    }
    for (const row of desired) {
      const entry = result.get(key(row.resource_type, row.resource_id));
      if (entry) entry.desired = toDesired(row);
    }
    return result;
  }

  /**
   * Stores one agent report of a region in one transaction: the fence check of its leader (if
   * any), the changed statuses (callers skip no-ops) and the heartbeat (if due). A report whose
   * leader is older than the newest the region has seen — a lower epoch, or the same epoch from
   * another holder — writes nothing and returns that newest leader. The check takes the row's
   * lock (an UPDATE) before any write, so a report of an older leader that runs concurrently
   * with a newer one is either done before the newer one starts or refused.
   *
   * READ COMMITTED (each connection's level, database.ts), and statuses written as upserts in key order: no statement takes a gap lock
   * (an UPDATE that misses does under REPEATABLE READ), so reports of regions whose new rows
   * interleave in the by-resource index, or of one region, cannot deadlock (B12 saw that).
   */
  async saveReport(regionId: number, report: AgentReport): Promise<{ fencedBy?: ReportLeader }> {
    if (!report.leader && report.writes.length === 0 && !report.heartbeat) return {};
    const now = report.heartbeat?.at ?? Date.now();
    const writes = report.writes.toSorted((a, b) => a.type - b.type || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    for (let attempt = 0; ; attempt++) {
      try {
        const result = await this.#db.transaction().execute(async (tx) => {
          if (report.leader) {
            const fencedBy = await fence(tx, regionId, report.leader, now);
            if (fencedBy) return { fencedBy };
          }
          await saveStatuses(tx, this.#dialect, regionId, writes);
          await saveTransitions(tx, regionId, writes, now);
          await StatusEvents.append(tx, writes, now);
          if (report.heartbeat) await touchAgent(tx, this.#dialect, regionId, report.heartbeat.at, report.heartbeat.appliedVersion);
          return {};
        });
        if (!result.fencedBy && writes.length > 0) this.#onStatusEvents();
        return result;
      } catch (error) {
        // Two first reports of a region inserting its leader row at once: the loser's row exists now.
        if (attempt === 0 && isDuplicateKey(error)) continue;
        throw error;
      }
    }
  }

  /** The newest phase transitions of a resource (every region), newest first. */
  async transitions(type: number, id: string, limit: number): Promise<{ region: string; time: number; from: number; to: number; reason: string }[]> {
    const rows = await this.#db
      .selectFrom("status_transitions")
      .innerJoin("regions", "regions.id", "status_transitions.region_id")
      .select(["regions.name", "status_transitions.time", "status_transitions.from_phase", "status_transitions.to_phase", "status_transitions.reason"])
      .where("status_transitions.resource_type", "=", type)
      .where("status_transitions.resource_id", "=", id)
      .orderBy("status_transitions.id", "desc")
      .limit(limit)
      .execute();
    return rows.map((r) => ({ region: r.name, time: Number(r.time), from: r.from_phase, to: r.to_phase, reason: r.reason }));
  }

  /** Deletes transitions older than `maxAgeMs`; how many. */
  async pruneTransitions(maxAgeMs: number, now = Date.now()): Promise<number> {
    const result = await this.#db
      .deleteFrom("status_transitions")
      .where("time", "<", now - maxAgeMs)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Each region's agent: its last report, applied version, and (with leader election) its leader and since when. */
  async agents(regionIds: number[]): Promise<Map<number, AgentLiveness>> {
    if (regionIds.length === 0) return new Map();
    const rows = await this.#db
      .selectFrom("agents")
      .leftJoin("leader_epochs", "leader_epochs.region_id", "agents.region_id")
      .select(["agents.region_id", "agents.last_seen", "agents.applied_version", "leader_epochs.holder_identity", "leader_epochs.leader_since"])
      .where("agents.region_id", "in", regionIds)
      .execute();
    return new Map(
      rows.map((r) => [
        r.region_id,
        {
          lastSeen: Number(r.last_seen),
          appliedVersion: Number(r.applied_version),
          leader: r.holder_identity ?? undefined,
          leaderSince: r.leader_since == null ? undefined : Number(r.leader_since),
        },
      ]),
    );
  }

  /**
   * Status inputs of resources of one type in the regions they are placed in, for Get/List and
   * the rollout driver's gate: one query (each placement joined with its desired state,
   * observation and agent), so a look at a batch of rollouts costs one round trip.
   */
  async inputs(type: number, ids: string[]): Promise<StatusInputs[]> {
    if (ids.length === 0) return [];
    const rows = await this.#db
      .selectFrom("placements as p")
      .innerJoin("regions as r", "r.id", "p.region_id")
      .leftJoin("desired_resources as d", (join) =>
        join.onRef("d.region_id", "=", "p.region_id").onRef("d.resource_type", "=", "p.resource_type").onRef("d.resource_id", "=", "p.resource_id"),
      )
      .leftJoin("observations as o", (join) =>
        join.onRef("o.region_id", "=", "p.region_id").onRef("o.resource_type", "=", "p.resource_type").onRef("o.resource_id", "=", "p.resource_id"),
      )
      .leftJoin("agents as a", "a.region_id", "p.region_id")
      .select([
        "p.resource_id",
        "p.region_id",
        "r.name",
        "d.version as desired_version",
        "d.body as desired_body",
        "o.body as observed_body",
        "o.observed_at",
        "o.phase",
        "o.reason",
        "a.last_seen",
        "a.applied_version",
      ])
      .where("p.resource_type", "=", type)
      .where("p.resource_id", "in", ids)
      .execute();
    return rows.map((row) => ({
      regionId: row.region_id,
      region: row.name,
      type,
      id: row.resource_id,
      desired: row.desired_body == null ? undefined : toDesired({ version: row.desired_version!, body: row.desired_body }),
      stored:
        row.observed_body == null ? undefined : toStored({ body: row.observed_body, observed_at: row.observed_at!, phase: row.phase!, reason: row.reason! }),
      agentLastSeen: row.last_seen == null ? undefined : Number(row.last_seen),
      agentAppliedVersion: row.applied_version == null ? undefined : Number(row.applied_version),
    }));
  }
}

/** The leader a report was sent by (the Lease's leaseTransitions and holderIdentity). */
export interface ReportLeader {
  epoch: number;
  holderIdentity: string;
}

export interface AgentReport {
  /** Absent for an agent without leader election: not fenced. */
  leader: ReportLeader | undefined;
  writes: StatusWrite[];
  /** The agent's liveness and applied version, when due to be persisted. */
  heartbeat: { at: number; appliedVersion: number } | undefined;
}

/** Records `leader` as the region's newest unless a newer one was seen; returns that newer one. */
async function fence(tx: Kysely<Database>, regionId: number, leader: ReportLeader, now: number): Promise<ReportLeader | undefined> {
  const updated = await tx
    .updateTable("leader_epochs")
    .set((eb) => ({
      epoch: leader.epoch,
      holder_identity: leader.holderIdentity,
      updated_at: now,
      // A new epoch starts its leadership now; the same leader's reports keep the start.
      leader_since: eb.case().when("epoch", "<", leader.epoch).then(now).else(eb.ref("leader_since")).end(),
    }))
    .where("region_id", "=", regionId)
    .where((eb) => eb.or([eb("epoch", "<", leader.epoch), eb.and([eb("epoch", "=", leader.epoch), eb("holder_identity", "=", leader.holderIdentity)])]))
    .executeTakeFirst();
  if (Number(updated.numUpdatedRows) > 0) return undefined;
  const newest = await tx.selectFrom("leader_epochs").select(["epoch", "holder_identity"]).where("region_id", "=", regionId).executeTakeFirst();
  if (newest) return { epoch: Number(newest.epoch), holderIdentity: newest.holder_identity };
  await tx
    .insertInto("leader_epochs")
    .values({ region_id: regionId, epoch: leader.epoch, holder_identity: leader.holderIdentity, updated_at: now, leader_since: now })
    .execute();
  return undefined;
}

/** Writes changed statuses of one region: inserted or replaced, a statement per ROWS_PER_STATEMENT. */
async function saveStatuses(tx: Kysely<Database>, dialect: Dialect, regionId: number, writes: StatusWrite[]): Promise<void> {
  for (let i = 0; i < writes.length; i += ROWS_PER_STATEMENT) {
    const rows = writes.slice(i, i + ROWS_PER_STATEMENT).map((w) => ({
      region_id: regionId,
      resource_type: w.type,
      resource_id: w.id,
      body: w.body,
      observed_at: w.observedAt,
      phase: w.phase,
      reason: w.reason.slice(0, 1024),
    }));
    const replaced = replacing(dialect, ["body", "observed_at", "phase", "reason"]);
    const insert = tx.insertInto("observations").values(rows);
    await (dialect.name === "mysql"
      ? insert.onDuplicateKeyUpdate(replaced)
      : insert.onConflict((c) => c.columns(["region_id", "resource_type", "resource_id"]).doUpdateSet(replaced))
    ).execute();
  }
}

/** Records each phase change of the written statuses. */
async function saveTransitions(tx: Kysely<Database>, regionId: number, writes: StatusWrite[], now: number): Promise<void> {
  const changed = writes.filter((w) => w.previousPhase !== w.phase);
  for (let i = 0; i < changed.length; i += ROWS_PER_STATEMENT) {
    await tx
      .insertInto("status_transitions")
      .values(
        changed.slice(i, i + ROWS_PER_STATEMENT).map((w) => ({
          region_id: regionId,
          resource_type: w.type,
          resource_id: w.id,
          time: now,
          from_phase: w.previousPhase ?? 0,
          to_phase: w.phase,
          reason: w.reason.slice(0, 1024),
        })),
      )
      .execute();
  }
  // A deployment whose status became FAILED owes its notifiers an event, in this transaction.
  const failed = changed.filter((w) => w.type === ResourceType.DEPLOYMENT && w.phase === Phase.FAILED);
  if (failed.length > 0) {
    const region = await tx.selectFrom("regions").select("name").where("id", "=", regionId).executeTakeFirst();
    await recordNotifications(
      tx,
      failed.map((w) => ({
        event: NotificationEvent.DEPLOYMENT_FAILED,
        subject: w.id,
        deploymentId: w.id,
        data: { deployment: w.id, region: region?.name ?? "", reason: w.reason.slice(0, 1024) },
      })),
      now,
    );
  }
}

/** Records the agent's heartbeat. */
async function touchAgent(tx: Kysely<Database>, dialect: Dialect, regionId: number, lastSeen: number, appliedVersion: number): Promise<void> {
  const replaced = replacing(dialect, ["last_seen", "applied_version"]);
  const insert = tx.insertInto("agents").values({ region_id: regionId, last_seen: lastSeen, applied_version: appliedVersion });
  await (dialect.name === "mysql" ? insert.onDuplicateKeyUpdate(replaced) : insert.onConflict((c) => c.column("region_id").doUpdateSet(replaced))).execute();
}

/** An upsert's assignments: each column takes the value the conflicting insert carried. */
function replacing(dialect: Dialect, columns: string[]): Record<string, RawBuilder<unknown>> {
  return Object.fromEntries(columns.map((c) => [c, dialect.name === "mysql" ? sql`values(${sql.ref(c)})` : sql.ref(`excluded.${c}`)]));
}

function toStored(row: { body: Uint8Array; observed_at: number; phase: number; reason: string }): StoredStatus {
  let observation: ResourceObservation | undefined;
  return {
    get observation() {
      observation ??= fromBinary(ResourceObservationSchema, row.body);
      return observation;
    },
    body: row.body,
    observedAt: Number(row.observed_at),
    phase: row.phase,
    reason: row.reason,
  };
}

function toDesired(row: { version: number; body: Uint8Array }): DesiredResource {
  const desired = fromBinary(DesiredResourceSchema, row.body);
  desired.version = BigInt(row.version);
  return desired;
}
