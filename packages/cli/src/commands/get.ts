// flotilla get | describe: tables for people, JSON and YAML for programs.
import type { Deployment, NetworkPolicy, Sentinel } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { ResourceType, type RegionStatus } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Clients } from "../client.ts";
import { UsageError } from "../errors.ts";
import { all, API_VERSION, projectSpec, resourceKindNamed, specOf, type AnyResource, type ResourceKindOps } from "../kinds.ts";
import { age, isoTime, roleName, structured, table, type OutputFormat } from "../output.ts";
import { getSecrets } from "./secret.ts";
import { getDeliveries, getNotifiers } from "./notifier.ts";
import { phaseName } from "../status.ts";
import { getRollouts, rolloutLines, strategyLines } from "./rollout.ts";
import { DESCRIBED_KEYS, workloadBlocks, workloadFields, type DescribedWorkload } from "../describe-workload.ts";

export const GET_KINDS = [
  "deployments",
  "sentinels",
  "networkpolicies",
  "regions",
  "projects",
  "rollouts",
  "tokens",
  "operators",
  "secrets",
  "notifiers",
  "deliveries",
];

type Out = (text: string) => void;

/** A resource as `get -o json|yaml` prints it: re-appliable (apply ignores metadata but the name, and status). */
function document(kind: ResourceKindOps<AnyResource>, resource: AnyResource): object {
  const r = resource as AnyResource & { status?: unknown };
  return {
    apiVersion: API_VERSION,
    kind: kind.kind,
    metadata: {
      name: resource.id,
      project: resource.project,
      revision: Number(resource.revision),
      createTime: isoTime(resource.createTime),
      updateTime: isoTime(resource.updateTime),
    },
    spec: specOf(kind.schema, resource),
    ...(r.status === undefined ? {} : { status: statusDocument(r.status as RegionStatus | RegionStatus[]) }),
  };
}

function statusDocument(status: RegionStatus | RegionStatus[]): object {
  const one = (s: RegionStatus) => ({
    region: s.region,
    phase: phaseName(s.phase),
    reason: s.reason,
    stale: s.stale,
    readyReplicas: s.readyReplicas,
    desiredReplicas: s.desiredReplicas,
    desiredVersion: Number(s.desiredVersion),
    appliedVersion: Number(s.appliedVersion),
    lastObservedAt: isoTime(s.lastObservedAt),
    conditions: s.conditions.map((c) => ({ type: c.type, status: c.status, reason: c.reason, message: c.message })),
  });
  return Array.isArray(status) ? status.map(one) : one(status);
}

function regionCell(s: RegionStatus): string {
  return `${s.region}:${phaseName(s.phase)}${s.stale ? "(stale)" : ""} ${s.readyReplicas}/${s.desiredReplicas}`;
}

const rowsOf: Record<string, (r: AnyResource, wide: boolean, region: string | undefined) => string[]> = {
  Deployment: (r, wide, region) => {
    const d = r as Deployment;
    const statuses = d.status.filter((s) => region === undefined || s.region === region);
    const row = [d.id, d.namespace, d.image, String(d.revision), statuses.map(regionCell).join(", ") || "<none>", age(d.createTime)];
    if (wide)
      row.push(
        d.port ? String(d.port) : "-",
        d.cpuMillicores ? `${d.cpuMillicores}m` : "-",
        d.memoryMib ? `${d.memoryMib}Mi` : "-",
        statuses
          .map((s) => s.reason)
          .filter(Boolean)
          .join("; ") || "-",
      );
    return row;
  },
  Sentinel: (r, wide) => {
    const s = r as Sentinel;
    const row = [s.id, s.region, s.namespace, s.image, s.status ? regionCell(s.status) : "<none>", String(s.revision), age(s.createTime)];
    if (wide) row.push(s.port ? String(s.port) : "-", s.status?.reason || "-");
    return row;
  },
  NetworkPolicy: (r) => {
    const p = r as NetworkPolicy;
    return [p.id, p.region, p.namespace, String(p.revision), age(p.createTime)];
  },
};

const HEADERS: Record<string, { table: string[]; wide: string[] }> = {
  Deployment: { table: ["NAME", "NAMESPACE", "IMAGE", "REVISION", "REGIONS", "AGE"], wide: ["PORT", "CPU", "MEMORY", "REASON"] },
  Sentinel: { table: ["NAME", "REGION", "NAMESPACE", "IMAGE", "STATUS", "REVISION", "AGE"], wide: ["PORT", "REASON"] },
  NetworkPolicy: { table: ["NAME", "REGION", "NAMESPACE", "REVISION", "AGE"], wide: [] },
};

