// Staged rollouts (ARCHITECTURE §9) as the console shows them: a rollout's waves left to right,
// each region a tile with its phase (in words, coloured too) and the revision it runs (a region
// the rollout gave its previous spec back: the revision it runs now, marked rolled back, never
// coloured as its phase, so a failed revision never looks like a healthy one); the current
// wave's analyses, each region's measurements charted against the threshold (analysis.ts); the
// bake's countdown, ticking in the page from the wave's running_since and bake (no call per
// tick); the operators' controls, confirmed, for deployers and admins. Everything here comes
// from the status stream (a deployment's newest rollout, sent again on each transition),
// except the ended rollouts the Rollouts view lists.
import { RolloutState, type Rollout, type RolloutWaveStatus } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { ACTIVE_ROLLOUT_STATES } from "@flotilla/store/rollout-states";
import { html } from "htm/preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, canWrite, problem, type Fleet, type Session } from "./api.ts";
import { Analyses } from "./analysis.ts";
import { msOf, phaseName, span, spanOf, Time } from "./format.ts";

/** States in which a rollout may still move regions, and the controls apply. */
const ACTIVE = new Set(ACTIVE_ROLLOUT_STATES);

const stateName = (state: RolloutState) => RolloutState[state] ?? "UNSPECIFIED";

export function StateBadge({ state }: { state: RolloutState }) {
  const name = stateName(state);
  return html`<span class=${`state state-${name.toLowerCase()}`}>${name}</span>`;
}

/** The current time, moving on every second while mounted. */
function useNow(): number {
  const [now, setNow] = useState(Date.now);
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  return now;
}

/** The time left in a bake, counted here from its start. */
function Countdown({ until, bakeMs }: { until: number; bakeMs: number }) {
  const left = until - useNow();
  return left > 0
    ? html`<span role="timer" class="countdown">baking: ${span(left)} left of ${span(bakeMs)}</span>`
    : html`<span>baked ${span(bakeMs)}, moving on</span>`;
}

/** Where a wave stands, in words. */
function WaveProgress({ rollout, wave, index }: { rollout: Rollout; wave: RolloutWaveStatus; index: number }) {
  if (wave.endTime) return html`<span>done <${Time} ms=${msOf(wave.endTime)} /></span>`;
  if (index > rollout.currentWave) return html`<span>not started${wave.approval ? ", needs approval" : ""}</span>`;
  switch (rollout.state) {
    case RolloutState.WAITING_APPROVAL:
      return html`<span>waiting for approval</span>`;
    case RolloutState.PROGRESSING: {
      const since = msOf(wave.runningSince);
      if (since !== undefined) return html`<${Countdown} until=${since + spanOf(wave.bake)} bakeMs=${spanOf(wave.bake)} />`;
      return html`<span>moving since <${Time} ms=${msOf(wave.startTime)} /></span>`;
    }
    default:
      return html`<span>stopped here: ${stateName(rollout.state)}</span>`;
  }
}

/**
 * The waves left to right, each region a tile. A region's phase is what it runs now: shown
 * for its deployment's newest rollout only (an older one's regions have moved on since).
 */
function Waves({ rollout, newest }: { rollout: Rollout; newest: boolean }) {
  return html`<ol class="waves" aria-label=${`Waves of rollout ${rollout.id}`}>
    ${rollout.waves.map(
      (wave, i) => html`<li class=${`wave${i === rollout.currentWave && ACTIVE.has(rollout.state) ? " current" : ""}`} data-wave=${wave.name}>
        <h4>${i + 1}. ${wave.name}</h4>
        <p class="wave-state"><${WaveProgress} rollout=${rollout} wave=${wave} index=${i} /></p>
        <p class="hint">${spanOf(wave.bake) > 0 ? `bake ${span(spanOf(wave.bake))}` : "no bake"}${wave.approval ? ", approval" : ""}${wave.maxParallel ? `, ${wave.maxParallel} at a time` : ""}</p>
        <ul class="tiles">
          ${wave.regions.map((r) => {
            const phase = phaseName(r.phase);
            if (r.rolledBack)
              return html`<li class="tile rolled-back" data-region=${r.region}>
                <strong>${r.region}</strong>
                <span class="tile-phase">rolled back</span>
                <span>${r.revision ? `revision ${r.revision}${newest ? ` ${phase}` : ""}` : "removed"}</span>
                <span class="hint">not revision ${String(rollout.toRevision)}</span>
              </li>`;
            return html`<li class=${`tile${newest ? ` phase-${phase.toLowerCase()}` : ""}`} data-region=${r.region}>
              <strong>${r.region}</strong>
              ${newest && html`<span class="tile-phase">${phase}</span>`}
              <span>${r.revision ? `revision ${r.revision}` : "no revision yet"}</span>
            </li>`;
          })}
        </ul>
      </li>`,
    )}
  </ol>`;
}

