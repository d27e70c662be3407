// The console's views (Preact with htm: no JSX compiler). Every control has a label; times
// are relative with the absolute time on hover; the write controls show only to roles that
// may write (the server refuses the others anyway).
import { toJson } from "@bufbuild/protobuf";
import { DeploymentSchema, Phase, ResourceType, type Deployment, type RegionStatus } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Revision, AuditEvent } from "@flotilla/proto/ctrl/v1/history_pb.js";
import type { NetworkPolicy, Sentinel } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { html } from "htm/preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import { api, canWrite, problem, type Fleet, type Session } from "./api.ts";
import { flatten, msOf, phaseName, Time } from "./format.ts";
import { RolloutCard } from "./rollouts.ts";
import { ServiceFields } from "./service.ts";

export function PhaseBadge({ status }: { status: RegionStatus }) {
  const name = phaseName(status.phase);
  return html`<span class=${`phase phase-${name.toLowerCase()}${status.stale ? " stale" : ""}`}>${name}${status.stale ? " (stale)" : ""}</span>`;
}

export function SignIn({ reason, sso, onSignIn }: { reason: string | undefined; sso: boolean; onSignIn: (token: string) => void }) {
  const [value, setValue] = useState("");
  return html`<main class="signin">
    <h1>Flotilla</h1>
    ${sso && html`<p><a class="button" href="/auth/login">Sign in with single sign-on</a></p>`}
    <form
      onSubmit=${(e: Event) => {
        e.preventDefault();
        if (value.trim()) onSignIn(value.trim());
      }}
    >
      <label for="token">Operator token</label>
      <input id="token" type="password" autocomplete="off" value=${value} onInput=${(e: Event) => setValue((e.target as HTMLInputElement).value)} />
      <button type="submit">Sign in</button>
      ${reason && html`<p role="alert" class="error">${reason}</p>`}
      <p class="hint">The token stays in this browser tab only. A viewer token is enough to look.</p>
    </form>
  </main>`;
}

/** Counts of each phase per region, from the live statuses. */
function phaseCounts(fleet: Fleet): Map<string, Record<string, number>> {
  const counts = new Map<string, Record<string, number>>();
  for (const statuses of fleet.statuses.values()) {
    for (const s of statuses) {
      const c = counts.get(s.region) ?? { RUNNING: 0, PROGRESSING: 0, FAILED: 0, STALE: 0 };
      if (s.stale) c.STALE!++;
      else if (s.phase === Phase.RUNNING) c.RUNNING!++;
      else if (s.phase === Phase.FAILED) c.FAILED!++;
      else if (s.phase === Phase.PROGRESSING || s.phase === Phase.PENDING) c.PROGRESSING!++;
      counts.set(s.region, c);
    }
  }
  return counts;
}

export function FleetView({ fleet }: { fleet: Fleet }) {
  const counts = phaseCounts(fleet);
  const regions = [...fleet.regions.values()].sort((a, b) => a.name.localeCompare(b.name));
  return html`<section aria-labelledby="fleet-title">
    <h2 id="fleet-title">Fleet</h2>
    <table>
      <caption class="visually-hidden">Regions and their agents</caption>
      <thead><tr><th scope="col">Region</th><th scope="col">Labels</th><th scope="col">Agent</th><th scope="col">Leader</th><th scope="col">Last report</th><th scope="col">Behind head</th><th scope="col">Running</th><th scope="col">Progressing</th><th scope="col">Failed</th><th scope="col">Stale</th></tr></thead>
      <tbody>
        ${regions.map((r) => {
          const c = counts.get(r.name) ?? { RUNNING: 0, PROGRESSING: 0, FAILED: 0, STALE: 0 };
          const agent = !r.agent ? "no agent" : r.agent.connected ? "connected" : "not reporting";
          return html`<tr class=${r.agent?.connected ? "" : "attention"}>
            <th scope="row">${r.name}</th>
            <td class="labels">${Object.entries(r.labels)
              .sort(([a], [b]) => a.localeCompare(b))
              .map(([k, v]) => html`<code>${k}=${v}</code> `)}</td>
            <td>${agent}</td>
            <td>${r.agent?.leaderIdentity ? html`${r.agent.leaderIdentity}, since <${Time} ms=${msOf(r.agent.leaderSince)} />` : "-"}</td>
            <td><${Time} ms=${msOf(r.agent?.lastSeen)} /></td>
            <td>${r.agent ? `${r.agent.lag} versions` : "-"}</td>
            <td>${c.RUNNING}</td><td>${c.PROGRESSING}</td><td class=${c.FAILED ? "failed" : ""}>${c.FAILED}</td><td>${c.STALE}</td>
          </tr>`;
        })}
      </tbody>
    </table>
  </section>`;
}

