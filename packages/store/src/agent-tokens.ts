// Region-scoped agent tokens. Only a SHA-256 of each token is stored; a lookup by hash
// leaks nothing useful through timing, since the attacker does not control the hash.
// A token belongs to a region row (its id), not to a name: deleting the region deletes its
// tokens, and a new region of the same name starts with none.
//
// A token is `flt_agent_` + base64url(32 random bytes, then the first 16 bytes of their
// HMAC-SHA256 under this deployment's key). The MAC lets ctrl refuse a forged token in
// microseconds, without a query (TokenScreen); the database still decides whether a token
// with a good MAC is valid (revocation, expiry, region), so a leaked key only costs that
// screen. Tokens minted before MACs (32 random bytes) stay valid: their hashes are screened
// from memory.
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { AgentTokenSchema, type AgentToken } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { createHash, createHmac, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from "node:crypto";
import type { Kysely } from "kysely";
import { StoreError } from "./errors.ts";
import { decodePageToken, pageSize, toPage, type Page } from "./paging.ts";
import type { Database } from "./schema.ts";
import type { RegionRepository } from "./regions.ts";

export const AGENT_TOKEN_PREFIX = "flt_agent_";
/** last_use_time is written at most this often per token: a write per call would be too much. */
export const LAST_USE_RESOLUTION_MS = 60_000;

const SECRET_BYTES = 32;
const MAC_BYTES = 16;
/** agent_tokens.token_format */
const LEGACY_FORMAT = 1;
const MAC_FORMAT = 2;
// base64url without padding: 48 bytes are 64 characters, 32 bytes 43.
const MAC_TOKEN = new RegExp(`^${AGENT_TOKEN_PREFIX}[A-Za-z0-9_-]{64}$`);
const LEGACY_TOKEN = new RegExp(`^${AGENT_TOKEN_PREFIX}[A-Za-z0-9_-]{43}$`);
const MAC_KEY_NAME = "agent_token_mac";

// (A KeyObject: with a Buffer, createHmac prepares the key anew each call, several times the cost.)
export function tokenMac(key: KeyObject, secret: Uint8Array): Buffer {
  return createHmac("sha256", key).update(secret).digest().subarray(0, MAC_BYTES);
}

export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** Of `tokens`, those whose hash is in `table` (agent_tokens or operators) and unexpired: one query per 1,000. */
export async function stillValidTokens(db: Kysely<Database>, table: "agent_tokens" | "operators", tokens: string[], now: number): Promise<Set<string>> {
  const byHash = new Map(tokens.map((token) => [hashToken(token), token]));
  const valid = new Set<string>();
  const hashes = [...byHash.keys()];
  for (let i = 0; i < hashes.length; i += 1000) {
    const rows = await db
      .selectFrom(table)
      .select("token_hash")
      .where("token_hash", "in", hashes.slice(i, i + 1000))
      .where((eb) => eb.or([eb("expire_time", "is", null), eb("expire_time", ">", now)]))
      .execute();
    for (const row of rows) valid.add(byHash.get(row.token_hash)!);
  }
  return valid;
}

/** What a valid token proves. */
export interface TokenGrant {
  tokenId: string;
  regionId: number;
  region: string;
  /** Unix ms, or undefined: never. */
  expireTime: number | undefined;
}

/**
 * Tells from a token alone, without a query, whether it can be one this deployment minted:
 * a MAC that checks out, or (minted before MACs) a hash among the old tokens'. What passes
 * still needs `authenticate`.
 */
export class TokenScreen {
  readonly #key: KeyObject;
  readonly #loadLegacy: () => Promise<Set<string>>;
  readonly #legacyReloadMs: number;
  #legacy: Set<string>;
  #legacyLoadedAt = Date.now();
  #reloading = false;

  constructor(key: KeyObject, legacy: Set<string>, loadLegacy: () => Promise<Set<string>>, legacyReloadMs: number) {
    this.#key = key;
    this.#legacy = legacy;
    this.#loadLegacy = loadLegacy;
    this.#legacyReloadMs = legacyReloadMs;
  }

  mayBeValid(token: string): boolean {
    if (MAC_TOKEN.test(token)) {
      const bytes = Buffer.from(token.slice(AGENT_TOKEN_PREFIX.length), "base64url");
      return timingSafeEqual(tokenMac(this.#key, bytes.subarray(0, SECRET_BYTES)), bytes.subarray(SECRET_BYTES));
    }
    if (!LEGACY_TOKEN.test(token)) return false;
    if (this.#legacy.has(hashToken(token))) return true;
    this.#reloadLegacy();
    return false;
  }

  /**
   * A replica of an earlier version (during a rolling upgrade) may still mint tokens without
   * a MAC: a miss reloads the old tokens' hashes, at most once per `legacyReloadMs`, so
   * such a token is admitted soon after. A spray of such forgeries costs one query per interval.
   */
  #reloadLegacy(): void {
    if (this.#reloading || Date.now() - this.#legacyLoadedAt < this.#legacyReloadMs) return;
    this.#reloading = true;
    this.#loadLegacy()
      .then((legacy) => (this.#legacy = legacy))
      .catch(() => {}) // the next miss after the interval tries again
      .finally(() => {
        this.#legacyLoadedAt = Date.now();
        this.#reloading = false;
      });
  }
}

export class AgentTokenRepository {
  readonly #db: Kysely<Database>;
  readonly #regions: RegionRepository;
  #macKey: Promise<KeyObject> | undefined;

  constructor(db: Kysely<Database>, regions: RegionRepository) {
    this.#db = db;
    this.#regions = regions;
  }

  /** Mints a token for the region; the token is returned once and never stored. */
  async create(regionName: string, expireTime?: number): Promise<{ id: string; token: string }> {
    const region = await this.#regions.resolve(regionName);
    const id = randomBytes(8).toString("hex");
    const secret = randomBytes(SECRET_BYTES);
    const token = AGENT_TOKEN_PREFIX + Buffer.concat([secret, tokenMac(await this.macKey(), secret)]).toString("base64url");
    await this.#db
      .insertInto("agent_tokens")
      .values({
        id,
        region_id: region.id,
        token_hash: hashToken(token),
        create_time: Date.now(),
        expire_time: expireTime ?? null,
        token_format: MAC_FORMAT,
      })
      .execute();
    return { id, token };
  }

  /** A screen for forged tokens (TokenScreen); tokens minted before MACs are reloaded on a miss at most every `legacyReloadMs`. */
  async screen(legacyReloadMs: number): Promise<TokenScreen> {
    const loadLegacy = async () => {
      const rows = await this.#db.selectFrom("agent_tokens").select("token_hash").where("token_format", "=", LEGACY_FORMAT).execute();
      return new Set(rows.map((row) => row.token_hash));
    };
    return new TokenScreen(await this.macKey(), await loadLegacy(), loadLegacy, legacyReloadMs);
  }

  /** This deployment's MAC key (made by migration 0005), read once. */
  macKey(): Promise<KeyObject> {
    this.#macKey ??= this.#db
      .selectFrom("server_keys")
      .select("key_hex")
      .where("name", "=", MAC_KEY_NAME)
      .executeTakeFirstOrThrow()
      .then((row) => createSecretKey(Buffer.from(row.key_hex, "hex")))
      .catch((error: unknown) => {
        this.#macKey = undefined; // a failed read is retried by the next caller
        throw error;
      });
    return this.#macKey;
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
  stillValid(tokens: string[], now = Date.now()): Promise<Set<string>> {
    return stillValidTokens(this.#db, "agent_tokens", tokens, now);
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

  /**
   * Deletes the token and, in the same transaction, moves its region's secret key epoch: what is
   * sealed for the region from now on opens under keys its holder never received
   * (secrets.ts). NOT_FOUND if there is none with this id.
   */
  async revoke(id: string): Promise<void> {
    await this.#db.transaction().execute(async (tx) => {
      const token = await tx.selectFrom("agent_tokens").select("region_id").where("id", "=", id).executeTakeFirst();
      if (!token) throw new StoreError("not_found", `agent token ${JSON.stringify(id)} not found`, "id");
      await tx.deleteFrom("agent_tokens").where("id", "=", id).execute();
      await tx
        .updateTable("regions")
        .set((eb) => ({ secret_key_epoch: eb("secret_key_epoch", "+", 1) }))
        .where("id", "=", token.region_id)
        .execute();
    });
  }
}
