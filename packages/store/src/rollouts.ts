// Staged rollouts' storage (ARCHITECTURE §9): the rollout row, its transitions' record, and the
// compare-and-set by which a rollout moves on, in the transaction that writes its effects.
// Every decision — the waves a strategy makes, the state a change starts in, a supersede, the
// gate, the operators' controls — is ctrl's (packages/ctrl/src/rollouts/): the writes that
// start or supersede a rollout take it from the RolloutDecisions the store was opened with, so
// the store never decides what a rollout does, only stores it.
//
// Invariants:
//   * A region's desired state moves to the rollout's revision only in the transaction that
//     starts its wave (or its batch), so an agent never sees a revision its wave has not
//     reached, across restarts and resyncs.
//   * Every change of a rollout row is a compare-and-set on (id, generation) in the
//     transaction that writes its effects: a writer that lost its turn writes nothing. Several
//     rollouts' transitions may share one transaction (transitionMany: each region's version
//     row taken once for all), each its own compare-and-set: a loser is left out of it, the
//     others are written.
//   * One active rollout per deployment: a new change supersedes the active one in the
//     change's own transaction. A change with no strategy before or after looks for none (it
//     can find one only if --default-rollout-strategy was removed since that one started): a
//     rollout whose deployment is no longer at its revision moves nothing, its next
//     transition supersedes it (RolloutDecisions.outdated).
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  ResourceType,
  RolloutSchema,
  RolloutState,
  type DesiredResource,
  type RolloutFailurePolicy,
  type Rollout,
  type RolloutStrategy,
} from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { sql, type Insertable, type Kysely } from "kysely";
import type { AnalysisPlan } from "./analysis.ts";
import { revisionOfBody, wholeResource } from "./desired-seals.ts";
import { StoreError } from "./errors.ts";
import type { Dialect } from "./database.ts";
import { committedChanges, ROWS_PER_STATEMENT, sameDesired, type DesiredWrite, type Tx } from "./outbox.ts";
import type { CommittedChange } from "./changes.ts";
import type { CommitListener } from "./resources.ts";
import { decodePageToken, pageSize, toPage, type Page } from "./paging.ts";
import type { RegionLabels } from "./regions.ts";
import { StatusEvents } from "./status-events.ts";
import { recordNotifications, rolloutNotifications } from "./notifications.ts";
import type { Database, RolloutsTable, RolloutTransitionsTable } from "./schema.ts";
import { ACTIVE_ROLLOUT_STATES, type RolloutAction } from "./rollout-states.ts";

export { ACTIVE_ROLLOUT_STATES, ROLLOUT_ACTIONS, type RolloutAction } from "./rollout-states.ts";

export interface WaveRegion {
  region: string;
  regionId: number;
  /** Moved to the rollout's revision (its desired state holds it). */
  moved: boolean;
}

export interface WavePlan {
  name: string;
  regions: WaveRegion[];
  /** Regions moved at a time (≥ 1). */
  maxParallel: number;
  bakeMs: number;
  approval: boolean;
  deadlineMs: number;
  /** When its first regions moved. */
  startTime?: number;
  /** Since when every region of it has been RUNNING at the new revision (its bake's start). */
  runningSince?: number;
  endTime?: number;
  /** Analyses of its bake (the strategy's, then its own); absent in plans stored before analysis. */
  analysis?: AnalysisPlan[];
}

export interface StoredRollout {
  id: string;
  deploymentId: string;
  fromRevision: number;
  toRevision: number;
  state: RolloutState;
  currentWave: number;
  generation: number;
  onFailure: RolloutFailurePolicy;
  reason: string;
  waves: WavePlan[];
  dueAt: number | undefined;
  createTime: number;
  updateTime: number;
}

/** What a change of a deployment with a strategy writes now, and the rollout it starts. */
export interface StagedChange {
  /** Region id → what it holds after this write (later waves keep their current state). */
  desired: Map<number, DesiredResource>;
  rollout: StoredRollout;
}

