// ctrl.v1.RolloutService: read rollouts, and the operators' controls over them. A control is
// a decision of the gate's state machine (rollouts/gate.ts) taken by a person: it is stored
// with the same compare-and-set as the driver's, with the operator as its actor, then the
// driver takes the rollout on from there.
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { ResourceType, RolloutFailurePolicy, RolloutState, type RegionStatus, type Rollout } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { ACTIVE_ROLLOUT_STATES, StoreError, toRolloutMessage, type Store, type StoredRollout } from "@flotilla/store";
import { recordWrite } from "../audit-trail.ts";
import { actorOf, principalKey, projectAccess } from "../auth.ts";
import { invalidArgument } from "../errors.ts";
import { approve, fail, waveDone, type Decision } from "../rollouts/gate.ts";
import type { RolloutDriver } from "../rollouts/driver.ts";
import { statusesOf, type StatusOptions } from "../status/region-status.ts";
import * as validate from "../validate.ts";

/**
 * Rollouts as the API shows them: each region with its phase now (from `known`, the
 * deployments' statuses when the caller has read them already).
 */
export async function rolloutMessages(
  store: Store,
  rollouts: StoredRollout[],
  statusOptions: StatusOptions,
  known?: ReadonlyMap<string, RegionStatus[]>,
): Promise<Rollout[]> {
  const ids = [...new Set(rollouts.map((r) => r.deploymentId))];
  const statuses = known ?? (await statusesOf(store, ResourceType.DEPLOYMENT, ids, statusOptions));
  return rollouts.map((stored) => {
    const rollout = toRolloutMessage(stored);
    const byRegion = new Map((statuses.get(stored.deploymentId) ?? []).map((s) => [s.region, s]));
    for (const wave of rollout.waves) {
      for (const region of wave.regions) {
        const status = byRegion.get(region.region);
        region.phase = status?.phase ?? 0;
        if (region.moved) region.movedVersion = status?.desiredVersion ?? 0n;
      }
    }
    return rollout;
  });
}

type Control = (rollout: StoredRollout, now: number) => Decision;

const refuse = (rollout: StoredRollout, what: string): never => {
  throw new StoreError("failed_precondition", `rollout ${rollout.id} is ${RolloutState[rollout.state]}: ${what}`, "id");
};

/** The controls: each checks the state it applies to, then decides. */
const CONTROLS: Record<"pause" | "resume" | "approve" | "promote" | "abort", Control> = {
  pause(rollout) {
    if (rollout.state !== RolloutState.PROGRESSING && rollout.state !== RolloutState.WAITING_APPROVAL)
      refuse(rollout, "only a progressing or waiting rollout pauses");
    const next = structuredClone(rollout);
    next.state = RolloutState.PAUSED;
    next.dueAt = undefined;
    next.reason = `paused at wave ${rollout.waves[rollout.currentWave]!.name}`;
    return { next, move: [], restore: false, action: "paused" };
  },
  resume(rollout, now) {
    if (rollout.state !== RolloutState.PAUSED && rollout.state !== RolloutState.FAILED) refuse(rollout, "only a paused or failed rollout resumes");
    const next = structuredClone(rollout);
    const wave = next.waves[next.currentWave]!;
    if (wave.startTime === undefined) {
      // Paused while it waited for approval: it waits again.
      next.state = wave.approval ? RolloutState.WAITING_APPROVAL : RolloutState.PROGRESSING;
      if (!wave.approval) return approve(next, now);
    } else {
      next.state = RolloutState.PROGRESSING;
      wave.startTime = now;
      wave.runningSince = undefined;
      next.dueAt = now + wave.deadlineMs;
    }
    next.reason = `resumed at wave ${wave.name}`;
    return { next, move: [], restore: false, action: "resumed" };
  },
  approve(rollout, now) {
    if (rollout.state !== RolloutState.WAITING_APPROVAL) refuse(rollout, "only a rollout waiting for approval is approved");
    return approve(rollout, now);
  },
  promote(rollout, now) {
    if (rollout.state === RolloutState.WAITING_APPROVAL) return approve(rollout, now);
    const wave = rollout.waves[rollout.currentWave]!;
    if (rollout.state !== RolloutState.PROGRESSING || wave.runningSince === undefined) {
      refuse(rollout, "promote skips a bake or an approval; this wave's regions are not all RUNNING yet");
    }
    return waveDone(rollout, now);
  },
  abort(rollout, now) {
    if (!ACTIVE_ROLLOUT_STATES.includes(rollout.state)) refuse(rollout, "only an active or failed rollout is aborted");
    const decision = fail({ ...rollout, onFailure: RolloutFailurePolicy.ROLLBACK }, `aborted at wave ${rollout.waves[rollout.currentWave]!.name}`, now);
    decision.next.state = RolloutState.ABORTED;
    decision.action = "aborted";
    return decision;
  },
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
  const control = (name: keyof typeof CONTROLS) => async (req: { id: string; message: string }, ctx: HandlerContext) => {
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
