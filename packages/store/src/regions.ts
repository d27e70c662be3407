// Regions: each carries the head of its commit-ordered version sequence, and its labels.
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { create } from "@bufbuild/protobuf";
import { RegionSchema, type Region } from "@flotilla/proto/ctrl/v1/region_pb.js";
import type { Kysely } from "kysely";
import type { Dialect } from "./database.ts";
import { StoreError } from "./errors.ts";
import { decodePageToken, pageSize, toPage, type Page } from "./paging.ts";
import type { Database } from "./schema.ts";

export type RegionLabels = Record<string, string>;

/** Whether a region's labels are selected (a parsed label selector). */
export type RegionSelector = (labels: Readonly<RegionLabels>) => boolean;

const everyRegion: RegionSelector = () => true;

export interface RegionRow {
  id: number;
  name: string;
  headVersion: number;
}

export class RegionRepository {
  readonly #db: Kysely<Database>;
  readonly #dialect: Dialect;

  constructor(db: Kysely<Database>, dialect: Dialect) {
    this.#db = db;
    this.#dialect = dialect;
  }

  /** Idempotent: creating an existing region returns it as it is (its labels and address change only by update). */
  async create(name: string, labels: RegionLabels = {}, prometheusAddress = ""): Promise<Region> {
    try {
      await this.#db
        .insertInto("regions")
        .values({ name, head_version: 0, create_time: Date.now(), labels: encodeLabels(labels), prometheus_address: prometheusAddress || null })
        .execute();
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
    }
    return this.get(name);
  }

  /** Replaces the region's labels and Prometheus address (empty: none); NOT_FOUND for an unknown region. */
  async update(name: string, labels: RegionLabels, prometheusAddress = ""): Promise<Region> {
    await this.#db
      .updateTable("regions")
      .set({ labels: encodeLabels(labels), prometheus_address: prometheusAddress || null })
      .where("name", "=", name)
      .execute();
    return this.get(name);
  }

  async get(name: string): Promise<Region> {
    const row = await this.#db.selectFrom("regions").selectAll().where("name", "=", name).executeTakeFirst();
    if (!row) throw new StoreError("not_found", `region ${JSON.stringify(name)} not found`, "name");
    return toRegion(row);
  }

  /** The region's id and head, or NOT_FOUND naming `field`. */
  async resolve(name: string, field = "region"): Promise<RegionRow> {
    const row = await this.#db.selectFrom("regions").select(["id", "name", "head_version"]).where("name", "=", name).executeTakeFirst();
    if (!row) throw new StoreError("not_found", `region ${JSON.stringify(name)} not found`, field);
    return { id: row.id, name: row.name, headVersion: Number(row.head_version) };
  }

  /** Region row `id`'s secret key epoch (0 for a region gone: its agent gets nothing of it anyway). */
  async secretKeyEpoch(id: number): Promise<number> {
    const row = await this.#db.selectFrom("regions").select("secret_key_epoch").where("id", "=", id).executeTakeFirst();
    return Number(row?.secret_key_epoch ?? 0);
  }

  /** The region's Prometheus address (Region.metrics.prometheus.address); empty: none. */
  async prometheusAddress(id: number): Promise<string> {
    const row = await this.#db.selectFrom("regions").select("prometheus_address").where("id", "=", id).executeTakeFirst();
    return row?.prometheus_address ?? "";
  }

  /** Ids of the named regions that exist (one query). */
  async idsByName(names: string[]): Promise<Map<string, number>> {
    if (names.length === 0) return new Map();
    const rows = await this.#db.selectFrom("regions").select(["id", "name"]).where("name", "in", names).execute();
    return new Map(rows.map((r) => [r.name, r.id]));
  }

  /** Every region's labels, by name (what project bounds select regions by). */
  async allLabels(): Promise<Map<string, RegionLabels>> {
    const rows = await this.#db.selectFrom("regions").select(["name", "labels"]).execute();
    return new Map(rows.map((r) => [r.name, decodeLabels(r.labels)]));
  }

  /**
   * A page of regions in name order, only those `selected`. Each page reads at most
   * page-size regions, so a page may hold fewer (even none) while next_page_token goes on.
   */
  async list(requestedPageSize: number, pageToken: string, selected = everyRegion): Promise<Page<Region>> {
    const size = pageSize(requestedPageSize);
    const after = decodePageToken(pageToken);
    let query = this.#db
      .selectFrom("regions")
      .selectAll()
      .orderBy("name")
      .limit(size + 1);
    if (after !== undefined) query = query.where("name", ">", after);
    const page = toPage(await query.execute(), size, (r) => r.name, toRegion);
    return { items: page.items.filter((r) => selected(r.labels)), nextPageToken: page.nextPageToken };
  }

  /** Refused (FAILED_PRECONDITION) while any resource is placed in the region. */
  async delete(name: string): Promise<void> {
    await this.#db.transaction().execute(async (tx) => {
      // Locking the region row orders this after any write holding the region's version.
      let query = tx.selectFrom("regions").select("id").where("name", "=", name);
      if (this.#dialect.locksRows) query = query.forUpdate();
      const region = await query.executeTakeFirst();
      if (!region) throw new StoreError("not_found", `region ${JSON.stringify(name)} not found`, "name");
      const used = await tx.selectFrom("placements").select("resource_id").where("region_id", "=", region.id).limit(1).executeTakeFirst();
      if (used) {
        throw new StoreError(
          "failed_precondition",
          `region ${JSON.stringify(name)} still has resources (e.g. ${JSON.stringify(used.resource_id)}); delete them first`,
          "name",
        );
      }
      await tx.deleteFrom("agent_tokens").where("region_id", "=", region.id).execute();
      await tx.deleteFrom("observations").where("region_id", "=", region.id).execute();
      await tx.deleteFrom("agents").where("region_id", "=", region.id).execute();
      await tx.deleteFrom("deployment_changes").where("region_id", "=", region.id).execute();
      await tx.deleteFrom("regions").where("id", "=", region.id).execute();
    });
  }
}

function toRegion(row: { name: string; head_version: number; create_time: number; labels: string | null; prometheus_address?: string | null }): Region {
  return create(RegionSchema, {
    ...(row.prometheus_address ? { metrics: { prometheus: { address: row.prometheus_address } } } : {}),
    name: row.name,
    headVersion: BigInt(row.head_version),
    createTime: timestampFromMs(Number(row.create_time)),
    labels: decodeLabels(row.labels),
  });
}

/** Labels as stored: a JSON object with its keys in order, or NULL for none. */
function decodeLabels(stored: string | null): RegionLabels {
  return stored === null ? {} : (JSON.parse(stored) as RegionLabels);
}

function encodeLabels(labels: RegionLabels): string | null {
  const keys = Object.keys(labels).sort();
  return keys.length === 0 ? null : JSON.stringify(Object.fromEntries(keys.map((k) => [k, labels[k]])));
}

export function isDuplicateKey(error: unknown): boolean {
  const e = error as { code?: string; errno?: number };
  return e?.code === "ER_DUP_ENTRY" || e?.code === "SQLITE_CONSTRAINT_UNIQUE" || e?.code === "SQLITE_CONSTRAINT_PRIMARYKEY";
}