/**
 * Stages a change of deployment `id` from `fromRevision` to `toRevision` whose desired state
 * is `next` per region: supersedes the deployment's active rollout (`supersede`: false when
 * neither its stored spec nor `strategy` has a strategy: it has none to supersede, or one that
 * moves nothing any more, see transitionMany), starts the rollout `decisions.start` makes
 * of it, and returns what to write now, or undefined when nothing is staged (no strategy, or
 * no rollout started: written at once).
 */
export async function stageChange(
  tx: Tx,
  change: {
    id: string;
    supersede: boolean;
    strategy: RolloutStrategy | undefined;
    fromRevision: number;
    toRevision: number;
    next: ReadonlyMap<number, DesiredResource>;
    regionIds: ReadonlyMap<string, number>;
    actor: string;
    now: number;
    /** ctrl's decisions (the kind's `rollouts`); without, a staged change is refused. */
    decisions: RolloutDecisions | undefined;
  },
): Promise<StagedChange | undefined> {
  const { id, strategy, next, now, decisions } = change;
  if ((change.supersede || strategy) && !decisions)
    throw new StoreError("failed_precondition", "staged rollouts need ctrl's rollout decisions (StoreOptions.rollouts)");
  if (change.supersede) await supersede(tx, decisions!, id, change.actor, now);
  if (!strategy) return undefined;
  const current = next.size === 0 ? new Map<number, DesiredResource>() : await currentDesired(tx, id);
  const changed = [...next].filter(([regionId, desired]) => {
    const held = current.get(regionId);
    return !held || !sameDesired(held, desired, true);
  });
  // (Regions are read only when some region changes: then start may plan waves of them.)
  const placed = changed.length === 0 ? [] : await placedRegions(tx, next, change.regionIds);
  const started = decisions!.start({
    id: `${id}-${change.toRevision}`,
    deploymentId: id,
    strategy,
    placed,
    changed: changed.map(([regionId]) => regionId),
    fromRevision: change.fromRevision,
    toRevision: change.toRevision,
    now,
  });
  if (!started) return undefined;
  const { rollout, action } = started;
  const first = rollout.waves[0]!;
  const desired = new Map<number, DesiredResource>();
  const moving = new Set(first.regions.filter((r) => r.moved).map((r) => r.regionId));
  for (const [regionId, body] of next) {
    if (moving.has(regionId)) desired.set(regionId, body);
    else {
      const held = current.get(regionId);
      if (held) desired.set(regionId, held);
    }
  }
  await tx.insertInto("rollouts").values(toRow(rollout)).execute();
  await recordTransitions(tx, [{ rollout, generation: rollout.generation, from: RolloutState.UNSPECIFIED, fromWave: 0, action, actor: change.actor }], now);
  return { desired, rollout };
}

/** The regions of `next` with their labels, in the order the operator placed them (`regionIds`' order; the others by name first). */
async function placedRegions(tx: Tx, next: ReadonlyMap<number, DesiredResource>, regionIds: ReadonlyMap<string, number>): Promise<PlacedRegion[]> {
  const labels = await tx
    .selectFrom("regions")
    .select(["id", "name", "labels"])
    .where("id", "in", [...next.keys()])
    .execute();
  const placed = labels
    .map((r) => ({ name: r.name, id: r.id, labels: r.labels ? (JSON.parse(r.labels) as RegionLabels) : {} }))
    .sort((a, b) => a.name.localeCompare(b.name));
  const order = [...regionIds.keys()];
  placed.sort((a, b) => order.indexOf(a.name) - order.indexOf(b.name));
  return placed;
}

