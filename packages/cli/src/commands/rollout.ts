// flotilla get rollouts | rollout status | rollout pause|resume|approve|promote|abort: a
// deployment's staged rollouts (ARCHITECTURE §9), its waves, the regions of each with the
// revision it runs and its phase (a region rolled back with the revision it runs now, said so),
// the bake's time left, and the analyses of the current wave's bake with each region's last
// measurements.
import { type Duration, durationMs, timestampMs } from "@bufbuild/protobuf/wkt";
import {
  AnalysisPhase,
  RolloutFailurePolicy,
  RolloutSchema,
  RolloutState,
  type AnalysisMeasurement,
  type Rollout,
  type RolloutAnalysisStatus,
  type RolloutRegion,
  type RolloutWaveStatus,
} from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { formatDuration } from "@flotilla/runtime";
import type { Clients } from "../client.ts";
import { EXIT, ExitError } from "../errors.ts";
import { all, API_VERSION, readableJson } from "../kinds.ts";
import { age, structured, table, type OutputFormat } from "../output.ts";
import { currentRollout, FailedRollout, phaseName, rolloutStateName, verdict, watchDeployments } from "../status.ts";

type Out = (text: string) => void;

const ms = (d: Duration | undefined) => (d ? durationMs(d) : 0);

/** "2/3 rest": the wave under way (or waiting, or where the rollout stopped) of all. */
function waveCell(r: Rollout): string {
  const wave = r.waves[r.currentWave];
  return wave ? `${r.currentWave + 1}/${r.waves.length} ${wave.name}` : "-";
}

/** flotilla get rollouts [NAME]: newest first; NAME is a rollout (shop-7) or a deployment (its newest). */
export async function getRollouts(clients: Clients, name: string | undefined, format: OutputFormat, out: Out): Promise<void> {
  const rollouts =
    name !== undefined
      ? [(await clients.rollouts.getRollout({ id: name })).rollout!]
      : await all(async (pageToken) => {
          const r = await clients.rollouts.listRollouts({ pageSize: 1000, pageToken });
          return { items: r.rollouts, next: r.nextPageToken };
        });
  if (format === "json" || format === "yaml") {
    const docs = rollouts.map((r) => ({ apiVersion: API_VERSION, kind: "Rollout", ...readableJson(RolloutSchema, r) }));
    out(structured(name !== undefined ? docs[0] : { apiVersion: API_VERSION, kind: "List", items: docs }, format));
    return;
  }
  out(rolloutTable(rollouts));
}

/** One line per rollout: kubectl's columns, the reason last. */
export function rolloutTable(rollouts: Rollout[]): string {
  return table(
    ["NAME", "DEPLOYMENT", "REVISION", "STATE", "WAVE", "AGE", "REASON"],
    rollouts.map((r) => [r.id, r.deployment, String(r.toRevision), rolloutStateName(r.state), waveCell(r), age(r.createTime), r.reason || "-"]),
  );
}

const ENDED_AT_WAVE: Partial<Record<RolloutState, string>> = {
  [RolloutState.WAITING_APPROVAL]: "waiting for approval",
  [RolloutState.PAUSED]: "paused",
  [RolloutState.FAILED]: "failed",
  [RolloutState.ROLLED_BACK]: "rolled back",
  [RolloutState.ABORTED]: "aborted",
  [RolloutState.SUPERSEDED]: "superseded",
};

/** Where wave `i` stands: done, baking, progressing, waiting for approval, pending, … */
function waveState(r: Rollout, i: number): string {
  const wave = r.waves[i]!;
  if (wave.endTime || i < r.currentWave) return "done";
  if (i > r.currentWave) return wave.approval ? "pending (approval)" : "pending";
  const stopped = ENDED_AT_WAVE[r.state];
  if (stopped) return stopped;
  if (wave.runningSince) return "baking";
  return wave.startTime ? "progressing" : "pending";
}

/** The bake: how long it is, or while it runs the time left of it (from running_since + bake). */
function bakeCell(r: Rollout, wave: RolloutWaveStatus, i: number, now: number): string {
  const bake = ms(wave.bake);
  if (bake === 0) return "-";
  if (i !== r.currentWave || r.state !== RolloutState.PROGRESSING || !wave.runningSince || wave.endTime) return formatDuration(bake);
  const left = Math.max(0, Math.ceil((timestampMs(wave.runningSince) + bake - now) / 1000));
  return `${left}s left of ${formatDuration(bake)}`;
}

