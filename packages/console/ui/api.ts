// The console's connection to ctrl: the generated Connect clients over fetch (same origin),
// the operator token kept for this tab only (sessionStorage: never a URL, a cookie or the
// DOM), and the live state the status stream keeps up to date. With single sign-on the
// session is an HttpOnly cookie the page never sees; each call carries the session's CSRF
// token (read from /auth/session, same origin only) in a header.
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { HistoryService } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { NetworkPolicyService } from "@flotilla/proto/ctrl/v1/network_policy_pb.js";
import { NotifierService } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { OperatorService, Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { RegionService, type Region } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { ResourceType, type Deployment, type RegionStatus, type Rollout } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { SentinelService } from "@flotilla/proto/ctrl/v1/sentinel_pb.js";
import { StatusService } from "@flotilla/proto/ctrl/v1/status_pb.js";

const TOKEN_KEY = "flotilla.token";

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) ?? undefined,
  set: (value: string) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

const CSRF_HEADER = "x-flotilla-csrf";
/** The single sign-on session's CSRF token (not a credential: the cookie is, and scripts cannot read it). */
let csrf: string | undefined;

/** Single sign-on: whether ctrl offers it, and the signed-in session, if any. */
export async function ssoSession(): Promise<{ available: boolean; subject?: string }> {
  const response = await fetch("/auth/session", { credentials: "same-origin", headers: { accept: "application/json" } });
  if (response.status === 404) return { available: false };
  if (!response.ok) return { available: true };
  const session = (await response.json()) as { subject: string; csrf: string };
  csrf = session.csrf;
  return { available: true, subject: session.subject };
}

/** Ends the single sign-on session (the cookie is cleared by ctrl). */
export async function ssoSignOut(): Promise<void> {
  if (!csrf) return;
  const header = csrf;
  csrf = undefined;
  await fetch("/auth/logout", { method: "POST", credentials: "same-origin", headers: { [CSRF_HEADER]: header } }).catch(() => undefined);
}

const auth: Interceptor = (next) => (req) => {
  const t = token.get();
  if (t) req.header.set("authorization", `Bearer ${t}`);
  else if (csrf) req.header.set(CSRF_HEADER, csrf);
  return next(req);
};
const transport = createConnectTransport({ baseUrl: location.origin, interceptors: [auth] });

export const api = {
  deployments: createClient(DeploymentService, transport),
  sentinels: createClient(SentinelService, transport),
  networkPolicies: createClient(NetworkPolicyService, transport),
  regions: createClient(RegionService, transport),
  operators: createClient(OperatorService, transport),
  history: createClient(HistoryService, transport),
  rollouts: createClient(RolloutService, transport),
  status: createClient(StatusService, transport),
  notifiers: createClient(NotifierService, transport),
};
export type Api = { [K in keyof typeof api]: (typeof api)[K] extends Client<infer S> ? Client<S> : never };

/** Who is signed in. */
export interface Session {
  actor: string;
  /** Fleet-wide; UNSPECIFIED when every role comes from projects. */
  role: Role;
  /** The role held in each project that grants one. */
  projectRoles: ReadonlyMap<string, Role>;
}

/** Whether to show write controls: the server decides each write, this only hides what it would refuse. */
export const canWrite = (session: Session, project?: string) =>
  session.role >= Role.DEPLOYER ||
  (project === undefined
    ? [...session.projectRoles.values()].some((r) => r >= Role.DEPLOYER)
    : (session.projectRoles.get(project) ?? Role.UNSPECIFIED) >= Role.DEPLOYER);

/** Why a call failed, as a person reads it; sign-in problems end the session. */
export function problem(error: unknown): string {
  const e = ConnectError.from(error);
  return `${Code[e.code] ?? "Unknown"}: ${e.rawMessage}`;
}

export function isSignedOut(error: unknown): boolean {
  return ConnectError.from(error).code === Code.Unauthenticated;
}