/** What `get` lists: only what is placed in `region`; only the regions `selector` picks (a label selector). */
export interface GetFilters {
  /** Deliveries only: pending, delivered or dead. */
  state?: string;
  region?: string;
  selector?: string;
}

export async function get(clients: Clients, kindName: string, name: string | undefined, format: OutputFormat, filters: GetFilters, out: Out): Promise<void> {
  const { region, selector } = filters;
  if (filters.state !== undefined && !["delivery", "deliveries"].includes(kindName.toLowerCase())) throw new UsageError("--state: only deliveries have one");
  const isRegions = ["region", "regions"].includes(kindName.toLowerCase());
  if (selector !== undefined && !isRegions) throw new UsageError("--selector: only regions have labels");
  const kind = resourceKindNamed(kindName);
  if (kind) {
    let items: AnyResource[];
    if (name !== undefined) {
      const one = await kind.get(clients, name);
      if (!one) throw new UsageError(`${kind.singular}/${name} not found`);
      items = [one];
    } else items = await kind.list(clients);
    if (region !== undefined) items = items.filter((r) => kind.regions(r).includes(region));
    if (format === "json" || format === "yaml") {
      const docs = items.map((r) => document(kind, r));
      out(structured(name !== undefined ? docs[0] : { apiVersion: API_VERSION, kind: "List", items: docs }, format));
      return;
    }
    const headers = HEADERS[kind.kind]!;
    out(
      table(
        format === "wide" ? [...headers.table, ...headers.wide] : headers.table,
        items.map((r) => rowsOf[kind.kind]!(r, format === "wide", region)),
      ),
    );
    return;
  }
  if (isRegions) return getRegions(clients, name, selector ?? "", format, out);
  switch (kindName.toLowerCase()) {
    case "token":
    case "tokens":
      return getTokens(clients, region, format, out);
    case "operator":
    case "operators":
      return getOperators(clients, format, out);
    case "project":
    case "projects":
      if (region !== undefined) throw new UsageError("--region: a project names its regions; see flotilla get project NAME");
      return getProjects(clients, name, format, out);
    case "rollout":
    case "rollouts":
      if (region !== undefined) throw new UsageError("--region: rollouts span regions; see flotilla rollout status NAME");
      return getRollouts(clients, name, format, out);
    case "secret":
    case "secrets":
      return getSecrets(clients, name, format, out);
    case "notifier":
    case "notifiers":
      return getNotifiers(clients, name, format, out);
    case "delivery":
    case "deliveries":
      return getDeliveries(clients, name, filters.state, 100, format, out);
  }
  throw new UsageError(`unknown kind ${JSON.stringify(kindName)}: one of ${GET_KINDS.join(", ")}`);
}

/** A region's labels as one cell: k=v,k=v (kubectl's --show-labels). */
function labelsCell(labels: Record<string, string>): string {
  return (
    Object.entries(labels)
      .map(([k, v]) => `${k}=${v}`)
      .join(",") || "<none>"
  );
}

async function getRegions(clients: Clients, name: string | undefined, labelSelector: string, format: OutputFormat, out: Out): Promise<void> {
  if (name !== undefined && labelSelector !== "") throw new UsageError("give either a region's name or --selector");
  const regions =
    name !== undefined
      ? [(await clients.regions.getRegion({ name })).region!]
      : await all(async (pageToken) => {
          const r = await clients.regions.listRegions({ pageSize: 1000, pageToken, labelSelector });
          return { items: r.regions, next: r.nextPageToken };
        });
  if (format === "json" || format === "yaml") {
    const docs = regions.map((r) => ({
      apiVersion: API_VERSION,
      kind: "Region",
      metadata: { name: r.name, labels: r.labels, createTime: isoTime(r.createTime) },
      status: {
        headVersion: Number(r.headVersion),
        agent: r.agent
          ? { connected: r.agent.connected, lastSeen: isoTime(r.agent.lastSeen), appliedVersion: Number(r.agent.appliedVersion), lag: Number(r.agent.lag) }
          : null,
      },
    }));
    out(structured(name !== undefined ? docs[0] : { apiVersion: API_VERSION, kind: "List", items: docs }, format));
    return;
  }
  out(
    table(
      ["NAME", "AGENT", "HEAD", "APPLIED", "LAG", "LAST-REPORT", "LEADER", "AGE", "LABELS"],
      regions.map((r) => [
        r.name,
        r.agent ? (r.agent.connected ? "connected" : "STALE") : "none",
        String(r.headVersion),
        r.agent ? String(r.agent.appliedVersion) : "-",
        r.agent ? String(r.agent.lag) : "-",
        r.agent ? `${age(r.agent.lastSeen)} ago` : "never",
        r.agent?.leaderIdentity ? `${r.agent.leaderIdentity} (${age(r.agent.leaderSince)})` : "-",
        age(r.createTime),
        labelsCell(r.labels),
      ]),
    ),
  );
}