/** The deployment's active rollout ends as `decisions.supersede` says (a newer change starts from the first wave). */
async function supersede(tx: Tx, decisions: RolloutDecisions, deploymentId: string, actor: string, now: number): Promise<void> {
  const active = await tx
    .selectFrom("rollouts")
    .selectAll()
    .where("deployment_id", "=", deploymentId)
    .where("state", "in", [...ACTIVE_ROLLOUT_STATES])
    .execute();
  for (const row of active) {
    const rollout = fromRow(row);
    const step = decisions.supersede(rollout);
    const generation = rollout.generation + 1;
    const result = await tx
      .updateTable("rollouts")
      .set({ state: step.next.state, generation, due_at: step.next.dueAt ?? null, reason: step.next.reason.slice(0, 1024), update_time: now })
      .where("id", "=", rollout.id)
      .where("generation", "=", rollout.generation)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) !== 1) continue;
    await recordTransitions(tx, [{ rollout: step.next, generation, from: rollout.state, fromWave: rollout.currentWave, action: step.action, actor }], now);
  }
}

/** The deployment's desired state per region, as stored now (unversioned, as writeDesired compares it). */
export async function currentDesired(tx: Kysely<Database>, deploymentId: string): Promise<Map<number, DesiredResource>> {
  const rows = await tx
    .selectFrom("desired_resources")
    .select(["region_id", "body", "secret_env_sealed"])
    .where("resource_type", "=", ResourceType.DEPLOYMENT)
    .where("resource_id", "=", deploymentId)
    .execute();
  return new Map(rows.map((r) => [r.region_id, wholeResource(r)]));
}

/** Writes these rollouts' rows as `result` (one statement), each on the generation it was read at. */
async function updateRollouts(tx: Tx, rollouts: readonly { change: RolloutChange; result: StoredRollout }[], now: number): Promise<void> {
  const each = (value: (r: StoredRollout) => unknown) =>
    sql<never>`case id ${sql.join(
      rollouts.map(({ result }) => sql`when ${result.id} then ${value(result)}`),
      sql` `,
    )} end`;
  const updated = await tx
    .updateTable("rollouts")
    .set({
      generation: each((r) => r.generation),
      state: each((r) => r.state),
      current_wave: each((r) => r.currentWave),
      reason: each((r) => r.reason.slice(0, 1024)),
      plan: each((r) => JSON.stringify(r.waves)),
      due_at: each((r) => r.dueAt ?? null),
      update_time: now,
    })
    .where((eb) => eb.or(rollouts.map(({ change }) => eb.and([eb("id", "=", change.current.id), eb("generation", "=", change.current.generation)]))))
    .executeTakeFirst();
  if (Number(updated.numUpdatedRows) !== rollouts.length) throw new StoreError("aborted", "rollouts changed under their row locks");
}

/** A transition to `rollout` (its state, wave and reason after it) as generation `generation`, from state `from`. */
export interface RecordedTransition {
  rollout: StoredRollout;
  generation: number;
  from: RolloutState;
  /** The wave before it (the rollout's after it is `rollout.currentWave`). */
  fromWave: number;
  action: RolloutAction;
  actor: string;
}

/**
 * Records transitions in `tx`, the transaction that makes them: every transition of every
 * rollout — a change's start, a supersede, the gate's and the operators' — passes here and only
 * here, so what must follow a transition in its own transaction (a notification of it) is
 * written here too, and a transition that is rolled back records nothing.
 */
async function recordTransitions(tx: Tx, transitions: readonly RecordedTransition[], now: number): Promise<void> {
  const rows: Insertable<RolloutTransitionsTable>[] = transitions.map((t) => ({
    rollout_id: t.rollout.id,
    generation: t.generation,
    from_state: t.from,
    to_state: t.rollout.state,
    wave: t.rollout.currentWave,
    action: t.action,
    actor: t.actor,
    reason: t.rollout.reason.slice(0, 1024),
    time: now,
  }));
  for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
    await tx
      .insertInto("rollout_transitions")
      .values(rows.slice(i, i + ROWS_PER_STATEMENT))
      .execute();
  }
  // What the transitions owe notifiers (notifications.ts).
  await recordNotifications(
    tx,
    transitions.flatMap((t) =>
      rolloutNotifications({
        rollout: t.rollout,
        from: t.from,
        to: t.rollout.state,
        fromWave: t.fromWave,
        toWave: t.rollout.currentWave,
        action: t.action,
        actor: t.actor,
        reason: t.rollout.reason,
      }),
    ),
    now,
  );
}