/** A rollout in full: its state and reason, then each wave's regions with the revision each is to run and its phase. */
export function renderRollout(r: Rollout, now: number): string {
  const policy = r.onFailure === RolloutFailurePolicy.PAUSE ? "PAUSE" : "ROLLBACK";
  const head = [
    `Rollout:     ${r.id} (deployment/${r.deployment} to revision ${r.toRevision})`,
    `State:       ${rolloutStateName(r.state)}, wave ${waveCell(r)}`,
    `Reason:      ${r.reason || "-"}`,
    `On failure:  ${policy}`,
  ];
  const rows = r.waves.flatMap((wave, i) =>
    wave.regions.map((region, j) => [
      j === 0 ? wave.name : "",
      j === 0 ? waveState(r, i) : "",
      j === 0 ? bakeCell(r, wave, i, now) : "",
      region.region,
      String(region.revision),
      regionPhase(region),
    ]),
  );
  const waves = table(["WAVE", "STATE", "BAKE", "REGION", "REVISION", "PHASE"], rows)
    .trimEnd()
    .split("\n")
    .map((l) => `  ${l}`);
  const current = r.waves[r.currentWave];
  const analysis = current?.analyses.length ? [`Analysis of wave ${current.name}:`, ...indent(analysisTable(current.analyses))] : [];
  return `${[...head, "Waves:", ...waves, ...analysis].join("\n")}\n`;
}

/** What a region runs is in its phase; one the rollout gave its previous spec back says so, as its revision is not the rollout's. */
function regionPhase(region: RolloutRegion): string {
  return region.rolledBack ? `${phaseName(region.phase)} (rolled back)` : phaseName(region.phase);
}

/** Measurements shown per (analysis, region): the newest. */
const LAST_MEASUREMENTS = 3;

/** One line per analysis and region: its phase, its last measurements (value and phase, oldest first), its conditions. */
export function analysisTable(analyses: readonly RolloutAnalysisStatus[]): string {
  const rows = analyses.flatMap((a) =>
    a.regions.map((region, j) => [
      j === 0 ? a.name : "",
      region.region,
      analysisPhaseName(region.phase),
      region.measurements.slice(-LAST_MEASUREMENTS).map(measurementCell).join(", ") || "-",
      j === 0 ? conditions(a) : "",
    ]),
  );
  return table(["ANALYSIS", "REGION", "PHASE", "LAST MEASUREMENTS", "CONDITION"], rows);
}

export function analysisPhaseName(phase: AnalysisPhase): string {
  return AnalysisPhase[phase] ?? "UNSPECIFIED";
}

/** "0.0123 SUCCESSFUL", "no data INCONCLUSIVE" or "error (connection refused)": four significant digits, an error's text cut short. */
function measurementCell(m: AnalysisMeasurement): string {
  if (m.result.case === "value") return `${Number(m.result.value.toPrecision(4))} ${analysisPhaseName(m.phase)}`;
  if (m.result.case !== "error") return `no data ${analysisPhaseName(m.phase)}`;
  const error = m.result.value;
  return `error (${error.length > 40 ? `${error.slice(0, 39)}…` : error})`;
}

function conditions(a: RolloutAnalysisStatus): string {
  return [a.successCondition && `success when ${a.successCondition}`, a.failureCondition && `failure when ${a.failureCondition}`].filter(Boolean).join(", ");
}

export interface StatusOptions {
  /** Follow until the rollout ends; false: print once. */
  watch: boolean;
  timeoutMs: number;
  /** Redraw in place (a terminal), and every second for the bake's countdown. */
  redraw: boolean;
}

/**
 * flotilla rollout status NAME: the deployment's current rollout, redrawn on each change until
 * it ends (exit 0 SUCCEEDED, 1 failed or rolled back, 2 on timeout). A deployment without a
 * staged rollout is followed as `wait` follows it. Printed once (watch false): exit 0 done,
 * 1 failed, 2 still under way.
 */