type Request = { id: string; message: string };
interface Control {
  label: string;
  shown: (r: Rollout) => boolean;
  /** What the confirmation asks. */
  question: (r: Rollout, wave: string) => string;
  call: (req: Request) => Promise<{ rollout?: Rollout }>;
}

const CONTROLS: Control[] = [
  {
    label: "Approve",
    shown: (r) => r.state === RolloutState.WAITING_APPROVAL,
    question: (r, wave) => `Approve wave ${wave} of rollout ${r.id}? Its regions move to revision ${r.toRevision}.`,
    call: (req) => api.rollouts.approveRollout(req),
  },
  {
    label: "Promote",
    shown: (r) => r.state === RolloutState.PROGRESSING && r.waves[r.currentWave]?.runningSince !== undefined,
    question: (r, wave) => `Skip the rest of wave ${wave}'s bake in rollout ${r.id}?`,
    call: (req) => api.rollouts.promoteRollout(req),
  },
  {
    label: "Pause",
    shown: (r) => r.state === RolloutState.PROGRESSING || r.state === RolloutState.WAITING_APPROVAL,
    question: (r, wave) => `Pause rollout ${r.id} at wave ${wave}? No region moves until it is resumed.`,
    call: (req) => api.rollouts.pauseRollout(req),
  },
  {
    label: "Resume",
    shown: (r) => r.state === RolloutState.PAUSED || r.state === RolloutState.FAILED,
    question: (r, wave) => `Resume rollout ${r.id} at wave ${wave}? Its deadline starts again.`,
    call: (req) => api.rollouts.resumeRollout(req),
  },
  {
    label: "Abort",
    shown: (r) => ACTIVE.has(r.state),
    question: (r) => `Abort rollout ${r.id}? The regions it moved get their previous revision back.`,
    call: (req) => api.rollouts.abortRollout(req),
  },
];

