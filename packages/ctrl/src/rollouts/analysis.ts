// Judging a wave's analyses (docs/rollout-analysis.md), with Argo Rollouts' AnalysisRun
// semantics: pure functions of a wave's plan and the measurements stored for its bake. The
// gate (gate.ts) acts on the verdict; the agents measure (agent/src/analysis.ts); ctrl's
// ReportMeasurements keeps only measurements of the revision the region is to run.
//
// A measurement is SUCCESSFUL, FAILED or INCONCLUSIVE by its conditions (both set: failure
// true → FAILED, success true → SUCCESSFUL, neither → INCONCLUSIVE; only success: false →
// FAILED; only failure: false → SUCCESSFUL), INCONCLUSIVE without data (the query selected
// nothing: nothing shows the revision good or bad), or ERROR (the query failed, timed out, or
// returned more than one sample).
//
// An analysis in one region, from its measurements in index order:
//   PENDING       no measurement yet
//   RUNNING       measured, no limit passed, not done
//   FAILED        failed measurements > failureLimit
//   INCONCLUSIVE  inconclusive measurements > inconclusiveLimit
//   ERROR         consecutive errors > consecutiveErrorLimit (any other outcome resets the run)
//   SUCCESSFUL    `count` measurements that are not errors (errors do not count toward it), or,
//                 without a count, the bake is over and at least one was taken
// The checks run in that order, so a limit passed wins over a count reached.
//
// A wave's verdict is the worst of every (analysis, region): FAILED, ERROR, INCONCLUSIVE,
// PENDING, RUNNING, SUCCESSFUL, in that order; a wave without analyses is SUCCESSFUL.
//
// Invariants: no measurement, no pass (PENDING is never SUCCESSFUL, not even once the bake is
// over: an agent that never measures holds the wave until the analysis deadline fails it);
// measurements of another bake (an earlier one of the wave, before a reset or a resume) are not
// this bake's; a verdict other than PENDING or RUNNING is final for the bake.
import type { AnalysisPlan, BakeKey, StoredMeasurement, StoredRollout, WavePlan } from "@flotilla/store";
import { compileCondition } from "./condition.ts";

export type MeasurementPhase = "SUCCESSFUL" | "FAILED" | "INCONCLUSIVE" | "ERROR";
export type AnalysisPhase = "PENDING" | "RUNNING" | MeasurementPhase;

/** From worst to best: a wave's verdict is the first of these any of its analyses has. */
const WORST_FIRST: readonly AnalysisPhase[] = ["FAILED", "ERROR", "INCONCLUSIVE", "PENDING", "RUNNING", "SUCCESSFUL"];

/** Compiled conditions, by their text: a plan's are compiled once per process. */
const compiled = new Map<string, (result: number) => boolean>();
function condition(text: string): (result: number) => boolean {
  let predicate = compiled.get(text);
  if (!predicate) {
    predicate = compileCondition(text);
    if (compiled.size > 10_000) compiled.clear();
    compiled.set(text, predicate);
  }
  return predicate;
}

/** What a measurement means under the analysis' conditions. */
export function judgeMeasurement(plan: AnalysisPlan, m: Pick<StoredMeasurement, "value" | "error">): MeasurementPhase {
  if (m.error !== undefined) return "ERROR";
  if (m.value === undefined) return "INCONCLUSIVE";
  const value = m.value;
  const hasSuccess = plan.successCondition !== "";
  const hasFailure = plan.failureCondition !== "";
  let success = hasSuccess && condition(plan.successCondition)(value);
  let failure = hasFailure && condition(plan.failureCondition)(value);
  if (!hasSuccess && !hasFailure) return "SUCCESSFUL";
  if (!hasFailure) failure = !success;
  if (!hasSuccess) success = !failure;
  if (failure) return "FAILED";
  return success ? "SUCCESSFUL" : "INCONCLUSIVE";
}

/** An analysis in one region of a wave. */
export interface RegionAnalysis {
  analysis: string;
  region: string;
  phase: AnalysisPhase;
  successful: number;
  failed: number;
  inconclusive: number;
  errors: number;
  consecutiveErrors: number;
  /** The newest measurement, if any, with its phase. */
  last?: { value?: number; error?: string; phase: MeasurementPhase; index: number };
  /** Why it is in its phase, for a person. */
  reason: string;
}

