// Region-scoped agent tokens. Only a SHA-256 of each token is stored; a lookup by hash
// leaks nothing useful through timing, since the attacker does not control the hash.
import { createHash, randomBytes } from "node:crypto";
import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";
import type { RegionRepository } from "./regions.ts";

export const AGENT_TOKEN_PREFIX = "flt_agent_";

export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

export class AgentTokenRepository {
  readonly #db: Kysely<Database>;
  readonly #regions: RegionRepository;

  constructor(db: Kysely<Database>, regions: RegionRepository) {
    this.#db = db;
    this.#regions = regions;
  }

  /** Mints a token for the region; the token is returned once and never stored. */
  async create(regionName: string): Promise<{ id: string; token: string }> {
    const region = await this.#regions.resolve(regionName);
    const id = randomBytes(8).toString("hex");
    const token = AGENT_TOKEN_PREFIX + randomBytes(32).toString("base64url");
    await this.#db
      .insertInto("agent_tokens")
      .values({ id, region_id: region.id, token_hash: hashToken(token), create_time: Date.now() })
      .execute();
    return { id, token };
  }

  /** The name of the region the token belongs to, or undefined for an unknown token. */
  async regionOf(token: string): Promise<string | undefined> {
    const row = await this.#db
      .selectFrom("agent_tokens")
      .innerJoin("regions", "regions.id", "agent_tokens.region_id")
      .select("regions.name")
      .where("agent_tokens.token_hash", "=", hashToken(token))
      .executeTakeFirst();
    return row?.name;
  }
}