export interface RolloutTransition {
  generation: number;
  from: RolloutState;
  to: RolloutState;
  wave: number;
  action: string;
  actor: string;
  reason: string;
  time: number;
}

/** How a transition changes a rollout, beyond its row. */
export interface RolloutEffects {
  /** Regions to move to the rollout's revision now (marked moved in `next`). */
  move?: number[];
  /**
   * Every region the rollout moved gets what it ran before: a new revision of the deployment
   * with the spec of `fromRevision` (actor and reason as given); regions never moved keep
   * what they run.
   */
  restore?: boolean;
}

/** Writes a deployment's revision for a rollout's way back (ResourceRepository.reviseInTx). */
export type Reviser = (
  tx: Tx,
  id: string,
  toRevision: number,
  author: { actor: string; message: string },
  now: number,
  shape: (next: Map<number, DesiredResource>) => Promise<Map<number, DesiredResource>>,
) => Promise<number[]>;

/** Writes desired state for deployments' regions (outbox.ts writeDesiredMany, bound). */
export type DesiredWriter = (tx: Tx, writes: readonly DesiredWrite[], now: number) => Promise<number[]>;

/** Desired state of each deployment's current spec per region, by deployment id; rows already locked (kinds.ts deploymentKind.desired, bound). */
export type DesiredOf = (tx: Tx, ids: readonly string[]) => Promise<Map<string, { revision: number; desired: Map<number, DesiredResource> }>>;

/** One step of a rollout's transition: the rollout after it, its effects, how it is recorded. */
export interface RolloutStep {
  next: StoredRollout;
  effects: RolloutEffects;
  action: RolloutAction;
}

/** A transition of `current`: its steps in order, one compare-and-set for all of them, each recorded as a transition of its own. */
export interface RolloutChange {
  current: StoredRollout;
  steps: readonly RolloutStep[];
  actor: string;
}

/** A placement region as wave planning sees it. */
export interface PlacedRegion {
  name: string;
  id: number;
  labels: RegionLabels;
}

/** A change of a deployment with a strategy: the rollout's id and revisions, the placement regions in the operator's order, the regions whose desired state it changes. */
export interface RolloutStart {
  id: string;
  deploymentId: string;
  strategy: RolloutStrategy;
  /** Empty when no region changes. */
  placed: PlacedRegion[];
  /** Ids of the regions whose desired state the change changes (empty: a stop, or a spec equal where it runs). */
  changed: number[];
  fromRevision: number;
  toRevision: number;
  now: number;
}

/**
 * The rollout decisions the store's own writes take, made by ctrl (packages/ctrl/src/rollouts/,
 * storeDecisions): the store writes what they return and decides nothing.
 */
export interface RolloutDecisions {
  /** The rollout a change starts (generation 1), its first wave started or waiting for approval, and how that is recorded; undefined: none, the change is written at once. */
  start(change: RolloutStart): { rollout: StoredRollout; action: RolloutAction } | undefined;
  /** The step of an active rollout that a newer change of its deployment supersedes. */
  supersede(rollout: StoredRollout): RolloutStep;
  /** The one step of a rollout whose deployment moved on without superseding it (revision: the deployment's now; undefined: gone). */
  outdated(rollout: StoredRollout, revision: number | undefined): RolloutStep;
}

export class RolloutRepository {
  readonly #db: Kysely<Database>;
  readonly #dialect: Dialect;
  readonly #onCommit: CommitListener;
  readonly #parts: { writeDesired: DesiredWriter; desiredOf: DesiredOf; revise: Reviser };
  readonly #given: RolloutDecisions | undefined;

  /**
   * `onCommit`: called after each transition has committed, with the regions whose versions
   * moved (maybe none); `decisions`: ctrl's, for the steps the store takes on its own.
   */
  constructor(
    db: Kysely<Database>,
    dialect: Dialect,
    onCommit: CommitListener,
    parts: { writeDesired: DesiredWriter; desiredOf: DesiredOf; revise: Reviser },
    decisions: RolloutDecisions | undefined,
  ) {
    this.#db = db;
    this.#dialect = dialect;
    this.#onCommit = onCommit;
    this.#parts = parts;
    this.#given = decisions;
  }

