// Projects (ctrl.v1.Project, migrations/0013_projects.ts): a row per project, its fields but
// the name and times as proto3 JSON. Few and small, so ctrl reads them all at once (`all`) and
// decides every call's access from that copy.
import { create, fromJsonString, toJsonString } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { ProjectSchema, type Project } from "@flotilla/proto/ctrl/v1/project_pb.js";
import type { Kysely } from "kysely";
import { StoreError } from "./errors.ts";
import { decodePageToken, pageSize, toPage, type Page } from "./paging.ts";
import { isDuplicateKey } from "./regions.ts";
import type { Database, ResourceTableName } from "./schema.ts";

/** The project of every resource that names none, and of everything written before projects. */
export const DEFAULT_PROJECT = "default";

const RESOURCE_TABLES: readonly ResourceTableName[] = ["deployments", "sentinels", "network_policies"];

export class ProjectRepository {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /** Creates the project; with `dryRun`, only checks that its name is free. */
  async create(project: Project, dryRun = false, now = Date.now()): Promise<Project> {
    if (dryRun) {
      const taken = await this.#db.selectFrom("projects").select("name").where("name", "=", project.name).executeTakeFirst();
      if (taken) throw new StoreError("already_exists", `project ${JSON.stringify(project.name)} already exists`, "project.name");
      return project;
    }
    try {
      await this.#db
        .insertInto("projects")
        .values({ name: project.name, spec: specJson(project), create_time: now, update_time: now })
        .execute();
    } catch (error) {
      if (isDuplicateKey(error)) throw new StoreError("already_exists", `project ${JSON.stringify(project.name)} already exists`, "project.name");
      throw error;
    }
    return this.get(project.name);
  }

  async get(name: string): Promise<Project> {
    const row = await this.#db.selectFrom("projects").selectAll().where("name", "=", name).executeTakeFirst();
    if (!row) throw new StoreError("not_found", `project ${JSON.stringify(name)} not found`, "name");
    return toProject(row);
  }

  /** Every project, in name order. */
  async all(): Promise<Project[]> {
    return (await this.#db.selectFrom("projects").selectAll().orderBy("name").execute()).map(toProject);
  }

  /** A page in name order, only the projects `visible` admits (undefined: all). */
  async list(requestedPageSize: number, pageToken: string, visible?: ReadonlySet<string>): Promise<Page<Project>> {
    const size = pageSize(requestedPageSize);
    const after = decodePageToken(pageToken);
    if (visible?.size === 0) return { items: [], nextPageToken: "" };
    let query = this.#db
      .selectFrom("projects")
      .selectAll()
      .orderBy("name")
      .limit(size + 1);
    if (after !== undefined) query = query.where("name", ">", after);
    if (visible) query = query.where("name", "in", [...visible]);
    return toPage(await query.execute(), size, (r) => r.name, toProject);
  }

  /** Replaces the project's fields; NOT_FOUND for an unknown project. With `dryRun`, only checks that it exists. */
  async update(project: Project, dryRun = false, now = Date.now()): Promise<Project> {
    if (dryRun) return { ...(await this.get(project.name)), ...project, createTime: undefined, updateTime: undefined };
    const result = await this.#db
      .updateTable("projects")
      .set({ spec: specJson(project), update_time: now })
      .where("name", "=", project.name)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) throw new StoreError("not_found", `project ${JSON.stringify(project.name)} not found`, "project.name");
    return this.get(project.name);
  }

  /** Refused while resources belong to it, and for the default project (what names no project). */
  async delete(name: string): Promise<void> {
    if (name === DEFAULT_PROJECT)
      throw new StoreError("failed_precondition", `project ${JSON.stringify(name)} holds what names no project: it is never deleted`, "name");
    await this.#db.transaction().execute(async (tx) => {
      for (const table of RESOURCE_TABLES) {
        const owned = await tx.selectFrom(table).select("id").where("project", "=", name).limit(1).executeTakeFirst();
        if (owned) throw new StoreError("failed_precondition", `project ${JSON.stringify(name)} still owns ${table} ${JSON.stringify(owned.id)}`, "name");
      }
      const result = await tx.deleteFrom("projects").where("name", "=", name).executeTakeFirst();
      if (Number(result.numDeletedRows) === 0) throw new StoreError("not_found", `project ${JSON.stringify(name)} not found`, "name");
    });
  }
}

function specJson(project: Project): string {
  const spec = create(ProjectSchema, { ...project, name: "", createTime: undefined, updateTime: undefined });
  return toJsonString(ProjectSchema, spec);
}

function toProject(row: Database["projects"]): Project {
  const project = fromJsonString(ProjectSchema, row.spec, { ignoreUnknownFields: true });
  project.name = row.name;
  project.createTime = timestampFromMs(Number(row.create_time));
  project.updateTime = timestampFromMs(Number(row.update_time));
  return project;
}
