// Region-scoped agent tokens. Only a SHA-256 of each token is stored; a lookup by hash
// leaks nothing useful through timing, since the attacker does not control the hash.
// A token belongs to a region row (its id), not to a name: deleting the region deletes its
// tokens, and a new region of the same name starts with none.
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { AgentTokenSchema, type AgentToken } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { createHash, randomBytes } from "node:crypto";
import type { Kysely } from "kysely";
import { StoreError } from "./errors.ts";
import { decodePageToken, pageSize, toPage, type Page } from "./paging.ts";
import type { Database } from "./schema.ts";
import type { RegionRepository } from "./regions.ts";

export const AGENT_TOKEN_PREFIX = "flt_agent_";
/** last_use_time is written at most this often per token: a write per call would be too much. */
export const LAST_USE_RESOLUTION_MS = 60_000;

export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** What a valid token proves. */
export interface TokenGrant {
  tokenId: string;
  regionId: number;
  region: string;
  /** Unix ms, or undefined: never. */
  expireTime: number | undefined;
}

export class AgentTokenRepository {
  readonly #db: Kysely<Database>;
  readonly #regions: RegionRepository;

  constructor(db: Kysely<Database>, regions: RegionRepository) {
    this.#db = db;
    this.#regions = regions;
  }

  /** Mints a token for the region; the token is returned once and never stored. */
  async create(regionName: string, expireTime?: number): Promise<{ id: string; token: string }> {
    const region = await this.#regions.resolve(regionName);
    const id = randomBytes(8).toString("hex");
    const token = AGENT_TOKEN_PREFIX + randomBytes(32).toString("base64url");
    await this.#db
      .insertInto("agent_tokens")
      .values({ id, region_id: region.id, token_hash: hashToken(token), create_time: Date.now(), expire_time: expireTime ?? null })
      .execute();
    return { id, token };
  }

  /** The grant of a known, unexpired token, else undefined. Records the use (to LAST_USE_RESOLUTION_MS). */
  async authenticate(token: string, now = Date.now()): Promise<TokenGrant | undefined> {
    const row = await this.#db
      .selectFrom("agent_tokens")
      .innerJoin("regions", "regions.id", "agent_tokens.region_id")
      .select(["agent_tokens.id", "agent_tokens.region_id", "agent_tokens.expire_time", "agent_tokens.last_use_time", "regions.name"])
      .where("agent_tokens.token_hash", "=", hashToken(token))
      .executeTakeFirst();
    const expireTime = row?.expire_time == null ? undefined : Number(row.expire_time);
    if (!row || (expireTime !== undefined && expireTime <= now)) return undefined;
    if (row.last_use_time == null || now - Number(row.last_use_time) >= LAST_USE_RESOLUTION_MS) {
      // Best effort and off the call's path: a lost update only makes "last used" older.
      this.#db
        .updateTable("agent_tokens")
        .set({ last_use_time: now })
        .where("id", "=", row.id)
        .execute()
        .catch(() => {});
    }
    return { tokenId: row.id, regionId: row.region_id, region: row.name, expireTime };
  }

  /** Of `tokens`, those still known and unexpired (one query per 1,000). */
  async stillValid(tokens: string[], now = Date.now()): Promise<Set<string>> {
    const byHash = new Map(tokens.map((token) => [hashToken(token), token]));
    const valid = new Set<string>();
    const hashes = [...byHash.keys()];
    for (let i = 0; i < hashes.length; i += 1000) {
      const rows = await this.#db
        .selectFrom("agent_tokens")
        .select("token_hash")
        .where("token_hash", "in", hashes.slice(i, i + 1000))
        .where((eb) => eb.or([eb("expire_time", "is", null), eb("expire_time", ">", now)]))
        .execute();
      for (const row of rows) valid.add(byHash.get(row.token_hash)!);
    }
    return valid;
  }

  /** Tokens ordered by id, of one region or (regionName "") of all. */
  async list(regionName: string, requestedPageSize: number, pageToken: string): Promise<Page<AgentToken>> {
    const size = pageSize(requestedPageSize);
    const after = decodePageToken(pageToken);
    let query = this.#db
      .selectFrom("agent_tokens")
      .innerJoin("regions", "regions.id", "agent_tokens.region_id")
      .select(["agent_tokens.id", "regions.name", "agent_tokens.create_time", "agent_tokens.expire_time", "agent_tokens.last_use_time"])
      .orderBy("agent_tokens.id")
      .limit(size + 1);
    if (regionName !== "") query = query.where("agent_tokens.region_id", "=", (await this.#regions.resolve(regionName)).id);
    if (after !== undefined) query = query.where("agent_tokens.id", ">", after);
    return toPage(
      await query.execute(),
      size,
      (r) => r.id,
      (r) =>
        create(AgentTokenSchema, {
          id: r.id,
          region: r.name,
          createTime: timestampFromMs(Number(r.create_time)),
          expireTime: r.expire_time == null ? undefined : timestampFromMs(Number(r.expire_time)),
          lastUseTime: r.last_use_time == null ? undefined : timestampFromMs(Number(r.last_use_time)),
        }),
    );
  }

  /** Deletes the token; NOT_FOUND if there is none with this id. */
  async revoke(id: string): Promise<void> {
    const result = await this.#db.deleteFrom("agent_tokens").where("id", "=", id).executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) throw new StoreError("not_found", `agent token ${JSON.stringify(id)} not found`, "id");
  }
}