  #decisions(): RolloutDecisions {
    if (!this.#given) throw new StoreError("failed_precondition", "staged rollouts need ctrl's rollout decisions (StoreOptions.rollouts)");
    return this.#given;
  }

  /** A rollout by id, or a deployment's newest rollout by the deployment's id; NOT_FOUND otherwise. */
  async get(id: string): Promise<StoredRollout> {
    const row =
      (await this.#db.selectFrom("rollouts").selectAll().where("id", "=", id).executeTakeFirst()) ??
      (await this.#db
        .selectFrom("rollouts")
        .selectAll()
        .where("deployment_id", "=", id)
        .orderBy("create_time", "desc")
        .orderBy("to_revision", "desc")
        .limit(1)
        .executeTakeFirst());
    if (!row) throw new StoreError("not_found", `rollout ${JSON.stringify(id)} not found (nor a deployment's rollout)`, "id");
    return fromRow(row);
  }

  /**
   * The revision each region of these deployments is to run now (its desired state's), by
   * deployment id and region id; a region without the deployment is absent.
   */
  async revisionsRun(deploymentIds: readonly string[]): Promise<Map<string, Map<number, number>>> {
    const found = new Map<string, Map<number, number>>();
    if (deploymentIds.length === 0) return found;
    const rows = await this.#db
      .selectFrom("desired_resources")
      .select(["resource_id", "region_id", "body"])
      .where("resource_type", "=", ResourceType.DEPLOYMENT)
      .where("resource_id", "in", [...deploymentIds])
      .execute();
    for (const row of rows) {
      if (!found.has(row.resource_id)) found.set(row.resource_id, new Map());
      found.get(row.resource_id)!.set(row.region_id, revisionOfBody(row.body));
    }
    return found;
  }

  /** The newest rollout of each of these deployments that has one. */
  async newestOf(deploymentIds: string[]): Promise<Map<string, StoredRollout>> {
    const found = new Map<string, StoredRollout>();
    if (deploymentIds.length === 0) return found;
    const rows = await this.#db.selectFrom("rollouts").selectAll().where("deployment_id", "in", deploymentIds).orderBy("to_revision", "asc").execute();
    for (const row of rows) found.set(row.deployment_id, fromRow(row));
    return found;
  }

  /** Active rollouts of these deployments. */
  async activeOf(deploymentIds: string[]): Promise<StoredRollout[]> {
    if (deploymentIds.length === 0) return [];
    const rows = await this.#db
      .selectFrom("rollouts")
      .selectAll()
      .where("deployment_id", "in", deploymentIds)
      .where("state", "in", [...ACTIVE_ROLLOUT_STATES])
      .execute();
    return rows.map(fromRow);
  }

  /** Newest first (by creation), optionally of one deployment and in one state. */
  async list(filter: { deployment?: string; state?: RolloutState }, requestedPageSize: number, pageToken: string): Promise<Page<StoredRollout>> {
    const size = pageSize(requestedPageSize);
    const after = decodePageToken(pageToken);
    let query = this.#db
      .selectFrom("rollouts")
      .selectAll()
      .orderBy("create_time", "desc")
      .orderBy("id", "desc")
      .limit(size + 1);
    if (filter.deployment) query = query.where("deployment_id", "=", filter.deployment);
    if (filter.state) query = query.where("state", "=", filter.state);
    if (after !== undefined) {
      const [time, id] = splitToken(after);
      query = query.where((eb) => eb.or([eb("create_time", "<", time), eb.and([eb("create_time", "=", time), eb("id", "<", id)])]));
    }
    return toPage(await query.execute(), size, (r) => `${r.create_time}/${r.id}`, fromRow);
  }

  /** How many rollouts are in each active state. */
  async countActive(): Promise<Map<RolloutState, number>> {
    const rows = await this.#db
      .selectFrom("rollouts")
      .select(["state", (eb) => eb.fn.countAll().as("n")])
      .where("state", "in", [...ACTIVE_ROLLOUT_STATES])
      .groupBy("state")
      .execute();
    return new Map(rows.map((r) => [r.state as RolloutState, Number(r.n)]));
  }

  /** The earliest time a rollout must be looked at again without an observation; undefined: none. */
  async nextDue(): Promise<number | undefined> {
    const row = await this.#db
      .selectFrom("rollouts")
      .select((eb) => eb.fn.min("due_at").as("due"))
      .where("due_at", "is not", null)
      .executeTakeFirst();
    return row?.due === null || row?.due === undefined ? undefined : Number(row.due);
  }

  /** Rollouts due by `now`, at most `limit`. */
  async due(now: number, limit: number): Promise<StoredRollout[]> {
    const rows = await this.#db.selectFrom("rollouts").selectAll().where("due_at", "<=", now).orderBy("due_at").limit(limit).execute();
    return rows.map(fromRow);
  }

  /** The rollout's transitions, oldest first. */
  async transitions(id: string): Promise<RolloutTransition[]> {
    const rows = await this.#db.selectFrom("rollout_transitions").selectAll().where("rollout_id", "=", id).orderBy("id").execute();
    return rows.map((r) => ({
      generation: Number(r.generation),
      from: r.from_state,
      to: r.to_state,
      wave: r.wave,
      action: r.action,
      actor: r.actor,
      reason: r.reason,
      time: Number(r.time),
    }));
  }

  /**
   * Moves `current` to `next` (same id) if nobody moved it since it was read: one transaction
   * holding the compare-and-set on (id, generation), the effects and the transition record.
   * Returns the stored rollout, or undefined when the turn was lost (nothing written).
   */
  async transition(
    current: StoredRollout,
    next: StoredRollout,
    effects: RolloutEffects,
    action: RolloutAction,
    actor: string,
    now: number,
  ): Promise<StoredRollout | undefined> {
    const [stored] = await this.transitionMany([{ current, steps: [{ next, effects, action }], actor }], now);
    return stored;
  }

  /**
   * The transitions of several rollouts (of distinct deployments) in one transaction: each a
   * compare-and-set on (id, generation) of its own, so a rollout moved meanwhile by someone
   * else is left out (undefined in its place: nothing of it written) and the others are
   * written; each region's version row is taken once for all of their moves. A change with a
   * way back (restore) writes a new revision of its deployment, with region locks of its own:
   * it gets a transaction of its own. Returns the stored rollouts, in the order of `changes`.
   */
  async transitionMany(changes: readonly RolloutChange[], now: number): Promise<(StoredRollout | undefined)[]> {
    const deployments = changes.map((c) => c.current.deploymentId);
    if (new Set(deployments).size !== deployments.length) throw new StoreError("invalid_argument", "one transition per deployment in a batch");
    const restores = (c: RolloutChange) => c.steps.some((s) => s.effects.restore);
    const stored = new Map<RolloutChange, StoredRollout | undefined>();
    const together = changes.filter((c) => !restores(c));
    if (together.length > 0) for (const [change, result] of await this.#write(together, now)) stored.set(change, result);
    for (const change of changes.filter(restores)) for (const [c, result] of await this.#write([change], now)) stored.set(c, result);
    return changes.map((c) => stored.get(c));
  }

  async #write(changes: readonly RolloutChange[], now: number): Promise<Map<RolloutChange, StoredRollout | undefined>> {
    let regions: number[] = [];
    let written: readonly CommittedChange[] | undefined;
    const stored = await this.#db.transaction().execute(async (tx) => {
      // The deployments' rows first (in id order), as a change of a deployment locks it
      // before its rollout's (supersede): one lock order, so the two never deadlock.
      const deploymentRows = await tx
        .selectFrom("deployments")
        .select(["id", "revision"])
        .where(
          "id",
          "in",
          changes.map((c) => c.current.deploymentId),
        )
        .orderBy("id")
        .$if(this.#dialect.locksRows, (q) => q.forUpdate())
        .execute();
      const revisions = new Map(deploymentRows.map((r) => [r.id, Number(r.revision)]));
      // The compare-and-set: each rollout's row locked and its generation compared, then the
      // winners' rows written in one statement (still on the generation read).
      const rolloutRows = await tx
        .selectFrom("rollouts")
        .select(["id", "generation"])
        .where(
          "id",
          "in",
          changes.map((c) => c.current.id),
        )
        .orderBy("id")
        .$if(this.#dialect.locksRows, (q) => q.forUpdate())
        .execute();
      const generations = new Map(rolloutRows.map((r) => [r.id, Number(r.generation)]));
      const results = new Map<RolloutChange, StoredRollout | undefined>();
      const won: { change: RolloutChange; steps: readonly RolloutStep[]; result: StoredRollout }[] = [];
      for (const change of changes) {
        const { current } = change;
        if (generations.get(current.id) !== current.generation) {
          results.set(change, undefined);
          continue;
        }
        // A change of the deployment supersedes its rollout in the same transaction, unless
        // the deployment had no strategy then (--default-rollout-strategy removed since the
        // rollout started): such a rollout moves nothing any more.
        const steps =
          revisions.get(current.deploymentId) === current.toRevision
            ? change.steps
            : [this.#decisions().outdated(current, revisions.get(current.deploymentId))];
        const result: StoredRollout = { ...steps[steps.length - 1]!.next, generation: current.generation + steps.length, updateTime: now };
        results.set(change, result);
        won.push({ change, steps, result });
      }
      for (let i = 0; i < won.length; i += ROWS_PER_STATEMENT) await updateRollouts(tx, won.slice(i, i + ROWS_PER_STATEMENT), now);
      const moves = won.filter((w) => w.steps.some((s) => s.effects.move?.length));
      if (moves.length > 0) regions = await this.#move(tx, moves, now);
      for (const { change, steps, result } of won) {
        if (steps.some((s) => s.effects.restore)) regions = [...regions, ...(await this.#restore(tx, change.current, change.actor, result.reason, now))];
      }
      await recordTransitions(
        tx,
        won.flatMap(({ change, steps }) =>
          steps.map((step, i) => ({
            rollout: step.next,
            generation: change.current.generation + i + 1,
            from: i === 0 ? change.current.state : steps[i - 1]!.next.state,
            fromWave: i === 0 ? change.current.currentWave : steps[i - 1]!.next.currentWave,
            action: step.action,
            actor: change.actor,
          })),
        ),
        now,
      );
      // The deployments' statuses (their rollouts included) changed for the status stream.
      await StatusEvents.append(
        tx,
        won.map((w) => ({ type: ResourceType.DEPLOYMENT, id: w.change.current.deploymentId })),
        now,
      );
      written = committedChanges(tx);
      return results;
    });
    if ([...stored.values()].some((r) => r !== undefined)) this.#onCommit([...new Set(regions)], written);
    return stored;
  }

  /** Writes each rollout's revision into the regions its steps move; their other regions keep what they hold. */
  async #move(tx: Tx, moves: readonly { change: RolloutChange; steps: readonly RolloutStep[] }[], now: number): Promise<number[]> {
    const targets = await this.#parts.desiredOf(
      tx,
      moves.map((m) => m.change.current.deploymentId),
    );
    const writes = moves.map(({ change, steps }) => {
      const id = change.current.deploymentId;
      const target = targets.get(id);
      if (!target) throw new StoreError("failed_precondition", `deployment ${JSON.stringify(id)} is gone`, "id");
      const next = new Map<number, DesiredResource>();
      for (const regionId of steps.flatMap((s) => s.effects.move ?? [])) {
        const body = target.desired.get(regionId);
        if (body) next.set(regionId, body);
      }
      return { id, next, keepOthers: true };
    });
    return this.#parts.writeDesired(tx, writes, now);
  }

  /** The way back: the regions it moved get their previous revision (a new revision, actor as given). */
  async #restore(tx: Tx, rollout: StoredRollout, actor: string, reason: string, now: number): Promise<number[]> {
    const moved = new Set(rollout.waves.flatMap((w) => w.regions.filter((r) => r.moved).map((r) => r.regionId)));
    const current = await currentDesired(tx, rollout.deploymentId);
    if (rollout.fromRevision === 0) {
      // A first deployment has nothing to go back to: the regions it reached stop running it.
      const next = new Map([...current].filter(([regionId]) => !moved.has(regionId)));
      return this.#parts.writeDesired(tx, [{ id: rollout.deploymentId, next }], now);
    }
    return this.#parts.revise(tx, rollout.deploymentId, rollout.fromRevision, { actor, message: reason }, now, async (previous) => {
      const next = new Map<number, DesiredResource>();
      for (const [regionId, body] of previous) {
        const held = current.get(regionId);
        next.set(regionId, moved.has(regionId) || !held ? body : held);
      }
      return next;
    });
  }
}

