// Rollout analysis' storage (docs/rollout-analysis.md): the analyses a wave's plan carries, the
// measurements agents report, and what a region's agent needs to fill in a query's templates.
// Judging measurements is ctrl's (packages/ctrl/src/rollouts/analysis.ts); this is storage.
//
// A measurement is keyed by (rollout, wave, bake start, analysis, region, index): a report sent
// twice, or by two agents of a region, keeps the first. Recording one appends a status event of
// its deployment in the same transaction, which wakes the rollout driver on whichever replica
// drives (the status feed), as an observation does.
import { durationMs } from "@bufbuild/protobuf/wkt";
import { ResourceType, type RolloutAnalysis } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Kysely } from "kysely";
import type { Dialect } from "./database.ts";
import type { Database } from "./schema.ts";
import { revisionOfBody } from "./desired-seals.ts";
import { StatusEvents } from "./status-events.ts";

export const DEFAULT_ANALYSIS_INTERVAL_MS = 30_000;
export const DEFAULT_CONSECUTIVE_ERROR_LIMIT = 4;

/** An analysis as a wave's plan keeps it (JSON in the rollout's row). */
export interface AnalysisPlan {
  name: string;
  prometheus?: { query: string };
  /** `secretHeaders`: header → a secret env variable's name (never its value). */
  web?: { url: string; jsonPath: string; headers: Record<string, string>; secretHeaders?: Record<string, string> };
  intervalMs: number;
  /** Undefined: one per interval until the bake ends. */
  count?: number;
  initialDelayMs: number;
  successCondition: string;
  failureCondition: string;
  failureLimit: number;
  inconclusiveLimit: number;
  consecutiveErrorLimit: number;
}

/** The plan of an analysis as the strategy states it, its defaults filled in (Argo Rollouts'). */
export function planAnalysis(a: RolloutAnalysis): AnalysisPlan {
  // Argo's effective count: without count and interval, one measurement.
  const count = a.count ?? (a.interval ? undefined : 1);
  return {
    name: a.name,
    ...(a.provider.case === "prometheus" ? { prometheus: { query: a.provider.value.query } } : {}),
    ...(a.provider.case === "web"
      ? {
          web: {
            url: a.provider.value.url,
            jsonPath: a.provider.value.jsonPath,
            headers: { ...a.provider.value.headers },
            ...(Object.keys(a.provider.value.secretHeaders).length > 0 ? { secretHeaders: { ...a.provider.value.secretHeaders } } : {}),
          },
        }
      : {}),
    intervalMs: a.interval ? durationMs(a.interval) : DEFAULT_ANALYSIS_INTERVAL_MS,
    ...(count === undefined ? {} : { count }),
    initialDelayMs: a.initialDelay ? durationMs(a.initialDelay) : 0,
    successCondition: a.successCondition,
    failureCondition: a.failureCondition,
    failureLimit: a.failureLimit ?? 0,
    inconclusiveLimit: a.inconclusiveLimit ?? 0,
    consecutiveErrorLimit: a.consecutiveErrorLimit ?? DEFAULT_CONSECUTIVE_ERROR_LIMIT,
  };
}

/** The bake of a rollout's wave whose measurements are wanted. */
export interface BakeKey {
  rolloutId: string;
  wave: number;
  bakeStart: number;
}

export interface StoredMeasurement extends BakeKey {
  analysis: string;
  region: string;
  index: number;
  revision: number;
  takenAt: number;
  /** The query's number; neither it nor `error`: the query selected nothing (no data). */
  value?: number;
  error?: string;
}

/** Bakes whose measurements one statement reads. */
const BAKES_PER_STATEMENT = 100;

export class AnalysisRepository {
  readonly #db: Kysely<Database>;
  readonly #dialect: Dialect;
  readonly #onStatusEvents: () => void;

  constructor(db: Kysely<Database>, dialect: Dialect, onStatusEvents: () => void) {
    this.#db = db;
    this.#dialect = dialect;
    this.#onStatusEvents = onStatusEvents;
  }