/** Every row of the Deployments table is this high (its cells are told so): the rows in view follow from the scroll position. */
const ROW_HEIGHT = 36;
/** Rows rendered beyond each edge of the view. */
const OVERSCAN = 5;

interface Row {
  deployment: Deployment;
  status: RegionStatus;
}

export function DeploymentsView({ fleet }: { fleet: Fleet }) {
  const [region, setRegion] = useState("");
  const [phase, setPhase] = useState("");
  const [text, setText] = useState("");
  const [sort, setSort] = useState<"name" | "phase">("name");
  const [top, setTop] = useState(0);
  // The frame ends at the window's bottom (app.css), so a window's height bounds the rows in view.
  const [windowHeight, setWindowHeight] = useState(innerHeight);
  useEffect(() => {
    const onResize = () => setWindowHeight(innerHeight);
    addEventListener("resize", onResize);
    return () => removeEventListener("resize", onResize);
  }, []);
  // The deployments the search finds, in id order: kept until a spec or the search changes, so
  // a status change costs a pass over them, not a search and a sort of every row (B11).
  const found = useMemo(
    () => [...fleet.deployments.values()].filter((d) => !text || d.id.includes(text) || d.image.includes(text)).sort((a, b) => a.id.localeCompare(b.id)),
    [fleet, fleet.specs, text],
  );
  const rows: Row[] = [];
  for (const deployment of found) {
    const kept = (fleet.statuses.get(deployment.id) ?? []).filter(
      (status) => (!region || status.region === region) && (!phase || (phase === "STALE" ? status.stale : phaseName(status.phase) === phase)),
    );
    if (kept.length > 1) kept.sort((a, b) => a.region.localeCompare(b.region));
    for (const status of kept) rows.push({ deployment, status });
  }
  // (Stable: within a phase, the name order above.)
  if (sort === "phase") rows.sort((a, b) => phaseName(a.status.phase).localeCompare(phaseName(b.status.phase)));
  // Only the rows in view are rendered: a fleet of 30,000 rows stays as fast as one of 30.
  // Spacer rows above and below stand for the others.
  const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
  const shown = rows.slice(first, first + Math.ceil(windowHeight / ROW_HEIGHT) + 2 * OVERSCAN);
  const regions = [...fleet.regions.keys()].sort();
  return html`<section aria-labelledby="deployments-title">
    <h2 id="deployments-title">Deployments</h2>
    <div class="filters">
      <label for="filter-region">Region</label> <select id="filter-region" value=${region} onChange=${(e: Event) => setRegion((e.target as HTMLSelectElement).value)}>
        <option value="">all</option>${regions.map((r) => html`<option value=${r}>${r}</option>`)}
      </select>
      <label for="filter-phase">Phase</label> <select id="filter-phase" value=${phase} onChange=${(e: Event) => setPhase((e.target as HTMLSelectElement).value)}>
        <option value="">all</option>${["RUNNING", "PROGRESSING", "PENDING", "FAILED", "STOPPED", "STALE"].map((p) => html`<option value=${p}>${p}</option>`)}
      </select>
      <label for="filter-text">Search</label> <input id="filter-text" type="search" value=${text} onInput=${(e: Event) => setText((e.target as HTMLInputElement).value)} />
      <label for="filter-sort">Sort by</label> <select id="filter-sort" value=${sort} onChange=${(e: Event) => setSort((e.target as HTMLSelectElement).value as "name")}>
        <option value="name">name</option><option value="phase">phase</option>
      </select>
      <span aria-live="polite">${rows.length} rows</span>
    </div>
    <div class="scroller" onScroll=${(e: Event) => setTop((e.target as HTMLElement).scrollTop)}>
      <table class="virtual" style=${`--row-height:${ROW_HEIGHT}px`}>
        <caption class="visually-hidden">Deployments by region</caption>
        <thead><tr><th scope="col">Deployment</th><th scope="col">Region</th><th scope="col">Phase</th><th scope="col">Reason</th><th scope="col">Ready</th><th scope="col">Revision</th><th scope="col">Image</th><th scope="col">Changed</th></tr></thead>
        <tbody>
          <tr aria-hidden="true" style=${`height:${first * ROW_HEIGHT}px`}></tr>
          ${shown.map(
            ({ deployment: d, status: s }) => html`<tr key=${`${d.id}/${s.region}`} data-row=${`${d.id}/${s.region}`}>
              <th scope="row"><a href=${`#/deployments/${d.id}`}>${d.id}</a></th>
              <td>${s.region}</td>
              <td><${PhaseBadge} status=${s} /></td>
              <td class="reason" title=${s.reason}>${s.reason}</td>
              <td>${s.readyReplicas}/${s.desiredReplicas}</td>
              <td>${String(d.revision)}</td>
              <td>${d.image}</td>
              <td><${Time} ms=${msOf(d.updateTime)} /></td>
            </tr>`,
          )}
          <tr aria-hidden="true" style=${`height:${(rows.length - first - shown.length) * ROW_HEIGHT}px`}></tr>
        </tbody>
      </table>
    </div>
  </section>`;
}