/** A rollout as the API shows it (phases are filled in by ctrl's projection). */
export function toRolloutMessage(rollout: StoredRollout): Rollout {
  return create(RolloutSchema, {
    id: rollout.id,
    deployment: rollout.deploymentId,
    toRevision: BigInt(rollout.toRevision),
    state: rollout.state,
    currentWave: rollout.currentWave,
    reason: rollout.reason,
    onFailure: rollout.onFailure,
    generation: BigInt(rollout.generation),
    createTime: timestampFromMs(rollout.createTime),
    updateTime: timestampFromMs(rollout.updateTime),
    waves: rollout.waves.map((w) => ({
      name: w.name,
      bake: msDuration(w.bakeMs),
      approval: w.approval,
      progressDeadline: msDuration(w.deadlineMs),
      maxParallel: w.maxParallel,
      startTime: w.startTime === undefined ? undefined : timestampFromMs(w.startTime),
      runningSince: w.runningSince === undefined ? undefined : timestampFromMs(w.runningSince),
      endTime: w.endTime === undefined ? undefined : timestampFromMs(w.endTime),
      regions: w.regions.map((r) => ({ region: r.region, moved: r.moved, revision: BigInt(r.moved ? rollout.toRevision : rollout.fromRevision) })),
    })),
  });
}

