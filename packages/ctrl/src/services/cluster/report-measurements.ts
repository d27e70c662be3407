// ClusterService.ReportMeasurements: an agent hands in the analysis measurements it took and
// learns what to measure now (docs/rollout-analysis.md). Its tasks are the analyses of the bakes
// under way in its region (a progressing rollout whose current wave has moved the region and
// bakes), each with the query's templates filled in for the region, and listed until the
// region's verdict on it is final (analysis.ts). A measurement is kept only for a task of an open
// bake and only of the revision that task is about: a measurement of an older revision (an agent
// still running it, a late report) never counts.
import type { HandlerContext } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampDate, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { AnalysisTaskSchema, type AnalysisTask, type ReportMeasurementsRequest, type ReportMeasurementsResponse } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { RolloutAnalysisSchema, RolloutState } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { AnalysisPlan, BakeKey, Store, StoredMeasurement, StoredRollout } from "@flotilla/store";
import { authorizeRegion, resolveAuthorizedRegion } from "../../auth.ts";
import { invalidArgument } from "../../errors.ts";
import type { CtrlMetrics } from "../../metrics.ts";
import { assessRegion, bakeUnderAnalysis, isFinal, renderTemplate, type TemplateValues } from "../../rollouts/analysis.ts";
import * as validate from "../../validate.ts";

export const MAX_MEASUREMENTS_PER_REPORT = 1000;
/** Measurements of one task kept at most (an analysis without a count measures until its bake ends). */
export const MAX_MEASUREMENT_INDEX = 10_000;
/**
 * The bakes under analysis are read at most this often per process: every region's agent
 * reports every few seconds, and one read serves them all. A measurement naming a bake not
 * in what was read reads again at once.
 */
const BAKES_READ_EVERY_MS = 1000;

interface OpenTask {
  id: string;
  rollout: StoredRollout;
  bake: BakeKey;
  plan: AnalysisPlan;
  revision: number;
  templates: TemplateValues;
}

/**
 * `onRecorded`: called with the deployments whose rollouts got measurements stored (the rollout
 * driver's lookNow: a deciding one hands the wave off without waiting for the driver's poll).
 */
export function reportMeasurements(store: Store, metrics: CtrlMetrics, onRecorded: (deploymentIds: string[]) => void = () => {}) {
  let read: { at: number; rollouts: Promise<StoredRollout[]> } | undefined;
  const underAnalysis = (now: number, fresh: boolean): Promise<StoredRollout[]> => {
    if (!read || fresh || now - read.at >= BAKES_READ_EVERY_MS) {
      read = { at: now, rollouts: progressingUnderAnalysis(store) };
      read.rollouts.catch(() => (read = undefined));
    }
    return read.rollouts;
  };
  return async (req: ReportMeasurementsRequest, ctx: HandlerContext): Promise<ReportMeasurementsResponse> => {
    validate.dnsLabel("region", req.region);
    authorizeRegion(ctx, req.region);
    if (req.measurements.length > MAX_MEASUREMENTS_PER_REPORT) throw invalidArgument("measurements", `at most ${MAX_MEASUREMENTS_PER_REPORT} per report`);
    req.measurements.forEach((m, i) => {
      if (m.task === "" || m.task.length > 300) throw invalidArgument(`measurements[${i}].task`, "must be a task id (1 to 300 characters)");
      if (!(m.index >= 0 && m.index < MAX_MEASUREMENT_INDEX))
        throw invalidArgument(`measurements[${i}].index`, `must be from 0 to ${MAX_MEASUREMENT_INDEX - 1}`);
      if (m.revision < 0n) throw invalidArgument(`measurements[${i}].revision`, "must not be negative");
      if (m.result.case === undefined) throw invalidArgument(`measurements[${i}]`, "needs a value, an error or no_data");
      if (m.result.case === "error" && m.result.value.length > 1024) throw invalidArgument(`measurements[${i}].error`, "at most 1024 characters");
    });
    const region = await resolveAuthorizedRegion(ctx, store.regions, req.region);
    const now = Date.now();
    let tasks = await openTasks(store, region.id, req.region, await underAnalysis(now, false));
    if (req.measurements.some((m) => !tasks.has(m.task))) tasks = await openTasks(store, region.id, req.region, await underAnalysis(now, true));

    const accepted: StoredMeasurement[] = [];
    for (const m of req.measurements) {
      const task = tasks.get(m.task);
      if (!task || BigInt(task.revision) !== m.revision) {
        metrics.measurements.inc({ result: "ignored" });
        continue;
      }
      accepted.push({
        ...task.bake,
        analysis: task.plan.name,
        region: req.region,
        index: m.index,
        revision: task.revision,
        takenAt: m.takenAt ? timestampDate(m.takenAt).getTime() : now,
        // Neither a value nor an error: no data (StoredMeasurement).
        ...(m.result.case === "value" ? { value: m.result.value } : m.result.case === "error" ? { error: m.result.value } : {}),
      });
    }
    // Sets and maps, not nested scans: a region under a wave of 1,000 rollouts reports 500 at a
    // time, and each scan of one list per item of the other held the event loop for tens of ms.
    const acceptedRollouts = new Set(accepted.map((m) => m.rolloutId));
    const measuredDeployments = [...new Set([...tasks.values()].filter((t) => acceptedRollouts.has(t.bake.rolloutId)).map((t) => t.rollout.deploymentId))];
    const recorded = await store.analysis.record(accepted, measuredDeployments, now);
    if (recorded > 0) onRecorded(measuredDeployments);
    metrics.measurements.inc({ result: "recorded" }, recorded);
    metrics.measurements.inc({ result: "duplicate" }, accepted.length - recorded);

    const bakes = new Map([...tasks.values()].map((t) => [`${t.bake.rolloutId}/${t.bake.wave}/${t.bake.bakeStart}`, t.bake]));
    const measuredKey = (rolloutId: string, wave: number, bakeStart: number, analysis: string) => `${rolloutId}/${wave}/${bakeStart}/${analysis}`;
    const measured = Map.groupBy(await store.analysis.ofBakes([...bakes.values()], req.region), (m) =>
      measuredKey(m.rolloutId, m.wave, m.bakeStart, m.analysis),
    );
    const listed: AnalysisTask[] = [];
    for (const task of tasks.values()) {
      const wave = task.rollout.waves[task.bake.wave]!;
      const mine = measured.get(measuredKey(task.bake.rolloutId, task.bake.wave, task.bake.bakeStart, task.plan.name)) ?? [];
      const bakeOver = now >= task.bake.bakeStart + wave.bakeMs;
      if (isFinal(assessRegion(task.plan, req.region, mine, bakeOver).phase)) continue;
      listed.push(taskMessage(task));
    }
    return { tasks: listed, prometheusAddress: await store.regions.prometheusAddress(region.id), acceptsNoData: true } as ReportMeasurementsResponse;
  };
}

