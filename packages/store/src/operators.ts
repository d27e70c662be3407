// Operator accounts: a named token with a role. Stored and screened as agent tokens are
// (agent-tokens.ts): only a SHA-256 of the token, and a MAC under this deployment's key so
// that a forgery is refused without a query. The MAC covers a domain byte, so no agent
// token's MAC is an operator token's.
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { OperatorSchema, type Role, type Operator } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { randomBytes, timingSafeEqual, type KeyObject } from "node:crypto";
import type { Kysely } from "kysely";
import { hashToken, LAST_USE_RESOLUTION_MS, stillValidTokens, tokenMac } from "./agent-tokens.ts";
import { StoreError } from "./errors.ts";
import { decodePageToken, pageSize, toPage, type Page } from "./paging.ts";
import { isDuplicateKey } from "./regions.ts";
import type { Database } from "./schema.ts";

export const OPERATOR_TOKEN_PREFIX = "flt_op_";
const SECRET_BYTES = 32;
const OPERATOR_DOMAIN = Buffer.from([0x6f]);
const OPERATOR_TOKEN = new RegExp(`^${OPERATOR_TOKEN_PREFIX}[A-Za-z0-9_-]{64}$`);

/** What a valid operator token proves. */
export interface OperatorGrant {
  name: string;
  role: Role;
  /** Unix ms, or undefined: never. */
  expireTime: number | undefined;
}

const mac = (key: KeyObject, secret: Uint8Array) => tokenMac(key, Buffer.concat([OPERATOR_DOMAIN, secret]));

export class OperatorRepository {
  readonly #db: Kysely<Database>;
  readonly #macKey: () => Promise<KeyObject>;

  constructor(db: Kysely<Database>, macKey: () => Promise<KeyObject>) {
    this.#db = db;
    this.#macKey = macKey;
  }

  /** A screen for forged operator tokens: true for a token whose MAC checks out (it still needs `authenticate`). */
  async screen(): Promise<(token: string) => boolean> {
    const key = await this.#macKey();
    return (token) => {
      if (!OPERATOR_TOKEN.test(token)) return false;
      const bytes = Buffer.from(token.slice(OPERATOR_TOKEN_PREFIX.length), "base64url");
      return timingSafeEqual(mac(key, bytes.subarray(0, SECRET_BYTES)), bytes.subarray(SECRET_BYTES));
    };
  }

  /** Creates the operator and mints its token, returned once and never stored. */
  async create(name: string, role: Role, expireTime: number | undefined, createdBy: string, now = Date.now()): Promise<{ operator: Operator; token: string }> {
    const secret = randomBytes(SECRET_BYTES);
    const token = OPERATOR_TOKEN_PREFIX + Buffer.concat([secret, mac(await this.#macKey(), secret)]).toString("base64url");
    const row = {
      name,
      role,
      token_hash: hashToken(token),
      create_time: now,
      expire_time: expireTime ?? null,
      last_use_time: null,
      created_by: createdBy,
    };
    try {
      await this.#db.insertInto("operators").values(row).execute();
    } catch (error) {
      if (isDuplicateKey(error))
        throw new StoreError("already_exists", `operator ${JSON.stringify(name)} already exists (revoke it first to rotate its token)`, "name");
      throw error;
    }
    return { operator: toOperator(row), token };
  }

  /** The grant of a known, unexpired token, else undefined. Records the use (to LAST_USE_RESOLUTION_MS). */
  async authenticate(token: string, now = Date.now()): Promise<OperatorGrant | undefined> {
    const row = await this.#db.selectFrom("operators").selectAll().where("token_hash", "=", hashToken(token)).executeTakeFirst();
    const expireTime = row?.expire_time == null ? undefined : Number(row.expire_time);
    if (!row || (expireTime !== undefined && expireTime <= now)) return undefined;
    if (row.last_use_time == null || now - Number(row.last_use_time) >= LAST_USE_RESOLUTION_MS) {
      // Best effort and off the call's path: a lost update only makes "last used" older.
      this.#db
        .updateTable("operators")
        .set({ last_use_time: now })
        .where("name", "=", row.name)
        .execute()
        .catch(() => {});
    }
    return { name: row.name, role: row.role as Role, expireTime };
  }

  /** Of `tokens`, those still known and unexpired (one query per 1,000). */
  stillValid(tokens: string[], now = Date.now()): Promise<Set<string>> {
    return stillValidTokens(this.#db, "operators", tokens, now);
  }

  async list(requestedPageSize: number, pageToken: string): Promise<Page<Operator>> {
    const size = pageSize(requestedPageSize);
    const after = decodePageToken(pageToken);
    let query = this.#db
      .selectFrom("operators")
      .selectAll()
      .orderBy("name")
      .limit(size + 1);
    if (after !== undefined) query = query.where("name", ">", after);
    return toPage(await query.execute(), size, (r) => r.name, toOperator);
  }

  /** Deletes the operator and its token; NOT_FOUND if there is none of this name. */
  async revoke(name: string): Promise<void> {
    const result = await this.#db.deleteFrom("operators").where("name", "=", name).executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) throw new StoreError("not_found", `operator ${JSON.stringify(name)} not found`, "name");
  }
}

function toOperator(r: Database["operators"]): Operator {
  return create(OperatorSchema, {
    name: r.name,
    role: r.role as Role,
    createTime: timestampFromMs(Number(r.create_time)),
    expireTime: r.expire_time == null ? undefined : timestampFromMs(Number(r.expire_time)),
    lastUseTime: r.last_use_time == null ? undefined : timestampFromMs(Number(r.last_use_time)),
    createdBy: r.created_by,
  });
}
