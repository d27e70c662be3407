// flotilla apply | diff | delete -f: manifests against what ctrl has.
import type { JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Clients } from "../client.ts";
import { ExitError, EXIT, codeName } from "../errors.ts";
import { Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import type { Project } from "@flotilla/proto/ctrl/v1/project_pb.js";
import type { Notifier } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import type { Region } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { all, notifierSpec, orUndefined, projectSpec, sameNotifier, sameProject, secretNames, specOf, sameSpec, type AnyResource } from "../kinds.ts";
import { roleName } from "../output.ts";
import type { Manifest, ResourceManifest } from "../manifests.ts";
import { followRollouts, FailedRollout } from "../status.ts";

type Out = (line: string) => void;

/** What apply would do to one manifest's object; `current` is the object as ctrl has it. */
type Plan = { manifest: Manifest; action: "created" | "configured" | "unchanged"; current?: AnyResource | Region | Project | Notifier };

const label = (m: Manifest) => `${typeof m.kind === "string" ? m.kind.toLowerCase() : m.kind.singular}/${m.name}`;

/** Regions first (projects and resources may name them), then projects (resources belong to them), then in the files' order. */
function ordered(manifests: Manifest[]): Manifest[] {
  const rank = (m: Manifest) => (m.kind === "Region" ? 0 : m.kind === "Project" ? 1 : 2);
  return [0, 1, 2].flatMap((r) => manifests.filter((m) => rank(m) === r));
}

/** Calls made at once (plan, checks, writes): a directory of a thousand manifests is not a thousand round trips in a row. */
const IN_FLIGHT = 8;

/** `fn` over `items`, at most IN_FLIGHT at a time; results in the items' order. */
async function inFlight<T, R>(items: T[], fn: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, items.length) }, worker));
  return results;
}

/** Whether two label sets are equal (in any order). */
function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

/** What apply would do to each manifest's object, and the regions that exist now. */
async function plan(clients: Clients, manifests: Manifest[]): Promise<{ plans: Plan[]; regions: Set<string> }> {
  const existing = new Map(
    (
      await all(async (pageToken) => {
        const r = await clients.regions.listRegions({ pageSize: 1000, pageToken });
        return { items: r.regions, next: r.nextPageToken };
      })
    ).map((r) => [r.name, r]),
  );
  const plans = await inFlight(ordered(manifests), async (manifest): Promise<Plan> => {
    if (manifest.kind === "Region") {
      const current = existing.get(manifest.name);
      if (!current) return { manifest, action: "created" };
      // A region's labels converge by UpdateRegion: CreateRegion leaves an existing region as it is.
      const same = sameLabels(current.labels, manifest.labels) && (current.metrics?.prometheus?.address ?? "") === manifest.prometheusAddress;
      return { manifest, action: same ? "unchanged" : "configured", current };
    }
    if (manifest.kind === "Project") {
      const current = (await orUndefined(clients.projects.getProject({ name: manifest.name })))?.project;
      if (!current) return { manifest, action: "created" };
      return { manifest, action: sameProject(current, manifest.project) ? "unchanged" : "configured", current };
    }
    if (manifest.kind === "Notifier") {
      const current = (await orUndefined(clients.notifiers.getNotifier({ name: manifest.name })))?.notifier;
      if (!current) return { manifest, action: "created" };
      return { manifest, action: sameNotifier(current, manifest.notifier) ? "unchanged" : "configured", current };
    }
    const current = await manifest.kind.get(clients, manifest.name);
    if (!current) return { manifest, action: "created" };
    // A manifest without secretEnv keeps the secrets set with `flotilla secret set`.
    if (!manifest.listsSecretEnv && "secretEnv" in current) (manifest.resource as { secretEnv: unknown }).secretEnv = secretNames(current);
    return { manifest, action: sameSpec(manifest.kind.schema, current, manifest.resource) ? "unchanged" : "configured", current };
  });
  return { plans, regions: new Set(existing.keys()) };
}

/** The manifest's source and the server's refusal, on one line. */
function refusal(manifest: Manifest, error: unknown): ExitError {
  if (!(error instanceof ConnectError)) throw error;
  return new ExitError(`error: ${manifest.source}: ${label(manifest)}: ${codeName(error.code)}: ${error.rawMessage}`, EXIT.failed);
}

/** The RPC that makes a region's planned change. */
const regionWrite = (p: Plan) => (p.action === "created" ? "CreateRegion" : "UpdateRegion");

/**
 * Checks every change with the server, writing nothing; throws the first refusal. Creating a
 * region or changing its labels needs role admin; a resource is checked with validate_only,
 * and may name a region this apply creates.
 */