/** Assesses `plan` in `region` from that region's measurements of it (any order). */
export function assessRegion(plan: AnalysisPlan, region: string, measurements: readonly StoredMeasurement[], bakeOver: boolean): RegionAnalysis {
  const ordered = [...measurements].sort((a, b) => a.index - b.index);
  const run: RegionAnalysis = {
    analysis: plan.name,
    region,
    phase: "PENDING",
    successful: 0,
    failed: 0,
    inconclusive: 0,
    errors: 0,
    consecutiveErrors: 0,
    reason: "",
  };
  for (const m of ordered) {
    const phase = judgeMeasurement(plan, m);
    run.last = { ...(m.value !== undefined ? { value: m.value } : {}), ...(m.error !== undefined ? { error: m.error } : {}), phase, index: m.index };
    if (phase === "ERROR") {
      run.errors++;
      run.consecutiveErrors++;
      continue;
    }
    run.consecutiveErrors = 0;
    if (phase === "SUCCESSFUL") run.successful++;
    else if (phase === "FAILED") run.failed++;
    else run.inconclusive++;
  }
  const at = `analysis ${plan.name} in ${region}`;
  const last = run.last ? `; last ${describeLast(plan, run.last)}` : "";
  const taken = run.successful + run.failed + run.inconclusive;
  if (ordered.length === 0) {
    run.reason = `${at}: no measurement yet`;
  } else if (run.failed > plan.failureLimit) {
    run.phase = "FAILED";
    run.reason = `${at} failed: ${run.failed} failed measurement${run.failed === 1 ? "" : "s"} (failureLimit ${plan.failureLimit})${last}`;
  } else if (run.inconclusive > plan.inconclusiveLimit) {
    run.phase = "INCONCLUSIVE";
    run.reason = `${at} inconclusive: ${run.inconclusive} inconclusive measurement${run.inconclusive === 1 ? "" : "s"} (inconclusiveLimit ${plan.inconclusiveLimit})${last}`;
  } else if (run.consecutiveErrors > plan.consecutiveErrorLimit) {
    run.phase = "ERROR";
    run.reason = `${at} errored: ${run.consecutiveErrors} consecutive errors (consecutiveErrorLimit ${plan.consecutiveErrorLimit})${last}`;
  } else if (plan.count !== undefined ? taken >= plan.count : bakeOver && taken >= 1) {
    run.phase = "SUCCESSFUL";
    run.reason = `${at} successful: ${run.successful} of ${taken} measurements successful${last}`;
  } else {
    run.phase = "RUNNING";
    run.reason = `${at}: ${taken}${plan.count !== undefined ? ` of ${plan.count}` : ""} measurements${last}`;
  }
  return run;
}

function describeLast(plan: AnalysisPlan, last: NonNullable<RegionAnalysis["last"]>): string {
  if (last.phase === "ERROR") return `error: ${last.error}`;
  if (last.value === undefined) return "result: no data (the query selected nothing)";
  const conditions = [
    plan.successCondition && `success when ${plan.successCondition}`,
    plan.failureCondition && `failure when ${plan.failureCondition}`,
  ].filter(Boolean);
  // Four significant digits: a ratio's noise says nothing to the person reading the reason.
  return `result ${Number(last.value!.toPrecision(4))} ${last.phase} (${conditions.join(", ")})`;
}

export interface WaveAnalysis {
  phase: AnalysisPhase;
  /** The worst (analysis, region)'s reason; empty without analyses. */
  reason: string;
  regions: RegionAnalysis[];
}

/** The verdict on the analyses of `wave`'s bake from `measurements` of that bake (others are left out). */
export function judgeWave(wave: WavePlan, measurements: readonly StoredMeasurement[], bakeOver: boolean): WaveAnalysis {
  const plans = wave.analysis ?? [];
  const regions: RegionAnalysis[] = [];
  for (const plan of plans) {
    for (const { region } of wave.regions) {
      const mine = measurements.filter((m) => m.analysis === plan.name && m.region === region && m.bakeStart === wave.runningSince);
      regions.push(assessRegion(plan, region, mine, bakeOver));
    }
  }
  if (regions.length === 0) return { phase: "SUCCESSFUL", reason: "", regions };
  const worst = regions.reduce((a, b) => (WORST_FIRST.indexOf(b.phase) < WORST_FIRST.indexOf(a.phase) ? b : a));
  return { phase: worst.phase, reason: worst.reason, regions };
}

/**
 * When a bake's analyses must have reached a verdict: the bake's end or the last scheduled
 * measurement, whichever is later, plus the wave's progress deadline (for the agents to report).
 * Past it, an analysis still PENDING or RUNNING fails the wave: a missing measurement never passes.
 */
export function analysisDeadline(wave: WavePlan): number | undefined {
  if (wave.runningSince === undefined || !wave.analysis?.length) return undefined;
  const lastScheduled = Math.max(...wave.analysis.map((a) => a.initialDelayMs + Math.max(0, (a.count ?? 1) - 1) * a.intervalMs));
  return wave.runningSince + Math.max(wave.bakeMs, lastScheduled) + wave.deadlineMs;
}

/** The bake of the rollout's current wave when it is under way and has analyses (whose measurements its judgement needs). */
export function bakeUnderAnalysis(rollout: StoredRollout): BakeKey[] {
  const wave = rollout.waves[rollout.currentWave]!;
  if (wave.runningSince === undefined || !wave.analysis?.length) return [];
  return [{ rolloutId: rollout.id, wave: rollout.currentWave, bakeStart: wave.runningSince }];
}

/** Whether the phase ends the analysis for its bake (no more measurements needed). */
export function isFinal(phase: AnalysisPhase): boolean {
  return phase !== "PENDING" && phase !== "RUNNING";
}

/** What a query or URL template may name, each written {{name}}. */
export const TEMPLATE_NAMES = ["region", "namespace", "deployment", "revision"] as const;
export type TemplateValues = Record<(typeof TEMPLATE_NAMES)[number], string>;

const TEMPLATE = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/** The names in `text`'s {{...}} that are not TEMPLATE_NAMES. */
export function unknownTemplateNames(text: string): string[] {
  return [...text.matchAll(TEMPLATE)].map((m) => m[1]!).filter((name) => !(TEMPLATE_NAMES as readonly string[]).includes(name));
}

/** `text` with its {{name}}s replaced by `values`. */
export function renderTemplate(text: string, values: TemplateValues): string {
  return text.replace(TEMPLATE, (whole, name: string) => values[name as keyof TemplateValues] ?? whole);
}
