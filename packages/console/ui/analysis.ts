// A wave's analyses as the console shows them: for each analysis, each region's measurements
// of the bake over time against the condition's threshold, a small chart per region. The values
// come from the rollout as the status stream sends it (RolloutWaveStatus.analyses: the current
// wave's latest bake), so the chart grows as measurements arrive, with no call of its own.
import {
  AnalysisPhase,
  type AnalysisMeasurement,
  type RolloutAnalysisRegion,
  type RolloutAnalysisStatus,
  type RolloutWaveStatus,
} from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { html } from "htm/preact";
import { msOf, span, spanOf } from "./format.ts";

export const analysisPhaseName = (phase: AnalysisPhase) => AnalysisPhase[phase] ?? "UNSPECIFIED";

const WIDTH = 260;
const HEIGHT = 96;
/** Room for the value axis' labels (left) and the time axis' (below). */
const LEFT = 44;
const BOTTOM = 16;
const TOP = 6;
const RIGHT = 8;

/**
 * The threshold a condition compares `result` with, when it is one comparison of result with a
 * number ("result < 0.01", "result >= 2"): the line the chart draws. Another condition (logic,
 * arithmetic, functions) has no one line; the chart then shows the values alone.
 */
export function thresholdOf(condition: string): { op: string; value: number } | undefined {
  const m = /^\s*result\s*(<=|>=|<|>|==|!=)\s*(-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)\s*$/i.exec(condition);
  return m ? { op: m[1]!, value: Number(m[2]) } : undefined;
}

/** Four significant digits: a ratio's noise says nothing to the person reading the chart. */
const short = (n: number) => String(Number(n.toPrecision(4)));

function measurementText(m: AnalysisMeasurement): string {
  if (m.result.case === "value") return `${short(m.result.value)} ${analysisPhaseName(m.phase)}`;
  return m.result.case === "error" ? `error: ${m.result.value}` : `no data ${analysisPhaseName(m.phase)}`;
}

/** One region's measurements over the bake, each a point coloured by its phase (an error a cross on the time axis), against the threshold. */
function Chart({ analysis, region, wave }: { analysis: RolloutAnalysisStatus; region: RolloutAnalysisRegion; wave: RolloutWaveStatus }) {
  const start = msOf(wave.runningSince) ?? 0;
  const times = region.measurements.map((m) => msOf(m.takenAt) ?? start);
  const end = Math.max(start + spanOf(wave.bake), ...times, start + 1000);
  const thresholds = [analysis.failureCondition, analysis.successCondition].map(thresholdOf).filter((t) => t !== undefined);
  const values = region.measurements.flatMap((m) => (m.result.case === "value" ? [m.result.value] : []));
  const all = [...values, ...thresholds.map((t) => t.value), 0];
  const lo = Math.min(...all);
  const hi = Math.max(...all) === lo ? lo + 1 : Math.max(...all);
  const top = hi + (hi - lo) * 0.1;
  const x = (t: number) => LEFT + ((t - start) / (end - start)) * (WIDTH - LEFT - RIGHT);
  const y = (v: number) => TOP + (1 - (v - lo) / (top - lo)) * (HEIGHT - TOP - BOTTOM);
  const base = HEIGHT - BOTTOM;
  const points = region.measurements.flatMap((m, i) => (m.result.case === "value" ? [[x(times[i]!), y(m.result.value)] as const] : []));
  const last = region.measurements.at(-1);
  const label = `${analysis.name} in ${region.region}: ${analysisPhaseName(region.phase)}, ${region.measurements.length} measurement${region.measurements.length === 1 ? "" : "s"}${last ? `, last ${measurementText(last)}` : ""}${thresholds.length ? `; threshold ${thresholds.map((t) => `${t.op} ${short(t.value)}`).join(", ")}` : ""}`;
  return html`<figure class="analysis-chart" data-analysis=${analysis.name} data-region=${region.region} data-phase=${analysisPhaseName(region.phase)}>
    <svg viewBox=${`0 0 ${WIDTH} ${HEIGHT}`} width=${WIDTH} height=${HEIGHT} role="img" aria-label=${label}>
      <line class="axis" x1=${LEFT} y1=${base} x2=${WIDTH - RIGHT} y2=${base} />
      <line class="axis" x1=${LEFT} y1=${TOP} x2=${LEFT} y2=${base} />
      <text class="tick" x=${LEFT - 4} y=${y(top) + 8} text-anchor="end">${short(top)}</text>
      <text class="tick" x=${LEFT - 4} y=${base} text-anchor="end">${short(lo)}</text>
      <text class="tick" x=${LEFT} y=${HEIGHT - 3}>0s</text>
      <text class="tick" x=${WIDTH - RIGHT} y=${HEIGHT - 3} text-anchor="end">${span(end - start)}</text>
      ${thresholds.map(
        (t) => html`<line class="threshold" data-threshold=${t.value} x1=${LEFT} y1=${y(t.value)} x2=${WIDTH - RIGHT} y2=${y(t.value)} />
          <text class="threshold-label" x=${WIDTH - RIGHT - 2} y=${y(t.value) - 3} text-anchor="end">${t.op} ${short(t.value)}</text>`,
      )}
      ${points.length > 1 && html`<polyline class="values" points=${points.map(([px, py]) => `${px},${py}`).join(" ")} />`}
      ${region.measurements.map((m, i) =>
        m.result.case === "value"
          ? html`<circle class=${`point point-${analysisPhaseName(m.phase).toLowerCase()}`} cx=${x(times[i]!)} cy=${y(m.result.value)} r="3.5"><title>#${m.index}: ${measurementText(m)}</title></circle>`
          : html`<text class="point point-error" x=${x(times[i]!)} y=${base - 2} text-anchor="middle">×<title>#${m.index}: ${measurementText(m)}</title></text>`,
      )}
    </svg>
    <figcaption><strong>${region.region}</strong> <span class=${`analysis-phase analysis-${analysisPhaseName(region.phase).toLowerCase()}`}>${analysisPhaseName(region.phase)}</span>${last ? html` <span class="hint">last ${measurementText(last)}</span>` : ""}</figcaption>
  </figure>`;
}

/** The analyses of a wave's bake: per analysis its conditions, then a chart per region. */
export function Analyses({ wave }: { wave: RolloutWaveStatus }) {
  if (wave.analyses.length === 0) return null;
  return html`<section class="analyses" aria-label=${`Analyses of wave ${wave.name}`}>
    <h4>Analysis of wave ${wave.name}</h4>
    ${wave.analyses.map(
      (a) => html`<div class="analysis" data-analysis=${a.name}>
        <p><strong>${a.name}</strong> <span class="hint">${[a.successCondition && `success when ${a.successCondition}`, a.failureCondition && `failure when ${a.failureCondition}`].filter(Boolean).join(", ")}</span></p>
        <div class="charts">${a.regions.map((r) => html`<${Chart} analysis=${a} region=${r} wave=${wave} />`)}</div>
      </div>`,
    )}
  </section>`;
}