/** Every progressing rollout whose current wave bakes under analysis. */
async function progressingUnderAnalysis(store: Store): Promise<StoredRollout[]> {
  const found: StoredRollout[] = [];
  let pageToken = "";
  do {
    const page = await store.rollouts.list({ state: RolloutState.PROGRESSING }, 0, pageToken);
    found.push(...page.items.filter((r) => bakeUnderAnalysis(r).length > 0));
    pageToken = page.nextPageToken;
  } while (pageToken !== "");
  return found;
}

/** The tasks of `region` among these rollouts' bakes, by task id. */
async function openTasks(store: Store, regionId: number, region: string, rollouts: readonly StoredRollout[]): Promise<Map<string, OpenTask>> {
  const here = rollouts.filter((r) => r.waves[r.currentWave]!.regions.some((w) => w.region === region && w.moved));
  const desired = await store.analysis.desiredIn(
    regionId,
    here.map((r) => r.deploymentId),
  );
  const tasks = new Map<string, OpenTask>();
  for (const rollout of here) {
    const target = desired.get(rollout.deploymentId);
    const [bake] = bakeUnderAnalysis(rollout);
    if (!target || !bake) continue;
    const templates = { region, namespace: target.namespace, deployment: rollout.deploymentId, revision: String(target.revision) };
    for (const plan of rollout.waves[bake.wave]!.analysis ?? []) {
      const id = `${rollout.id}/${bake.wave}/${bake.bakeStart}/${plan.name}`;
      tasks.set(id, { id, rollout, bake, plan, revision: target.revision, templates });
    }
  }
  return tasks;
}

const duration = (ms: number) => ({ seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 });

function taskMessage(task: OpenTask): AnalysisTask {
  const { plan, templates } = task;
  const render = (text: string) => renderTemplate(text, templates);
  return create(AnalysisTaskSchema, {
    id: task.id,
    deployment: task.rollout.deploymentId,
    revision: BigInt(task.revision),
    startTime: timestampFromMs(task.bake.bakeStart),
    analysis: create(RolloutAnalysisSchema, {
      name: plan.name,
      provider: plan.prometheus
        ? { case: "prometheus", value: { query: render(plan.prometheus.query) } }
        : {
            case: "web",
            value: { url: render(plan.web!.url), jsonPath: plan.web!.jsonPath, headers: plan.web!.headers, secretHeaders: plan.web!.secretHeaders ?? {} },
          },
      interval: duration(plan.intervalMs),
      initialDelay: duration(plan.initialDelayMs),
      ...(plan.count === undefined ? {} : { count: plan.count }),
      successCondition: plan.successCondition,
      failureCondition: plan.failureCondition,
      failureLimit: plan.failureLimit,
      inconclusiveLimit: plan.inconclusiveLimit,
      consecutiveErrorLimit: plan.consecutiveErrorLimit,
    }),
  });
}