async function check(clients: Clients, changes: Plan[], regions: Set<string>, message: string): Promise<void> {
  const regionChanges = changes.filter((p) => p.manifest.kind === "Region");
  const creating = new Set(regionChanges.filter((p) => p.action === "created").map((p) => p.manifest.name));
  const creatingProjects = new Set(changes.filter((p) => p.manifest.kind === "Project" && p.action === "created").map((p) => p.manifest.name));
  if (regionChanges.length > 0) {
    const me = await clients.operators.whoAmI({});
    const first = regionChanges[0]!;
    if (me.role !== Role.ADMIN)
      throw refusal(
        first.manifest,
        new ConnectError(`${regionWrite(first)} needs role admin; ${me.actor} has role ${roleName(me.role)}`, Code.PermissionDenied),
      );
  }
  await inFlight(changes, async ({ manifest: m, action }) => {
    if (m.kind === "Region") return;
    if (m.kind === "Project") {
      try {
        await writeProject(clients, m.project, action, true);
      } catch (error) {
        throw refusal(m, error);
      }
      return;
    }
    if (m.kind === "Notifier") {
      try {
        await writeNotifier(clients, m.notifier, action, true);
      } catch (error) {
        throw refusal(m, error);
      }
      return;
    }
    // The regions it names that do not exist yet. ctrl's refusal names the first of them: one
    // these manifests do not create, behind one they do, is refused here.
    const missing = m.kind.regions(m.resource).filter((r) => !regions.has(r));
    const unknown = missing.find((r) => !creating.has(r));
    if (unknown !== undefined && missing[0] !== unknown)
      throw refusal(m, new ConnectError(`region ${JSON.stringify(unknown)} not found, nor in these manifests`, Code.NotFound));
    try {
      if (action === "created") await m.kind.create(clients, m.resource, message, true);
      else await m.kind.update(clients, m.resource, message, true);
    } catch (error) {
      // ctrl resolves the regions after every other check: refused only for a region this
      // apply creates, the resource passed the rest.
      const first = missing[0];
      if (
        first !== undefined &&
        creating.has(first) &&
        error instanceof ConnectError &&
        error.code === Code.NotFound &&
        error.rawMessage.endsWith(`region ${JSON.stringify(first)} not found`)
      )
        return;
      // So is the project, before anything else: refused only for one this apply creates.
      const project = m.resource.project;
      if (creatingProjects.has(project) && error instanceof ConnectError && error.rawMessage.endsWith(`project ${JSON.stringify(project)} not found`)) return;
      throw refusal(m, error);
    }
  });
}

/** Creates or updates a project (only checks it, with `validateOnly`). */
async function writeProject(clients: Clients, project: Project, action: Plan["action"], validateOnly: boolean): Promise<void> {
  if (action === "created") await clients.projects.createProject({ project, validateOnly });
  else await clients.projects.updateProject({ project, validateOnly });
}

/** Creates or updates a notifier (only checks it, with `validateOnly`); a creation's signing secret, shown once. */
async function writeNotifier(clients: Clients, notifier: Notifier, action: Plan["action"], validateOnly: boolean): Promise<string> {
  if (action === "created") return (await clients.notifiers.createNotifier({ notifier, validateOnly })).signingSecret;
  await clients.notifiers.updateNotifier({ notifier, validateOnly });
  return "";
}

export interface ApplyOptions {
  message: string;
  dryRun: boolean;
  wait: boolean;
  timeoutMs: number;
}

export async function apply(clients: Clients, manifests: Manifest[], options: ApplyOptions, out: Out): Promise<void> {
  const { plans, regions } = await plan(clients, manifests);
  await check(
    clients,
    plans.filter((p) => p.action !== "unchanged"),
    regions,
    options.message,
  );
  const write = async (p: Plan) => {
    const m = p.manifest;
    if (p.action === "unchanged" || options.dryRun) return;
    try {
      if (m.kind === "Region") {
        const region = { name: m.name, labels: m.labels, ...(m.prometheusAddress ? { metrics: { prometheus: { address: m.prometheusAddress } } } : {}) };
        if (p.action === "created") await clients.regions.createRegion({ region });
        else await clients.regions.updateRegion({ region });
      } else if (m.kind === "Project") await writeProject(clients, m.project, p.action, false);
      else if (m.kind === "Notifier") {
        const secret = await writeNotifier(clients, m.notifier, p.action, false);
        // Shown once, as an agent token is: ctrl never shows it again (`flotilla notifier rotate-secret` makes another).
        if (secret) secrets.set(p, secret);
      } else if (p.action === "created") await m.kind.create(clients, m.resource, options.message, false);
      else await m.kind.update(clients, m.resource, options.message, false);
    } catch (error) {
      throw refusal(m, error);
    }
  };
  const done = new Set<Plan>();
  const secrets = new Map<Plan, string>();
  const writeAll = (some: Plan[]) =>
    inFlight(some, async (p) => {
      await write(p);
      done.add(p);
    });
  try {
    // Regions before what is placed in them, projects before what belongs to them.
    await writeAll(plans.filter((p) => p.manifest.kind === "Region"));
    await writeAll(plans.filter((p) => p.manifest.kind === "Project"));
    await writeAll(plans.filter((p) => p.manifest.kind !== "Region" && p.manifest.kind !== "Project"));
  } finally {
    // On a failure (a concurrent change since the check), what was written is still said.
    for (const p of plans) {
      if (!done.has(p)) continue;
      out(`${label(p.manifest)} ${p.action}${options.dryRun ? " (dry run)" : ""}`);
      const secret = secrets.get(p);
      if (secret) out(`  signing secret (shown once, keep it for your receiver): ${secret}`);
    }
  }
  if (!options.wait || options.dryRun) return;
  const deployments = plans.filter((p) => typeof p.manifest.kind !== "string" && p.manifest.kind.kind === "Deployment").map((p) => p.manifest.name);
  await waitRunning(clients, deployments, options.timeoutMs, out);
}