async function getProjects(clients: Clients, name: string | undefined, format: OutputFormat, out: Out): Promise<void> {
  const projects =
    name !== undefined
      ? [(await clients.projects.getProject({ name })).project!]
      : await all(async (pageToken) => {
          const r = await clients.projects.listProjects({ pageSize: 1000, pageToken });
          return { items: r.projects, next: r.nextPageToken };
        });
  if (format === "json" || format === "yaml") {
    const docs = projects.map((p) => ({
      apiVersion: API_VERSION,
      kind: "Project",
      metadata: { name: p.name, createTime: isoTime(p.createTime), updateTime: isoTime(p.updateTime) },
      spec: projectSpec(p),
    }));
    out(structured(name !== undefined ? docs[0] : { apiVersion: API_VERSION, kind: "List", items: docs }, format));
    return;
  }
  const regionsCell = (p: (typeof projects)[number]) =>
    [...(p.regions?.names ?? []), ...(p.regions?.selector ? [`selector: ${p.regions.selector}`] : [])].join(", ") || "<none>";
  const rolesCell = (p: (typeof projects)[number]) =>
    p.roles.map((b) => `${roleName(b.role)}: ${[...b.operators, ...b.groups.map((g) => `group:${g}`)].join(" ")}`).join("; ") || "<none>";
  out(
    table(
      ["NAME", "NAMESPACES", "REGIONS", "ROLES", "AGE"],
      projects.map((p) => [p.name, p.namespaces.join(", "), regionsCell(p), rolesCell(p), age(p.createTime)]),
    ),
  );
}

async function getTokens(clients: Clients, region: string | undefined, format: OutputFormat, out: Out): Promise<void> {
  const tokens = await all(async (pageToken) => {
    const r = await clients.regions.listAgentTokens({ region: region ?? "", pageSize: 1000, pageToken });
    return { items: r.agentTokens, next: r.nextPageToken };
  });
  if (format === "json" || format === "yaml") {
    out(
      structured(
        tokens.map((t) => ({
          id: t.id,
          region: t.region,
          createTime: isoTime(t.createTime),
          expireTime: t.expireTime ? isoTime(t.expireTime) : null,
          lastUseTime: t.lastUseTime ? isoTime(t.lastUseTime) : null,
        })),
        format,
      ),
    );
    return;
  }
  out(
    table(
      ["ID", "REGION", "EXPIRES", "LAST-USED", "AGE"],
      tokens.map((t) => [
        t.id,
        t.region,
        t.expireTime ? isoTime(t.expireTime) : "never",
        t.lastUseTime ? `${age(t.lastUseTime)} ago` : "never",
        age(t.createTime),
      ]),
    ),
  );
}

async function getOperators(clients: Clients, format: OutputFormat, out: Out): Promise<void> {
  const operators = await all(async (pageToken) => {
    const r = await clients.operators.listOperators({ pageSize: 1000, pageToken });
    return { items: r.operators, next: r.nextPageToken };
  });
  if (format === "json" || format === "yaml") {
    out(
      structured(
        operators.map((o) => ({
          name: o.name,
          role: roleName(o.role),
          createdBy: o.createdBy,
          createTime: isoTime(o.createTime),
          expireTime: o.expireTime ? isoTime(o.expireTime) : null,
          lastUseTime: o.lastUseTime ? isoTime(o.lastUseTime) : null,
        })),
        format,
      ),
    );
    return;
  }
  out(
    table(
      ["NAME", "ROLE", "CREATED-BY", "EXPIRES", "LAST-USED", "AGE"],
      operators.map((o) => [
        o.name,
        roleName(o.role),
        o.createdBy,
        o.expireTime ? isoTime(o.expireTime) : "never",
        o.lastUseTime ? `${age(o.lastUseTime)} ago` : "never",
        age(o.createTime),
      ]),
    ),
  );
}

