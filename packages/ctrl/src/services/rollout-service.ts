// ctrl.v1.RolloutService: read rollouts, and the operators' controls over them. A control is
// a decision of the rollout state machine (rollouts/controls.ts) taken by a person: it is
// stored with the same compare-and-set as the driver's, with the operator as its actor, then
// the driver takes the rollout on from there.
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  AnalysisPhase,
  ResourceType,
  RolloutAnalysisStatusSchema,
  RolloutState,
  type RegionStatus,
  type Rollout,
  type RolloutAnalysisStatus,
} from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { StoreError, toRolloutMessage, type Store, type StoredMeasurement, type StoredRollout } from "@flotilla/store";
import { recordWrite } from "../audit-trail.ts";
import { actorOf, principalKey, projectAccess } from "../auth.ts";
import { invalidArgument } from "../errors.ts";
import { bakeUnderAnalysis, judgeMeasurement, judgeWave, type AnalysisPhase as AnalysisPhaseName } from "../rollouts/analysis.ts";
import { CONTROLS, type ControlName } from "../rollouts/controls.ts";
import { restoredMovedRegions } from "../rollouts/gate.ts";
import type { RolloutDriver } from "../rollouts/driver.ts";
import { statusesOf, type StatusOptions } from "../status/region-status.ts";
import * as validate from "../validate.ts";

/**
 * Rollouts as the API shows them: each region with its phase now (from `known`, the
 * deployments' statuses when the caller has read them already); a region rolled back with the
 * revision it runs now, so that a view never shows the failed revision as what runs there; the
 * current wave's analyses with their measurements of its latest bake.
 */
export async function rolloutMessages(
  store: Store,
  rollouts: StoredRollout[],
  statusOptions: StatusOptions,
  known?: ReadonlyMap<string, RegionStatus[]>,
): Promise<Rollout[]> {
  const ids = [...new Set(rollouts.map((r) => r.deploymentId))];
  const statuses = known ?? (await statusesOf(store, ResourceType.DEPLOYMENT, ids, statusOptions));
  const restored = rollouts.filter(restoredMovedRegions);
  const revisions = await store.rollouts.revisionsRun([...new Set(restored.map((r) => r.deploymentId))]);
  const measurements = await store.analysis.ofBakes(rollouts.flatMap(bakeUnderAnalysis));
  const now = Date.now();
  return rollouts.map((stored) => {
    const rollout = toRolloutMessage(stored);
    const byRegion = new Map((statuses.get(stored.deploymentId) ?? []).map((s) => [s.region, s]));
    const rolledBack = restoredMovedRegions(stored);
    for (const [w, wave] of rollout.waves.entries()) {
      for (const [i, region] of wave.regions.entries()) {
        const status = byRegion.get(region.region);
        region.phase = status?.phase ?? 0;
        if (region.moved) region.movedVersion = status?.desiredVersion ?? 0n;
        if (region.moved && rolledBack) {
          region.rolledBack = true;
          region.revision = BigInt(revisions.get(stored.deploymentId)?.get(stored.waves[w]!.regions[i]!.regionId) ?? 0);
        }
      }
    }
    const current = rollout.waves[stored.currentWave];
    if (current) current.analyses = analysisStatuses(stored, measurements, now);
    return rollout;
  });
}

/** The analyses of `rollout`'s current wave's latest bake as judged now, each region with its measurements; none before the bake. */
function analysisStatuses(rollout: StoredRollout, measurements: readonly StoredMeasurement[], now: number): RolloutAnalysisStatus[] {
  const wave = rollout.waves[rollout.currentWave]!;
  if (wave.runningSince === undefined || !wave.analysis?.length) return [];
  const ofBake = measurements.filter((m) => m.rolloutId === rollout.id && m.wave === rollout.currentWave && m.bakeStart === wave.runningSince);
  // Judged as the gate judges it; a wave no longer under way has had all the time it gets.
  const bakeOver = rollout.state !== RolloutState.PROGRESSING || wave.endTime !== undefined || now >= wave.runningSince + wave.bakeMs;
  const judged = judgeWave(wave, ofBake, bakeOver).regions;
  return wave.analysis.map((plan) =>
    create(RolloutAnalysisStatusSchema, {
      name: plan.name,
      successCondition: plan.successCondition,
      failureCondition: plan.failureCondition,
      regions: judged
        .filter((r) => r.analysis === plan.name)
        .map((r) => ({
          region: r.region,
          phase: ANALYSIS_PHASES[r.phase],
          reason: r.reason,
          measurements: ofBake
            .filter((m) => m.analysis === plan.name && m.region === r.region)
            .slice(-MEASUREMENTS_SHOWN)
            .map((m) => ({
              index: m.index,
              takenAt: timestampFromMs(m.takenAt),
              revision: BigInt(m.revision),
              phase: ANALYSIS_PHASES[judgeMeasurement(plan, m)],
              result:
                m.error !== undefined
                  ? { case: "error" as const, value: m.error }
                  : m.value !== undefined
                    ? { case: "value" as const, value: m.value }
                    : { case: "noData" as const, value: {} },
            })),
        })),
    }),
  );
}