/** Waits for the deployments to be RUNNING (exit 1 on FAILED, 2 on timeout: the errors say which). */
export async function waitRunning(clients: Clients, ids: string[], timeoutMs: number, out: Out): Promise<void> {
  if (ids.length === 0) return;
  try {
    await followRollouts(clients, ids, {
      timeoutMs,
      progress: (id, summary) => out(summary === "RUNNING" ? `deployment/${id} is RUNNING` : `deployment/${id}: ${summary}`),
    });
  } catch (error) {
    if (error instanceof FailedRollout) throw new ExitError(`error: ${error.message}`, EXIT.failed);
    throw error;
  }
}

/** Prints what apply would change, field by field; true when something would. */
export async function diff(clients: Clients, manifests: Manifest[], out: Out): Promise<boolean> {
  let changed = false;
  for (const p of (await plan(clients, manifests)).plans) {
    if (p.action === "unchanged") continue;
    changed = true;
    const m = p.manifest;
    let before = new Map<string, string>();
    let after: Map<string, string>;
    if (m.kind === "Region") {
      const shown = (labels: Record<string, string>, address: string) => ({ labels, ...(address ? { metrics: { prometheus: { address } } } : {}) });
      after = flatten(shown(m.labels, m.prometheusAddress));
      if (p.current) before = flatten(shown((p.current as Region).labels, (p.current as Region).metrics?.prometheus?.address ?? ""));
      out(p.current ? `~ ${label(m)}` : `+ ${label(m)} (new)`);
    } else if (m.kind === "Project") {
      after = flatten(projectSpec(m.project));
      if (p.current) before = flatten(projectSpec(p.current as Project));
      out(p.current ? `~ ${label(m)}` : `+ ${label(m)} (new)`);
    } else if (m.kind === "Notifier") {
      after = flatten(notifierSpec(m.notifier));
      if (p.current) before = flatten(notifierSpec(p.current as Notifier));
      out(p.current ? `~ ${label(m)}` : `+ ${label(m)} (new)`);
    } else {
      const current = p.current as AnyResource | undefined;
      after = flatten({ metadata: { project: m.resource.project }, ...specOf(m.kind.schema, m.resource) });
      if (current) before = flatten({ metadata: { project: current.project }, ...specOf(m.kind.schema, current) });
      out(current ? `~ ${label(m)} (revision ${current.revision})` : `+ ${label(m)} (new)`);
    }
    for (const path of [...new Set([...before.keys(), ...after.keys()])].sort()) {
      const a = before.get(path);
      const b = after.get(path);
      if (a === b) continue;
      if (a === undefined) out(`    + ${path}: ${b}`);
      else if (b === undefined) out(`    - ${path}: ${a}`);
      else out(`    ~ ${path}: ${a} → ${b}`);
    }
  }
  return changed;
}

/** Leaf paths (image, regions[0].replicas, env[1].value) → JSON values. */
function flatten(value: JsonValue, prefix = "", into = new Map<string, string>()): Map<string, string> {
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) flatten(v, `${prefix}[${i}]`, into);
  } else if (value !== null && typeof value === "object")
    for (const [k, v] of Object.entries(value)) flatten(v as JsonValue, prefix ? `${prefix}.${k}` : k, into);
  else into.set(prefix, JSON.stringify(value));
  return into;
}

export async function deleteManifests(clients: Clients, manifests: Manifest[], options: { message: string; ignoreNotFound: boolean }, out: Out): Promise<void> {
  // The reverse of apply's order: what is placed in a region goes before the region.
  for (const m of ordered(manifests).reverse()) {
    try {
      if (m.kind === "Region") await clients.regions.deleteRegion({ name: m.name });
      else if (m.kind === "Project") await clients.projects.deleteProject({ name: m.name });
      else if (m.kind === "Notifier") await clients.notifiers.deleteNotifier({ name: m.name });
      else await (m as ResourceManifest).kind.delete(clients, m.name, options.message);
      out(`${label(m)} deleted`);
    } catch (error) {
      if (error instanceof ConnectError && error.code === Code.NotFound && options.ignoreNotFound) continue;
      throw refusal(m, error);
    }
  }
}