function msDuration(ms: number) {
  return { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 };
}

function toRow(rollout: StoredRollout): RolloutsTable {
  return {
    id: rollout.id,
    deployment_id: rollout.deploymentId,
    to_revision: rollout.toRevision,
    from_revision: rollout.fromRevision,
    state: rollout.state,
    current_wave: rollout.currentWave,
    generation: rollout.generation,
    on_failure: rollout.onFailure,
    reason: rollout.reason.slice(0, 1024),
    plan: JSON.stringify(rollout.waves),
    due_at: rollout.dueAt ?? null,
    create_time: rollout.createTime,
    update_time: rollout.updateTime,
  };
}

function fromRow(row: RolloutsTable): StoredRollout {
  return {
    id: row.id,
    deploymentId: row.deployment_id,
    fromRevision: Number(row.from_revision),
    toRevision: Number(row.to_revision),
    state: row.state,
    currentWave: row.current_wave,
    generation: Number(row.generation),
    onFailure: row.on_failure,
    reason: row.reason,
    waves: JSON.parse(row.plan) as WavePlan[],
    dueAt: row.due_at === null ? undefined : Number(row.due_at),
    createTime: Number(row.create_time),
    updateTime: Number(row.update_time),
  };
}

function splitToken(token: string): [number, string] {
  const slash = token.indexOf("/");
  const time = Number(token.slice(0, slash));
  if (slash < 0 || !Number.isSafeInteger(time)) throw new StoreError("invalid_argument", "page_token: not a token from a previous page", "page_token");
  return [time, token.slice(slash + 1)];
}