/** The fleet as the console shows it, kept live by the status stream. */
export interface Fleet {
  deployments: Map<string, Deployment>;
  /** Moves at each change to `deployments`: what follows from the specs alone is kept until it does. */
  specs: number;
  /** Per deployment, its regions' status (from the stream: newer than `deployments`' own). */
  statuses: Map<string, RegionStatus[]>;
  /** Per deployment, its newest rollout (active or ended), as the stream last sent it. */
  rollouts: Map<string, Rollout>;
  regions: Map<string, Region>;
  /** When the stream last confirmed the data (ms); undefined until the first SYNCED. */
  syncedAt: number | undefined;
  /** Set while the stream is down: since when the data is stale, and why. */
  reconnecting: { since: number; why: string } | undefined;
}

export function emptyFleet(): Fleet {
  return { deployments: new Map(), specs: 0, statuses: new Map(), rollouts: new Map(), regions: new Map(), syncedAt: undefined, reconnecting: undefined };
}

/** A change this long after the last render is shown at once rather than at the next animation frame. */
const QUIET_MS = 100;

/**
 * Follows the status stream until `signal` aborts: a snapshot, then changes; after a drop,
 * resumes from the last cursor (after a ctrl restart too). `changed` is called whenever the
 * fleet moved: at once for a change after a quiet spell (as soon as the events that came with
 * it are in), else coalesced to one call per animation frame (a burst, the first snapshot).
 */
export async function followFleet(fleet: Fleet, changed: () => void, signal: AbortSignal, onSignedOut: (why: string) => void): Promise<void> {
  let cursor: bigint | undefined;
  let scheduled = false;
  let renderedAt = Number.NEGATIVE_INFINITY;
  const render = () => {
    scheduled = false;
    renderedAt = performance.now();
    changed();
  };
  const notify = () => {
    if (scheduled) return;
    scheduled = true;
    if (performance.now() - renderedAt > QUIET_MS) setTimeout(render, 0);
    else requestAnimationFrame(render);
  };
  while (!signal.aborted) {
    try {
      const revisions = new Map<string, bigint>();
      for await (const r of api.status.watchStatus({ afterCursor: cursor }, { signal })) {
        cursor = r.cursor;
        if (fleet.reconnecting) fleet.reconnecting = undefined;
        const event = r.event;
        if (event.case === "synced") fleet.syncedAt = Date.now();
        else if (event.case === "region") fleet.regions.set(event.value.name, event.value);
        else if (event.case === "object" && event.value.resourceType === ResourceType.DEPLOYMENT) {
          const { id, deleted, revision, regions, rollout } = event.value;
          if (deleted) {
            fleet.deployments.delete(id);
            fleet.specs++;
            fleet.statuses.delete(id);
            fleet.rollouts.delete(id);
          } else {
            fleet.statuses.set(id, regions);
            if (rollout) fleet.rollouts.set(id, rollout);
            if (fleet.deployments.get(id)?.revision !== revision && revisions.get(id) !== revision) {
              revisions.set(id, revision);
              // The spec of a new revision (the stream carries status, not specs).
              void api.deployments.getDeployment({ id }).then(
                (d) => {
                  if (d.deployment) {
                    fleet.deployments.set(id, d.deployment);
                    fleet.specs++;
                  }
                  notify();
                },
                () => {},
              );
            }
          }
        }
        if (fleet.syncedAt !== undefined) fleet.syncedAt = Date.now();
        notify();
      }
    } catch (error) {
      if (signal.aborted) return;
      if (isSignedOut(error)) return onSignedOut(problem(error));
      const e = ConnectError.from(error);
      if (e.code === Code.OutOfRange) cursor = undefined;
      fleet.reconnecting ??= { since: fleet.syncedAt ?? Date.now(), why: problem(error) };
      notify();
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/** Every deployment, a page of 1,000 at a time (in id order: the first page is the first rows the view shows). */
export async function listDeployments(onPage: (page: Deployment[]) => void): Promise<void> {
  let pageToken = "";
  do {
    const page = await api.deployments.listDeployments({ pageSize: 1000, pageToken });
    onPage(page.deployments);
    pageToken = page.nextPageToken;
  } while (pageToken);
}