/** One rollout: its state, its waves, and (for deployers) the controls that fit its state. */
export function RolloutCard({ rollout, newest, session }: { rollout: Rollout; newest: boolean; session: Session }) {
  const [error, setError] = useState<string | undefined>();
  const [notice, setNotice] = useState<string | undefined>();
  const wave = rollout.waves[rollout.currentWave]?.name ?? "";
  const act = async (control: Control) => {
    if (!confirm(control.question(rollout, wave))) return;
    try {
      const { rollout: after } = await control.call({ id: rollout.id, message: "from the console" });
      setNotice(`${control.label}: rollout ${rollout.id} is ${after ? stateName(after.state) : "changed"}.`);
      setError(undefined);
    } catch (e) {
      setError(`${control.label} refused: ${problem(e)}`);
      setNotice(undefined);
    }
  };
  const controls = canWrite(session) ? CONTROLS.filter((c) => c.shown(rollout)) : [];
  return html`<article class="rollout" data-rollout=${rollout.id} aria-labelledby=${`rollout-${rollout.id}`}>
    <h3 id=${`rollout-${rollout.id}`}>Rollout ${rollout.id}</h3>
    <p>
      <${StateBadge} state=${rollout.state} /> <a href=${`#/deployments/${rollout.deployment}`}>${rollout.deployment}</a> to revision ${String(rollout.toRevision)},
      started <${Time} ms=${msOf(rollout.createTime)} />${rollout.reason ? html`: <span class="reason">${rollout.reason}</span>` : ""}
    </p>
    ${controls.length > 0 && html`<p class="controls">${controls.map((c) => html`<button type="button" onClick=${() => act(c)}>${c.label}</button>`)}</p>`}
    ${notice && html`<p role="status" class="notice">${notice}</p>`}
    ${error && html`<p role="alert" class="error">${error}</p>`}
    <${Waves} rollout=${rollout} newest=${newest} />
    ${rollout.waves[rollout.currentWave] && html`<${Analyses} wave=${rollout.waves[rollout.currentWave]} />`}
  </article>`;
}

const PAGE_SIZE = 50;

/**
 * Rollouts, newest first: the active ones live from the stream, the ended ones as
 * ListRollouts reads them (read again when a rollout starts, so a superseded one shows so);
 * filtered by state, and by deployment when `deployment` is set.
 */
export function RolloutsView({ fleet, session, deployment }: { fleet: Fleet; session: Session; deployment: string }) {
  const [filter, setFilter] = useState("");
  const [listed, setListed] = useState<Rollout[]>([]);
  const [next, setNext] = useState("");
  const [error, setError] = useState<string | undefined>();
  const live = [...fleet.rollouts.values()].filter((r) => !deployment || r.deployment === deployment);
  // (In the fleet's order, which a deployment's next rollout keeps: no sort on every frame.)
  const liveIds = live.map((r) => r.id).join(" ");
  const state = filter === "ACTIVE" ? undefined : (RolloutState[filter as keyof typeof RolloutState] ?? RolloutState.UNSPECIFIED);
  // Only the latest read counts: an older one answering late would show another filter's rollouts.
  const latest = useRef(0);
  const load = (pageToken: string, more: Rollout[]) => {
    const read = ++latest.current;
    if (state === undefined) return setListed([]);
    api.rollouts.listRollouts({ deployment, state, pageSize: PAGE_SIZE, pageToken }).then(
      (page) => {
        if (read !== latest.current) return;
        setListed([...more, ...page.rollouts]);
        setNext(page.nextPageToken);
        setError(undefined);
      },
      (e) => read === latest.current && setError(problem(e)),
    );
  };
  useEffect(() => load("", []), [filter, deployment, liveIds]);
  const byId = new Map(listed.map((r) => [r.id, r]));
  for (const r of live) if ((byId.get(r.id)?.generation ?? -1n) <= r.generation) byId.set(r.id, r);
  const shown = [...byId.values()]
    .filter((r) => (filter === "ACTIVE" ? ACTIVE.has(r.state) : !filter || stateName(r.state) === filter))
    .sort((a, b) => (msOf(b.createTime) ?? 0) - (msOf(a.createTime) ?? 0) || b.id.localeCompare(a.id));
  const states = Object.values(RolloutState).filter((s): s is RolloutState => typeof s === "number" && s !== RolloutState.UNSPECIFIED);
  return html`<section aria-labelledby="rollouts-title">
    <h2 id="rollouts-title">Rollouts${deployment ? html` of <a href=${`#/deployments/${deployment}`}>${deployment}</a>` : ""}</h2>
    <div class="filters">
      <label for="filter-state">State</label> <select id="filter-state" value=${filter} onChange=${(e: Event) => setFilter((e.target as HTMLSelectElement).value)}>
        <option value="">all</option><option value="ACTIVE">active</option>${states.map((s) => html`<option value=${stateName(s)}>${stateName(s)}</option>`)}
      </select>
      ${deployment && html`<a href="#/rollouts">every deployment</a>`}
      <span aria-live="polite">${shown.length} rollouts</span>
    </div>
    ${error && html`<p role="alert" class="error">${error}</p>`}
    ${shown.length === 0 ? html`<p>No rollouts${filter ? ` in state ${filter}` : ""}.</p>` : shown.map((r) => html`<${RolloutCard} key=${r.id} rollout=${r} newest=${fleet.rollouts.get(r.deployment)?.id === r.id} session=${session} />`)}
    ${next && state !== undefined && html`<button type="button" onClick=${() => load(next, listed)}>Older rollouts</button>`}
  </section>`;
}