/** Measurements of an analysis in a region shown, the newest (an analysis takes at most 100 with a count; without one, one per interval). */
const MEASUREMENTS_SHOWN = 100;

const ANALYSIS_PHASES: Record<AnalysisPhaseName, AnalysisPhase> = {
  PENDING: AnalysisPhase.PENDING,
  RUNNING: AnalysisPhase.RUNNING,
  SUCCESSFUL: AnalysisPhase.SUCCESSFUL,
  FAILED: AnalysisPhase.FAILED,
  INCONCLUSIVE: AnalysisPhase.INCONCLUSIVE,
  ERROR: AnalysisPhase.ERROR,
};

export function rolloutService(store: Store, driver: RolloutDriver, statusOptions: StatusOptions): ServiceImpl<typeof RolloutService> {
  const shown = async (rollout: StoredRollout) => (await rolloutMessages(store, [rollout], statusOptions))[0]!;
  /** A rollout belongs to its deployment's project (returned); one of a deleted deployment, to fleet-wide callers only (""). */
  const authorizeRollout = async (rollout: StoredRollout, ctx: HandlerContext): Promise<string> => {
    const access = projectAccess(ctx);
    const project = (await store.deployments.projectsOf([rollout.deploymentId])).get(rollout.deploymentId);
    if (project === undefined) {
      if (access.coversEveryProject()) return "";
      throw new StoreError("not_found", `rollout ${JSON.stringify(rollout.id)} not found`, "id");
    }
    access.require(project, `rollout ${JSON.stringify(rollout.id)}`);
    return project;
  };
  const control = (name: ControlName) => async (req: { id: string; message: string }, ctx: HandlerContext) => {
    validate.id(req.id, "id");
    if (req.message.length > 1024) throw invalidArgument("message", "at most 1024 characters");
    const actor = actorOf(ctx.values.get(principalKey));
    // One retry: the driver may have moved the rollout between the read and the control.
    for (let attempt = 0; ; attempt++) {
      const rollout = await store.rollouts.get(req.id);
      const project = await authorizeRollout(rollout, ctx);
      const stored = await driver.apply(rollout, CONTROLS[name](rollout, Date.now()), actor);
      if (stored) {
        await recordWrite(store, ctx, "rollout", stored.id, req.message, project);
        driver.drive(stored);
        return { rollout: await shown(stored) };
      }
      if (attempt > 0) throw new StoreError("aborted", `rollout ${rollout.id} changed meanwhile; look at it again`, "id");
    }
  };
  return {
    async getRollout(req, ctx) {
      validate.id(req.id, "id");
      const rollout = await store.rollouts.get(req.id);
      await authorizeRollout(rollout, ctx);
      return { rollout: await shown(rollout) };
    },
    async listRollouts(req, ctx) {
      if (req.deployment !== "") validate.id(req.deployment, "deployment");
      if (!(req.state in RolloutState)) throw invalidArgument("state", `unknown state ${req.state}`);
      const visible = projectAccess(ctx).visibleProjects();
      const page = await store.rollouts.list({ deployment: req.deployment || undefined, state: req.state || undefined }, req.pageSize, req.pageToken);
      let items = page.items;
      if (visible) {
        // A page may come out shorter than asked (even empty) while next_page_token goes on, as a filtered region list does.
        const projects = await store.deployments.projectsOf([...new Set(items.map((r) => r.deploymentId))]);
        items = items.filter((r) => visible.has(projects.get(r.deploymentId) ?? ""));
      }
      return { rollouts: await rolloutMessages(store, items, statusOptions), nextPageToken: page.nextPageToken };
    },
    pauseRollout: control("pause"),
    resumeRollout: control("resume"),
    approveRollout: control("approve"),
    promoteRollout: control("promote"),
    abortRollout: control("abort"),
  };
}