  /**
   * Records `measurements` (of these deployments' rollouts), keeping the first of each key, and
   * a status event per deployment, in one transaction. Returns how many were new.
   */
  async record(measurements: readonly StoredMeasurement[], deploymentIds: readonly string[], now: number): Promise<number> {
    if (measurements.length === 0) return 0;
    const rows = measurements.map((m) => ({
      rollout_id: m.rolloutId,
      wave: m.wave,
      bake_start: m.bakeStart,
      analysis: m.analysis,
      region: m.region,
      idx: m.index,
      revision: m.revision,
      taken_at: m.takenAt,
      value: m.value ?? null,
      error: m.error === undefined ? null : m.error.slice(0, 1024),
    }));
    const added = await this.#db.transaction().execute(async (tx) => {
      let insert = tx.insertInto("analysis_measurements").values(rows);
      insert = this.#dialect.name === "mysql" ? insert.ignore() : insert.onConflict((c) => c.doNothing());
      const result = await insert.executeTakeFirst();
      const count = Number(result.numInsertedOrUpdatedRows ?? 0n);
      if (count > 0)
        await StatusEvents.append(
          tx,
          [...new Set(deploymentIds)].map((id) => ({ type: ResourceType.DEPLOYMENT, id })),
          now,
        );
      return count;
    });
    if (added > 0) this.#onStatusEvents();
    return added;
  }

  /**
   * The measurements of these bakes (in `region` only, when given), by index within each
   * (analysis, region). Read BAKES_PER_STATEMENT bakes at a time: a page of rollouts shown (a
   * status snapshot) may ask for a thousand, more alternatives than one statement's expression
   * takes on SQLite.
   */
  async ofBakes(bakes: readonly BakeKey[], region?: string): Promise<StoredMeasurement[]> {
    const rows = [];
    for (let i = 0; i < bakes.length; i += BAKES_PER_STATEMENT) {
      const some = bakes.slice(i, i + BAKES_PER_STATEMENT);
      let query = this.#db
        .selectFrom("analysis_measurements")
        .selectAll()
        .where((eb) => eb.or(some.map((b) => eb.and([eb("rollout_id", "=", b.rolloutId), eb("wave", "=", b.wave), eb("bake_start", "=", b.bakeStart)]))));
      if (region !== undefined) query = query.where("region", "=", region);
      rows.push(...(await query.orderBy("idx").execute()));
    }
    return rows.map((r) => ({
      rolloutId: r.rollout_id,
      wave: r.wave,
      bakeStart: Number(r.bake_start),
      analysis: r.analysis,
      region: r.region,
      index: r.idx,
      revision: Number(r.revision),
      takenAt: Number(r.taken_at),
      ...(r.value === null ? {} : { value: Number(r.value) }),
      ...(r.error === null ? {} : { error: r.error }),
    }));
  }

  /** Drops measurements taken before `now - maxAgeMs` (ctrl's retention, with the audit trail's age); returns how many. */
  async prune(maxAgeMs: number, now: number): Promise<number> {
    const result = await this.#db
      .deleteFrom("analysis_measurements")
      .where("taken_at", "<", now - maxAgeMs)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Of these deployments in region `regionId`: the namespace and the revision its desired state was written from. */
  async desiredIn(regionId: number, deploymentIds: readonly string[]): Promise<Map<string, { namespace: string; revision: number }>> {
    const found = new Map<string, { namespace: string; revision: number }>();
    if (deploymentIds.length === 0) return found;
    const rows = await this.#db
      .selectFrom("desired_resources")
      .select(["resource_id", "namespace", "body"])
      .where("region_id", "=", regionId)
      .where("resource_type", "=", ResourceType.DEPLOYMENT)
      .where("resource_id", "in", [...deploymentIds])
      .execute();
    for (const row of rows) {
      found.set(row.resource_id, { namespace: row.namespace, revision: revisionOfBody(row.body) });
    }
    return found;
  }
}
