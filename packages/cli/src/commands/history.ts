// flotilla history | rollback | audit: who changed what, and going back.
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { Clients } from "../client.ts";
import { UsageError } from "../errors.ts";
import { resourceKindNamed, specOf, type AnyResource, type ResourceKindOps } from "../kinds.ts";
import { age, isoTime, structured, table, type OutputFormat } from "../output.ts";

type Out = (text: string) => void;

function kindOf(name: string): ResourceKindOps<AnyResource> {
  const kind = resourceKindNamed(name);
  if (!kind) throw new UsageError(`unknown kind ${JSON.stringify(name)}: one of deployment, sentinel, networkpolicy`);
  return kind;
}

export async function history(clients: Clients, kindName: string, name: string, format: OutputFormat, out: Out): Promise<void> {
  const kind = kindOf(kindName);
  const { revisions } = await clients.history.listRevisions({ resourceType: kind.type, id: name, pageSize: 1000 });
  if (format === "json" || format === "yaml") {
    out(
      structured(
        revisions.map((r) => ({
          revision: Number(r.revision),
          actor: r.actor,
          time: isoTime(r.createTime),
          message: r.message,
          spec: r.spec.value ? specOf(kind.schema, r.spec.value as AnyResource) : null,
        })),
        format,
      ),
    );
    return;
  }
  const image = (r: (typeof revisions)[number]) => (r.spec.case === "deployment" || r.spec.case === "sentinel" ? r.spec.value.image : "-");
  out(
    table(
      ["REVISION", "ACTOR", "TIME", "AGE", "IMAGE", "MESSAGE"],
      revisions.map((r) => [String(r.revision), r.actor, isoTime(r.createTime), age(r.createTime), image(r), r.message || "-"]),
    ),
  );
}

export async function rollback(clients: Clients, kindName: string, name: string, toRevision: number, message: string, out: Out): Promise<void> {
  const kind = kindOf(kindName);
  const { revision } = await clients.history.rollback({ resourceType: kind.type, id: name, toRevision: BigInt(toRevision), message });
  out(`${kind.singular}/${name} rolled back to revision ${toRevision}'s spec (now revision ${revision?.revision})`);
}

/** Which audit events to show: the last `sinceMs`, of `actor`, of `project`, when given. */
export interface AuditFilter {
  sinceMs?: number;
  actor?: string;
  project?: string;
}

export async function audit(clients: Clients, { sinceMs, actor, project }: AuditFilter, limit: number, format: OutputFormat, out: Out): Promise<void> {
  const events = [];
  let pageToken = "";
  do {
    const page = await clients.history.listAuditEvents({
      since: sinceMs === undefined ? undefined : timestampFromMs(Date.now() - sinceMs),
      actor: actor ?? "",
      project: project ?? "",
      pageSize: Math.min(1000, limit - events.length),
      pageToken,
    });
    events.push(...page.events);
    pageToken = page.nextPageToken;
  } while (pageToken !== "" && events.length < limit);
  if (format === "json" || format === "yaml") {
    out(
      structured(
        events.map((e) => ({
          time: isoTime(e.time),
          actor: e.actor,
          action: e.action,
          object: `${e.objectKind}/${e.objectId}`,
          revision: Number(e.revision),
          message: e.message,
          project: e.project,
          groups: e.groups,
          decision: e.decision,
        })),
        format,
      ),
    );
    return;
  }
  out(
    table(
      // A person signed in with single sign-on is shown with their groups: oidc:alice(team-a).
      ["TIME", "DECISION", "PROJECT", "ACTOR", "ACTION", "OBJECT", "REVISION", "MESSAGE"],
      events.map((e) => [
        isoTime(e.time),
        e.decision || "allowed",
        e.project || "-",
        e.groups.length ? `${e.actor}(${e.groups.join(",")})` : e.actor,
        e.action,
        e.objectId ? `${e.objectKind}/${e.objectId}` : "-",
        e.revision ? String(e.revision) : "-",
        e.message || "-",
      ]),
    ),
  );
}