/** A deployment's page. Its spec is focusable: a long line (an analysis' query) scrolls it sideways, which a keyboard must reach too. */
export function DeploymentDetail({ id, fleet, session }: { id: string; fleet: Fleet; session: Session }) {
  const deployment = fleet.deployments.get(id);
  const statuses = fleet.statuses.get(id) ?? deployment?.status ?? [];
  const rollout = fleet.rollouts.get(id) ?? deployment?.rollout;
  const [revisions, setRevisions] = useState<Revision[]>([]);
  const [error, setError] = useState<string | undefined>();
  const [notice, setNotice] = useState<string | undefined>();
  const [compare, setCompare] = useState<[string, string]>(["", ""]);
  const revision = deployment?.revision;
  useEffect(() => {
    api.history.listRevisions({ resourceType: ResourceType.DEPLOYMENT, id, pageSize: 50 }).then(
      (r) => setRevisions(r.revisions),
      (e) => setError(problem(e)),
    );
  }, [id, revision]);
  const diff = useMemo(() => {
    const [a, b] = compare.map((n) => revisions.find((r) => String(r.revision) === n));
    if (!a || !b || a.spec.case !== "deployment" || b.spec.case !== "deployment") return undefined;
    const before = flatten(toJson(DeploymentSchema, { ...a.spec.value, revision: 0n }));
    const after = flatten(toJson(DeploymentSchema, { ...b.spec.value, revision: 0n }));
    return [...new Set([...before.keys(), ...after.keys()])]
      .sort()
      .filter((k) => before.get(k) !== after.get(k))
      .map((k) => ({ path: k, before: before.get(k), after: after.get(k) }));
  }, [compare, revisions]);
  if (!deployment) return html`<section><h2>Deployment ${id}</h2><p>Not found (or still loading).</p></section>`;
  const rollback = async (to: Revision) => {
    if (!confirm(`Roll back deployment ${id} to revision ${to.revision}? Its spec becomes revision ${Number(deployment.revision) + 1}.`)) return;
    try {
      const r = await api.history.rollback({
        resourceType: ResourceType.DEPLOYMENT,
        id,
        toRevision: to.revision,
        expectedRevision: deployment.revision,
        message: "rollback from the console",
      });
      setNotice(`Rolled back to revision ${to.revision}: now revision ${r.revision?.revision}.`);
      setError(undefined);
    } catch (e) {
      setError(problem(e));
    }
  };
  const spec = toJson(DeploymentSchema, { ...deployment, status: [] }) as Record<string, unknown>;
  for (const key of ["id", "revision", "createTime", "updateTime", "status"]) delete spec[key];
  return html`<section aria-labelledby="detail-title">
    <h2 id="detail-title">Deployment ${id}</h2>
    <p>Revision ${String(deployment.revision)}${revisions[0] && revisions[0].revision === deployment.revision ? html` by <strong>${revisions[0].actor}</strong> <${Time} ms=${msOf(revisions[0].createTime)} />` : ""}</p>
    ${notice && html`<p role="status" class="notice">${notice}</p>`}
    ${error && html`<p role="alert" class="error">${error}</p>`}
    ${rollout && html`<${RolloutCard} key=${rollout.id} rollout=${rollout} newest=${true} session=${session} /><p><a href=${`#/rollouts?deployment=${id}`}>Every rollout of ${id}</a></p>`}
    <h3>Status by region</h3>
    <table>
      <thead><tr><th scope="col">Region</th><th scope="col">Phase</th><th scope="col">Reason</th><th scope="col">Ready</th><th scope="col">Applied / desired version</th><th scope="col">Observed</th><th scope="col">Kubernetes conditions</th></tr></thead>
      <tbody>${statuses.map(
        (s) =>
          html`<tr data-region=${s.region}><th scope="row">${s.region}</th><td><${PhaseBadge} status=${s} /></td><td class="reason">${s.reason}</td><td>${s.readyReplicas}/${s.desiredReplicas}</td><td>${String(s.appliedVersion)} / ${String(s.desiredVersion)}</td><td><${Time} ms=${msOf(s.lastObservedAt)} /></td><td class="reason">${s.conditions.map((c) => html`<div title=${c.message}>${c.type}=${c.status}${c.reason ? ` (${c.reason})` : ""}</div>`)}</td></tr>`,
      )}</tbody>
    </table>
    <${ServiceFields} deployment=${deployment} statuses=${statuses} />
    <h3>Spec</h3>
    <pre class="spec" tabindex="0" aria-label="Spec">${JSON.stringify(spec, null, 2)}</pre>
    <h3>History</h3>
    <table>
      <thead><tr><th scope="col">Revision</th><th scope="col">Actor</th><th scope="col">When</th><th scope="col">Image</th><th scope="col">Message</th>${canWrite(session, deployment.project) ? html`<th scope="col">Action</th>` : ""}</tr></thead>
      <tbody>${revisions.map(
        (r) => html`<tr data-revision=${String(r.revision)}>
          <th scope="row">${String(r.revision)}</th><td>${r.actor}</td><td><${Time} ms=${msOf(r.createTime)} /></td>
          <td>${r.spec.case === "deployment" ? r.spec.value.image : ""}</td><td>${r.message}</td>
          ${canWrite(session, deployment.project) ? html`<td>${r.revision === deployment.revision ? "current" : html`<button type="button" onClick=${() => rollback(r)}>Roll back to ${String(r.revision)}</button>`}</td>` : ""}
        </tr>`,
      )}</tbody>
    </table>
    <div class="filters">
      <label for="compare-from">Compare</label> <select id="compare-from" value=${compare[0]} onChange=${(e: Event) => setCompare([(e.target as HTMLSelectElement).value, compare[1]])}><option value="">revision…</option>${revisions.map((r) => html`<option value=${String(r.revision)}>${String(r.revision)}</option>`)}</select>
      <label for="compare-to">with</label> <select id="compare-to" value=${compare[1]} onChange=${(e: Event) => setCompare([compare[0], (e.target as HTMLSelectElement).value])}><option value="">revision…</option>${revisions.map((r) => html`<option value=${String(r.revision)}>${String(r.revision)}</option>`)}</select>
    </div>
    ${diff && html`<table class="diff"><caption>Revision ${compare[0]} → ${compare[1]}</caption><thead><tr><th scope="col">Field</th><th scope="col">Before</th><th scope="col">After</th></tr></thead><tbody>${diff.length === 0 ? html`<tr><td colspan="3">identical specs</td></tr>` : diff.map((d) => html`<tr><th scope="row">${d.path}</th><td>${d.before ?? "—"}</td><td>${d.after ?? "—"}</td></tr>`)}</tbody></table>`}
  </section>`;
}

