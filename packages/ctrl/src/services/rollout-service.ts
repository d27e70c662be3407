// ctrl.v1.RolloutService: read rollouts, and the operators' controls over them. A control is
// a decision of the rollout state machine (rollouts/controls.ts) taken by a person: it is
// stored with the same compare-and-set as the driver's, with the operator as its actor, then
// the driver takes the rollout on from there.
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { ResourceType, RolloutState, type RegionStatus, type Rollout } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { StoreError, toRolloutMessage, type Store, type StoredRollout } from "@flotilla/store";
import { recordWrite } from "../audit-trail.ts";
import { actorOf, principalKey, projectAccess } from "../auth.ts";
import { invalidArgument } from "../errors.ts";
import { CONTROLS, type ControlName } from "../rollouts/controls.ts";
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
