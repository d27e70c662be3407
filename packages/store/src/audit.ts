// The audit trail: one row per accepted write, in the write's own transaction where the
// write has one, so a change and its record commit together.
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { AuditEventSchema, type AuditEvent } from "@flotilla/proto/ctrl/v1/history_pb.js";
import type { Kysely } from "kysely";
import { StoreError } from "./errors.ts";
import { decodePageToken, pageSize, toPage, type Page } from "./paging.ts";
import type { Database } from "./schema.ts";

/** Who makes a change, and why (an optional message). */
export interface ChangeAuthor {
  actor: string;
  message: string;
  /** The identity provider's groups of a person signed in with OIDC. */
  groups?: readonly string[];
}

/** Direct store callers (tests, scripts) act as the bootstrap admin. */
export const ADMIN_AUTHOR: ChangeAuthor = { actor: "admin", message: "" };

export interface AuditRecord {
  author: ChangeAuthor;
  /** The RPC, e.g. "UpdateDeployment". */
  action: string;
  objectKind: string;
  objectId: string;
  /** The object's revision after the change; 0 where objects have none. */
  revision: number;
  /** The project of the object; absent for what belongs to none (regions, tokens, operators). */
  project?: string;
  /** Default "allowed"; "denied" for a refused attempt. */
  decision?: "allowed" | "denied";
}

export class AuditLog {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /** Appends the record, in `tx` when given (the write's transaction). */
  async record(record: AuditRecord, tx: Kysely<Database> = this.#db, now = Date.now()): Promise<void> {
    await tx
      .insertInto("audit_events")
      .values({
        time: now,
        actor: record.author.actor,
        action: record.action,
        object_kind: record.objectKind,
        object_id: record.objectId.slice(0, 255),
        revision: record.revision,
        message: record.author.message.slice(0, 1024),
        project: record.project ?? "",
        principal_groups: (record.author.groups ?? []).join(",").slice(0, 2048),
        decision: record.decision ?? "allowed",
      })
      .execute();
  }

  /**
   * Newest first; only events at or after `since` (Unix ms), of `actor`, and of the projects in
   * `projects`, when given.
   */
  async list(
    filter: { since?: number; actor?: string; projects?: ReadonlySet<string> },
    requestedPageSize: number,
    pageToken: string,
  ): Promise<Page<AuditEvent>> {
    const size = pageSize(requestedPageSize);
    const after = decodePageToken(pageToken);
    if (filter.projects?.size === 0) return { items: [], nextPageToken: "" };
    let query = this.#db
      .selectFrom("audit_events")
      .selectAll()
      .orderBy("id", "desc")
      .limit(size + 1);
    if (after !== undefined) {
      const id = Number(after);
      if (!Number.isSafeInteger(id)) throw new StoreError("invalid_argument", "page_token: not a token from a previous page", "page_token");
      query = query.where("id", "<", id);
    }
    if (filter.since !== undefined) query = query.where("time", ">=", filter.since);
    if (filter.actor) query = query.where("actor", "=", filter.actor);
    if (filter.projects) query = query.where("project", "in", [...filter.projects]);
    return toPage(
      await query.execute(),
      size,
      (r) => String(r.id),
      (r) =>
        create(AuditEventSchema, {
          id: BigInt(r.id),
          time: timestampFromMs(Number(r.time)),
          actor: r.actor,
          action: r.action,
          objectKind: r.object_kind,
          objectId: r.object_id,
          revision: BigInt(r.revision),
          message: r.message,
          project: r.project,
          groups: r.principal_groups ? r.principal_groups.split(",") : [],
          decision: r.decision,
        }),
    );
  }

  /** The project each of these objects was in when `action` (its deletion) was recorded, by id; the newest such event counts. */
  async projectsAtDeletion(objectKind: string, action: string, ids: readonly string[]): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    if (ids.length === 0) return found;
    const rows = await this.#db
      .selectFrom("audit_events")
      .select(["object_id", "project"])
      .where("object_kind", "=", objectKind)
      .where("action", "=", action)
      .where("object_id", "in", [...ids])
      .orderBy("id")
      .execute();
    for (const row of rows) found.set(row.object_id, row.project);
    return found;
  }

  /** Deletes events older than `maxAgeMs`; how many. */
  async prune(maxAgeMs: number, now = Date.now()): Promise<number> {
    const result = await this.#db
      .deleteFrom("audit_events")
      .where("time", "<", now - maxAgeMs)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