/** A table loaded once per visit: sentinels, network policies, the audit trail. */
function useLoaded<T>(load: () => Promise<T[]>): { items: T[]; error: string | undefined } {
  const [items, setItems] = useState<T[]>([]);
  const [error, setError] = useState<string | undefined>();
  useEffect(() => {
    load().then(setItems, (e) => setError(problem(e)));
  }, []);
  return { items, error };
}

export function SentinelsView() {
  const { items, error } = useLoaded<Sentinel>(async () => (await api.sentinels.listSentinels({ pageSize: 1000 })).sentinels);
  return html`<section aria-labelledby="sentinels-title"><h2 id="sentinels-title">Sentinels</h2>${error && html`<p role="alert" class="error">${error}</p>`}
    <table><thead><tr><th scope="col">Name</th><th scope="col">Region</th><th scope="col">Namespace</th><th scope="col">Image</th><th scope="col">Phase</th><th scope="col">Ready</th><th scope="col">Revision</th></tr></thead>
    <tbody>${items.map((s) => html`<tr><th scope="row">${s.id}</th><td>${s.region}</td><td>${s.namespace}</td><td>${s.image}</td><td>${s.status ? html`<${PhaseBadge} status=${s.status} />` : "-"}</td><td>${s.status ? `${s.status.readyReplicas}/${s.status.desiredReplicas}` : "-"}</td><td>${String(s.revision)}</td></tr>`)}</tbody></table></section>`;
}

