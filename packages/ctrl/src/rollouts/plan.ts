// Wave planning (ARCHITECTURE §9): the waves a strategy makes of a deployment's placement
// regions, and which regions of a wave move next. Decided here, with the rest of the state
// machine (gate.ts); the store keeps the plan as the rollout row's JSON.
import { durationMs } from "@bufbuild/protobuf/wkt";
import type { RolloutStrategy } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { parseLabelSelector } from "@flotilla/labels";
import { planAnalysis, type PlacedRegion, type WavePlan, type WaveRegion } from "@flotilla/store";

export const DEFAULT_PROGRESS_DEADLINE_MS = 10 * 60_000;

/**
 * The waves a strategy makes of the placement regions, in order: each wave takes the
 * placement regions it names or selects that no earlier wave took; a wave naming none takes
 * the rest; placement regions left over form a last wave. Waves left empty are dropped.
 */
export function planWaves(strategy: RolloutStrategy, placed: PlacedRegion[]): WavePlan[] {
  const taken = new Set<string>();
  const waves: WavePlan[] = [];
  const everyWave = strategy.analysis.map(planAnalysis);
  const add = (wave: Omit<WavePlan, "regions" | "maxParallel">, maxParallel: string, members: PlacedRegion[]) => {
    for (const r of members) taken.add(r.name);
    if (members.length === 0) return;
    waves.push({
      ...wave,
      regions: members.map((r) => ({ region: r.name, regionId: r.id, moved: false })),
      maxParallel: parallelism(maxParallel, members.length),
    });
  };
  for (const wave of strategy.waves) {
    const selector = wave.selector === "" ? undefined : parseLabelSelector(wave.selector);
    const open = placed.filter((r) => !taken.has(r.name));
    const members = wave.regions.length === 0 && !selector ? open : open.filter((r) => wave.regions.includes(r.name) || selector?.(r.labels));
    add(
      {
        name: wave.name,
        bakeMs: wave.bake ? durationMs(wave.bake) : 0,
        approval: wave.approval,
        deadlineMs: wave.progressDeadline ? durationMs(wave.progressDeadline) : DEFAULT_PROGRESS_DEADLINE_MS,
        analysis: [...everyWave, ...wave.analysis.map(planAnalysis)],
      },
      wave.maxParallel,
      members,
    );
  }
  add(
    { name: "rest", bakeMs: 0, approval: false, deadlineMs: DEFAULT_PROGRESS_DEADLINE_MS, analysis: everyWave },
    "",
    placed.filter((r) => !taken.has(r.name)),
  );
  return waves;
}

/** "2" → 2, "50%" of 3 → 2 (rounded up, at least 1), "" → every region. */
export function parallelism(maxParallel: string, regions: number): number {
  if (maxParallel === "") return regions;
  const percent = /^(\d+)%$/.exec(maxParallel);
  const n = percent ? Math.ceil((regions * Number(percent[1])) / 100) : Number(maxParallel);
  return Math.max(1, Math.min(regions, n));
}

/** The regions of `wave` to move next: up to its parallelism, counting those moved and not yet done. */
export function nextBatch(wave: WavePlan): WaveRegion[] {
  const moved = wave.regions.filter((r) => r.moved).length;
  if (moved % wave.maxParallel !== 0 && moved < wave.regions.length) return [];
  return wave.regions.filter((r) => !r.moved).slice(0, wave.maxParallel);
}