/** flotilla describe deployment NAME: spec, revision and its author, per-region status, recent revisions. */
export async function describe(clients: Clients, kindName: string, name: string, out: Out): Promise<void> {
  const kind = resourceKindNamed(kindName);
  if (!kind) throw new UsageError(`unknown kind ${JSON.stringify(kindName)}: one of deployment, sentinel, networkpolicy`);
  const resource = await kind.get(clients, name);
  if (!resource) throw new UsageError(`${kind.singular}/${name} not found`);
  const revisions = (await clients.history.listRevisions({ resourceType: kind.type, id: name, pageSize: 10 })).revisions;
  const latest = revisions[0];
  const spec = specOf(kind.schema, resource);
  const label = (key: string) => key[0]!.toUpperCase() + key.slice(1);
  const fields: [string, string][] = [
    ["Name", name],
    ["Kind", kind.kind],
    ...Object.entries(spec)
      .filter(([key, value]) => (typeof value !== "object" || value === null) && !DESCRIBED_KEYS.has(key))
      .map(([key, value]): [string, string] => [label(key), String(value)]),
    ...workloadFields(resource as DescribedWorkload),
    [
      "Revision",
      `${resource.revision}${latest && latest.revision === resource.revision ? ` by ${latest.actor}, ${age(latest.createTime)} ago${latest.message ? ` (${JSON.stringify(latest.message)})` : ""}` : ""}`,
    ],
    ["Created", isoTime(resource.createTime)],
    ["Updated", isoTime(resource.updateTime)],
  ];
  // The values start in one column, two spaces after the widest label.
  const width = Math.max(...fields.map(([l]) => l.length)) + 3;
  const lines = fields.map(([l, value]) => `${`${l}:`.padEnd(width)}${value}`);
  for (const [key, value] of Object.entries(spec)) {
    if (typeof value !== "object" || value === null || DESCRIBED_KEYS.has(key)) continue;
    const block = key === "strategy" ? strategyLines(value as object).join("\n") : JSON.stringify(value, null, 2);
    lines.push(`${label(key)}:`, ...indented(block));
  }
  for (const [heading, block] of workloadBlocks(resource as DescribedWorkload)) lines.push(`${heading}:`, ...block.map((l) => `  ${l}`));
  const statuses =
    kind.type === ResourceType.DEPLOYMENT
      ? (resource as Deployment).status
      : kind.type === ResourceType.SENTINEL && (resource as Sentinel).status
        ? [(resource as Sentinel).status!]
        : [];
  if (kind.type !== ResourceType.CILIUM_NETWORK_POLICY) {
    lines.push("Regions:");
    const rows = statuses.map((s) => [
      s.region,
      phaseName(s.phase) + (s.stale ? " (stale: agent not reporting)" : ""),
      `${s.readyReplicas}/${s.desiredReplicas}`,
      `${s.appliedVersion}/${s.desiredVersion}`,
      s.lastObservedAt ? `${age(s.lastObservedAt)} ago` : "never",
      s.reason || "-",
    ]);
    lines.push(...indented(table(["REGION", "PHASE", "READY", "APPLIED/DESIRED", "OBSERVED", "REASON"], rows)));
    const conditions = statuses.flatMap((s) => s.conditions.map((c) => [s.region, c.type, c.status, c.reason || "-", c.message || "-"]));
    if (conditions.length > 0) {
      lines.push("Conditions (Kubernetes):");
      lines.push(...indented(table(["REGION", "TYPE", "STATUS", "REASON", "MESSAGE"], conditions)));
    }
  }
  if (kind.type === ResourceType.DEPLOYMENT) lines.push(...(await rolloutLines(clients, name, Date.now())));
  const { transitions } = await clients.history.listStatusTransitions({ resourceType: kind.type, id: name, limit: 10 });
  if (transitions.length > 0) {
    lines.push("Recent status transitions:");
    lines.push(
      ...indented(
        table(
          ["REGION", "WHEN", "TRANSITION", "REASON"],
          transitions.map((t) => [t.region, `${age(t.time)} ago`, `${phaseName(t.fromPhase)} → ${phaseName(t.toPhase)}`, t.reason || "-"]),
        ),
      ),
    );
  }
  lines.push("Recent revisions:");
  lines.push(
    ...indented(
      table(
        ["REVISION", "ACTOR", "AGE", "MESSAGE"],
        revisions.map((r) => [String(r.revision), r.actor, age(r.createTime), r.message || "-"]),
      ),
    ),
  );
  out(`${lines.join("\n")}\n`);
}

/** A block's lines (a table, a list), indented under a heading. */
function indented(text: string): string[] {
  return text
    .trimEnd()
    .split("\n")
    .map((l) => `  ${l}`);
}