export function NetworkPoliciesView() {
  const { items, error } = useLoaded<NetworkPolicy>(async () => (await api.networkPolicies.listNetworkPolicies({ pageSize: 1000 })).networkPolicies);
  return html`<section aria-labelledby="policies-title"><h2 id="policies-title">Network policies</h2>${error && html`<p role="alert" class="error">${error}</p>`}
    <table><thead><tr><th scope="col">Name</th><th scope="col">Region</th><th scope="col">Namespace</th><th scope="col">Revision</th><th scope="col">Changed</th></tr></thead>
    <tbody>${items.map((p) => html`<tr><th scope="row">${p.id}</th><td>${p.region}</td><td>${p.namespace}</td><td>${String(p.revision)}</td><td><${Time} ms=${msOf(p.updateTime)} /></td></tr>`)}</tbody></table></section>`;
}

export function AuditView() {
  const { items, error } = useLoaded<AuditEvent>(async () => (await api.history.listAuditEvents({ pageSize: 200 })).events);
  return html`<section aria-labelledby="audit-title"><h2 id="audit-title">Audit</h2>${error && html`<p role="alert" class="error">${error}</p>`}
    <table><thead><tr><th scope="col">When</th><th scope="col">Actor</th><th scope="col">Action</th><th scope="col">Object</th><th scope="col">Revision</th><th scope="col">Message</th></tr></thead>
    <tbody>${items.map((e) => html`<tr><td><${Time} ms=${msOf(e.time)} /></td><td>${e.actor}</td><td>${e.action}</td><td>${e.objectKind}/${e.objectId}</td><td>${e.revision ? String(e.revision) : "-"}</td><td>${e.message}</td></tr>`)}</tbody></table></section>`;
}