export async function rolloutStatus(clients: Clients, name: string, options: StatusOptions, write: Out): Promise<void> {
  // NOT_FOUND at once for a deployment that does not exist, rather than a wait for its status.
  await clients.deployments.getDeployment({ id: name });
  let shown = "";
  let shownLines = 0;
  let last: (() => string) | undefined;
  const draw = () => {
    const text = last!();
    if (text === shown) return;
    write(options.redraw && shownLines > 0 ? `\x1b[${shownLines}F\x1b[J${text}` : text);
    shown = text;
    shownLines = text.split("\n").length - 1;
  };
  const ticker = options.redraw && options.watch ? setInterval(() => last && draw(), 1000) : undefined;
  let ended: "running" | "waiting" = "waiting";
  try {
    await watchDeployments(clients, [name], options.timeoutMs, (status) => {
      const v = verdict(status);
      const rollout = currentRollout(status);
      last = () =>
        rollout
          ? renderRollout(rollout, Date.now())
          : v.state === "running"
            ? `deployment/${name} is RUNNING\n`
            : v.state === "waiting"
              ? `deployment/${name}: ${v.summary}\n`
              : "";
      draw();
      if (v.state === "failed") throw new FailedRollout(v.message);
      ended = v.state;
      return v.state === "running" || !options.watch;
    });
  } catch (error) {
    if (error instanceof FailedRollout) throw new ExitError(`error: ${error.message}`, EXIT.failed);
    throw error;
  } finally {
    clearInterval(ticker);
  }
  if (ended === "waiting") throw new ExitError("", EXIT.timeout);
}

export const CONTROLS = ["pause", "resume", "approve", "promote", "abort"] as const;
export type Control = (typeof CONTROLS)[number];

const CONTROL_DESCRIPTIONS: Record<Control, string> = {
  pause: "stop the rollout where it is: no region moves until it is resumed",
  resume: "go on with a paused (or failed and frozen) rollout; the wave's deadline starts again",
  approve: "let the wave that waits for approval start",
  promote: "skip the rest of the current wave's bake, or its approval",
  abort: "end the rollout: the regions it moved get their previous revision back",
};

export const controlDescription = (control: Control) => CONTROL_DESCRIPTIONS[control];

/** A control on NAME (a deployment's newest rollout, or a rollout by its id); prints the rollout's new state. */
export async function controlRollout(clients: Clients, control: Control, name: string, message: string, out: Out): Promise<void> {
  const request = { id: name, message };
  const call = {
    pause: () => clients.rollouts.pauseRollout(request),
    resume: () => clients.rollouts.resumeRollout(request),
    approve: () => clients.rollouts.approveRollout(request),
    promote: () => clients.rollouts.promoteRollout(request),
    abort: () => clients.rollouts.abortRollout(request),
  }[control];
  const r = (await call()).rollout!;
  out(`rollout/${r.id} ${rolloutStateName(r.state)}, wave ${waveCell(r)}: ${r.reason || "-"}`);
}

/** describe deployment: its newest rollout in full, then the last ones. */
export async function rolloutLines(clients: Clients, deployment: string, now: number): Promise<string[]> {
  const { rollouts } = await clients.rollouts.listRollouts({ deployment, pageSize: 5 });
  if (rollouts.length === 0) return [];
  return [...renderRollout(rollouts[0]!, now).trimEnd().split("\n"), "Recent rollouts:", ...indent(rolloutTable(rollouts))];
}

const indent = (text: string) =>
  text
    .trimEnd()
    .split("\n")
    .map((l) => `  ${l}`);

type WaveJson = { name: string; regions?: string[]; selector?: string; maxParallel?: string; bake?: string; approval?: boolean; progressDeadline?: string };

/** describe deployment: a strategy a line per wave (as a manifest writes it), then its failure policy. */
export function strategyLines(strategy: { waves?: WaveJson[]; onFailure?: string }): string[] {
  const waves = (strategy.waves ?? []).map((w) => {
    const which = [w.regions?.length ? `regions ${w.regions.join(", ")}` : "", w.selector ? `selector ${w.selector}` : ""].filter(Boolean);
    const parts = [
      which.join(" or ") || "every placement region not in a wave before",
      w.maxParallel ? `${w.maxParallel} at a time` : "",
      w.bake ? `bake ${w.bake}` : "",
      w.approval ? "approval" : "",
      w.progressDeadline ? `progress deadline ${w.progressDeadline}` : "",
    ];
    return `${w.name}: ${parts.filter(Boolean).join(", ")}`;
  });
  return [...waves, `on failure: ${strategy.onFailure ?? "ROLLBACK"}`];
}
