// Re-sealing every stored secret value under the key ring's newest key (`pnpm secrets
// rotate`), in place: the deployments, the desired state and the outbox (the last two under the
// newest key's region keys, secrets.ts, a workload's values as one: secret-env.ts), and the
// notifiers' signing secrets and Slack URLs (stored unsealed by a ctrl without a key file: sealed);
// stored revisions hold none (values an earlier version kept there are cleared). No version moves, so no agent sees a change.
// Rows are rewritten one at a time with a compare on the old body, so a write that lands
// meanwhile is never overwritten (a pass that lost a race runs again, a few times). Pages go by key, never
// by OFFSET: revisions and outbox rows pruned meanwhile would shift an offset past rows never
// read. A rotation ends with a scan of every table (scanSealedKeys) and says the older keys may
// go only when it finds none of them; ctrl's start-up check is the same scan.
import { fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import {
  ChangeEventSchema,
  DeploymentSchema,
  type DesiredResource,
  DesiredResourceSchema,
  ResourceType,
  type SecretEnvVar,
} from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";
import { parseSeal, secretEnvContext, unpackValues } from "@flotilla/runtime/sealed-values";
import { storedParts, wholeResource } from "./desired-seals.ts";
import { notifierSecretContext, notifierUrlContext } from "./notifications.ts";
import { regionSecretEnv, secretContext, valueContext } from "./secret-env.ts";
import { dataKeyIdOf, type SecretKeyRing } from "./secrets.ts";

const PAGE = 500;
/** Passes and scans a rotation makes before it says older keys are still in use. */
const ROTATION_ROUNDS = 5;
/** Passes over a table within one round while rows change under them. */
const PASSES_PER_TABLE = 3;

/** Where sealed values live: a table, its rows' key columns, how to find the secrets in a body. */
interface SealedTable<Desc extends DescMessage> {
  table: "deployments" | "resource_revisions" | "desired_resources" | "deployment_changes";
  keys: string[];
  /** Of a deployment's row (and a revision's): the revision its seals are bound to (secret-env.ts valueContext). */
  revisionColumn?: string;
  /** Holds no value in this version (a stored revision): one an earlier version left is cleared, not re-sealed. */
  clearsValues?: boolean;
  /** The columns a row is stored in: `body`, and for the desired state its seal (desired-seals.ts). */
  columns: string[];
  /** A row's message, whole. */
  decode(row: Record<string, unknown>): MessageShape<Desc>;
  /** The columns of `message`, whole, as stored. */
  encode(message: MessageShape<Desc>): Record<string, unknown>;
  /** Deployment rows only (the other kinds carry no secrets). */
  deploymentsOnly: boolean;
  schema: Desc;
  /** The deployment id and the secret env of a body, if it carries any. */
  secrets(body: MessageShape<Desc>): { id: string; secretEnv: SecretEnvVar[] } | undefined;
  /**
   * Of a region's rows (a region_id column; a workload's values sealed as one for the region's
   * agent): a body's desired resource (undefined for a delete).
   */
  desired?(body: MessageShape<Desc>): DesiredResource | undefined;
}

/** Typed where it is written, erased for the loop over all four. */
function sealed<Desc extends DescMessage>(t: SealedTable<Desc>): SealedTable<DescMessage> {
  return t as unknown as SealedTable<DescMessage>;
}

/** A table storing `schema`'s message as its body column. */
function inBody<Desc extends DescMessage>(schema: Desc): Pick<SealedTable<Desc>, "schema" | "columns" | "decode" | "encode"> {
  return {
    schema,
    columns: ["body"],
    decode: (row) => fromBinary(schema, row.body as Uint8Array),
    encode: (message) => ({ body: toBinary(schema, message) }),
  };
}

const TABLES = [
  sealed({
    table: "deployments",
    keys: ["id"],
    revisionColumn: "revision",
    deploymentsOnly: false,
    ...inBody(DeploymentSchema),
    secrets: (d) => ({ id: d.id, secretEnv: d.secretEnv }),
  }),
  sealed({
    table: "resource_revisions",
    keys: ["resource_type", "resource_id", "revision"],
    revisionColumn: "revision",
    clearsValues: true,
    deploymentsOnly: true,
    ...inBody(DeploymentSchema),
    secrets: (d) => ({ id: d.id, secretEnv: d.secretEnv }),
  }),
  regional({
    table: "desired_resources",
    keys: ["region_id", "resource_type", "resource_id"],
    schema: DesiredResourceSchema,
    columns: ["body", "secret_env_sealed"],
    decode: (row) => wholeResource(row as { body: Uint8Array; secret_env_sealed: Uint8Array | null }),
    encode: storedParts,
    desired: (r) => r,
  }),
  regional({
    table: "deployment_changes",
    keys: ["region_id", "version"],
    ...inBody(ChangeEventSchema),
    desired: (e) => (e.change.case === "upsert" ? e.change.value : undefined),
  }),
];

/** A region's table: deployment rows, their secrets those of the desired resource. */
function regional<Desc extends DescMessage>(
  t: Pick<SealedTable<Desc>, "table" | "keys" | "schema" | "columns" | "decode" | "encode"> & {
    desired(body: MessageShape<Desc>): DesiredResource | undefined;
  },
): SealedTable<DescMessage> {
  return sealed({
    ...t,
    deploymentsOnly: true,
    secrets: (body) => {
      const r = t.desired(body);
      return r?.spec.case === "deployment" ? { id: r.id, secretEnv: r.spec.value.workload?.secretEnv ?? [] } : undefined;
    },
  });
}

/** What a rotation did, and whether the older keys may leave the key file. */
export interface Rotation {
  /** Values re-sealed. */
  moved: number;
  /** Data key ids other than the newest that some row still holds a value under, with the tables (none: the older keys may go). */
  stillUsed: Map<string, Set<string>>;
}

/**
 * Re-seals every value not under the newest key (or sealed by an earlier version), with its
 * fingerprint, a region's in its form; then scans every table: while a value under an older
 * key is left (written meanwhile by a ctrl without the new key), it goes round again, at most
 * ROTATION_ROUNDS times.
 */
export async function rotateSecrets(db: Kysely<Database>, ring: SecretKeyRing, pageSize = PAGE): Promise<Rotation> {
  let moved = 0;
  for (let round = 1; ; round++) {
    moved += await reseal(db, ring, pageSize);
    const scan = await scanSealedKeys(db, pageSize);
    const stillUsed = new Map([...scan.keys].filter(([id]) => id !== ring.newestKeyId || scan.legacy.has(id)));
    if (stillUsed.size === 0 || round === ROTATION_ROUNDS) return { moved, stillUsed };
  }
}

/**
 * Re-seals what an earlier version stored: values sealed in its form (under the newest key then,
 * as a rotation does), and for their regions' agents, as one a workload, the values of the
 * desired state and the outbox sealed one by one, under a data key or a region key; and moves
 * the seals an earlier version kept inside the desired state's bodies to their column
 * (checkSecretKeys tells whether any is).
 */
export function upgradeStoredSeals(db: Kysely<Database>, ring: SecretKeyRing): Promise<number> {
  return reseal(db, ring, PAGE);
}

async function reseal(db: Kysely<Database>, ring: SecretKeyRing, pageSize: number): Promise<number> {
  let moved = await resealNotifierSecrets(db, ring);
  for (const sealedTable of TABLES) {
    // A row that changed under a pass is read again by the next; bounded, as a writer that never
    // stops (a ctrl without the new key) would keep winning: the scan after it says so.
    for (let pass = 1; pass <= PASSES_PER_TABLE; pass++) {
      const { values, lostRaces } = await resealTable(db, ring, sealedTable, pageSize);
      moved += values;
      if (lostRaces === 0) break;
    }
  }
  return moved;
}

/**
 * Seals under the newest key every notifier signing secret under another key or unsealed, with a
 * compare on the old bytes (a rotation of the notifier's secret meanwhile wins). Notifiers are
 * few: read at once.
 */
async function resealNotifierSecrets(db: Kysely<Database>, ring: SecretKeyRing): Promise<number> {
  let moved = 0;
  for (const row of await db.selectFrom("notifiers").select(["name", "secret", "secret_sealed", "url_secret"]).execute()) {
    const urlCurrent = row.url_secret === null || ring.isCurrent(row.url_secret);
    if (row.secret_sealed === 1 && ring.isCurrent(row.secret) && urlCurrent) continue;
    // Both under one flag: opened as stored, sealed together.
    const contexts = [notifierSecretContext(row.name), notifierUrlContext(row.name)];
    const opened = [row.secret, row.url_secret].map((stored, i) =>
      stored === null ? undefined : row.secret_sealed === 1 ? ring.openBytes(contexts[i]!, stored) : Buffer.from(stored),
    );
    try {
      const result = await db
        .updateTable("notifiers")
        .set({ secret: ring.seal(contexts[0]!, opened[0]!), url_secret: opened[1] ? ring.seal(contexts[1]!, opened[1]) : null, secret_sealed: 1 })
        .where("name", "=", row.name)
        .where("secret", "=", row.secret)
        .executeTakeFirst();
      moved += Number(result.numUpdatedRows);
    } finally {
      for (const bytes of opened) bytes?.fill(0);
    }
  }
  return moved;
}

/** The columns of `t` a row's values are read from. */
function storedColumns(t: SealedTable<DescMessage>): string[] {
  return [...t.columns, ...(t.revisionColumn ? [t.revisionColumn] : [])];
}

/** Every row of `t` that may hold values, a page at a time, in key order (keyset pagination). */
async function* rowsOf(db: Kysely<Database>, t: SealedTable<DescMessage>, columns: string[], pageSize: number): AsyncGenerator<Record<string, unknown>[]> {
  const anyDb = db as Kysely<any>;
  let after: Record<string, unknown> | undefined;
  for (;;) {
    let query = anyDb
      .selectFrom(t.table)
      .select([...new Set([...t.keys, ...columns])])
      .limit(pageSize);
    for (const key of t.keys) query = query.orderBy(key);
    if (t.deploymentsOnly) query = query.where("resource_type", "=", ResourceType.DEPLOYMENT);
    if (after) {
      const last = after;
      // (k1, k2, …) > (a, b, …), spelled out: row value comparison is not portable.
      query = query.where((eb: any) => eb.or(t.keys.map((key, i) => eb.and([...t.keys.slice(0, i).map((k) => eb(k, "=", last[k])), eb(key, ">", last[key])]))));
    }
    const rows = await query.execute();
    if (rows.length > 0) yield rows;
    if (rows.length < pageSize) return;
    after = rows[rows.length - 1];
  }
}

async function resealTable(
  db: Kysely<Database>,
  ring: SecretKeyRing,
  t: SealedTable<DescMessage>,
  pageSize: number,
): Promise<{ values: number; lostRaces: number }> {
  let values = 0;
  let lostRaces = 0;
  const anyDb = db as Kysely<any>;
  // Read per pass: an epoch moved meanwhile leaves rows under the older one, as any later write would.
  const epochs = new Map((await db.selectFrom("regions").select(["id", "secret_key_epoch"]).execute()).map((r) => [r.id, Number(r.secret_key_epoch)]));
  for await (const rows of rowsOf(db, t, storedColumns(t), pageSize)) {
    for (const row of rows) {
      const body = t.decode(row);
      const regionId = Number(row.region_id);
      let moved = t.desired
        ? resealForRegion(ring, { id: regionId, epoch: epochs.get(regionId) ?? 0 }, t.desired(body))
        : t.clearsValues
          ? clearValues(t.secrets(body))
          : resealValues(ring, t.secrets(body), Number(row[t.revisionColumn!]));
      const stored = t.encode(body);
      // A seal an earlier version kept inside the desired state's body moves to its column.
      if (moved === 0 && t.columns.length > 1 && !sameBytes(stored.body as Uint8Array, row.body as Uint8Array)) moved = t.secrets(body)?.secretEnv.length ?? 0;
      if (moved === 0) continue;
      let update = anyDb.updateTable(t.table).set(stored).where("body", "=", row.body);
      for (const key of t.keys) update = update.where(key, "=", row[key]);
      const result = await update.executeTakeFirst();
      if (Number(result.numUpdatedRows) === 1) values += moved;
      else lostRaces++;
    }
  }
  return { values, lostRaces };
}

/** Clears, in place, the values of `found` (a stored revision, as an earlier version kept them). Returns how many. */
function clearValues(found: { secretEnv: SecretEnvVar[] } | undefined): number {
  const kept = found?.secretEnv.filter((s) => s.sealed.length > 0) ?? [];
  for (const s of kept) s.sealed = new Uint8Array(0);
  return kept.length;
}

/**
 * Re-seals under the newest key, in place, the values of `found` (stored at `revision`) sealed
 * under another or by an earlier version, with their fingerprints. Returns how many.
 */
function resealValues(ring: SecretKeyRing, found: { id: string; secretEnv: SecretEnvVar[] } | undefined, revision: number): number {
  const stale = found?.secretEnv.filter((s) => s.sealed.length > 0 && !ring.isCurrent(s.sealed)) ?? [];
  for (const s of stale) {
    const context = valueContext(found!.id, s.name, revision);
    const value = ring.openBytes(context, s.sealed, secretContext(found!.id, s.name));
    try {
      s.sealed = ring.seal(context, value);
      s.fingerprint = ring.fingerprint(found!.id, s.name, value);
    } finally {
      value.fill(0);
    }
  }
  return stale.length;
}

/**
 * Re-seals in place, in the region's form (regionSecretEnv), the secret env of `resource` unless
 * it is in that form under the newest key's region key already. Returns how many values moved.
 */
function resealForRegion(ring: SecretKeyRing, region: { id: number; epoch: number }, resource: DesiredResource | undefined): number {
  if (resource?.spec.case !== "deployment") return 0;
  const workload = resource.spec.value.workload;
  if (!workload || workload.secretEnv.length === 0) return 0;
  const { secretEnv, secretEnvSealed } = workload;
  if (secretEnvSealed.length > 0 && ring.isCurrent(secretEnvSealed, region)) return 0;
  // An outbox row whose values were replaced since holds the names alone (outbox.ts purgeReplacedSeals).
  if (secretEnvSealed.length === 0 && secretEnv.every((s) => s.sealed.length === 0)) return 0;
  const names = secretEnv.map((s) => s.name);
  const opened: Buffer[] = [];
  try {
    let values: Buffer[];
    if (secretEnvSealed.length > 0) {
      const context = secretEnvContext(resource.id, names);
      const packed = ring.openBytes(context, secretEnvSealed, context);
      opened.push(packed);
      values = unpackValues(packed, secretEnv.length);
    } else {
      // One by one, as a ctrl of an earlier version sealed them.
      values = secretEnv.map((s) => ring.openBytes(secretContext(resource.id, s.name), s.sealed, secretContext(resource.id, s.name)));
      opened.push(...values);
    }
    // Under an older key or form: the fingerprints change with it, as the deployment's do in the same pass.
    const secrets = values.map((value, i) => ({ value, fingerprint: ring.fingerprint(resource.id, names[i]!, value) }));
    resource.spec.value.workload = regionSecretEnv(ring, region, resource.id, workload, secrets);
    return secrets.length;
  } finally {
    for (const bytes of opened) bytes.fill(0);
  }
}

/** What scanSealedKeys() found. */
interface SealScan {
  /** Data key id → the tables holding a value under it. */
  keys: Map<string, Set<string>>;
  /** Data key ids of seals an earlier version made (its form, one by one in a region's state, or inside a desired body). */
  legacy: Set<string>;
  /** One seal per key id, with what opens it: checkSecretKeys opens each. */
  samples: Map<string, { context: string; legacyContext: string | undefined; sealed: Uint8Array }>;
}

/** Every key id under which any table holds a value, a page at a time. */
export async function scanSealedKeys(db: Kysely<Database>, pageSize = PAGE): Promise<SealScan> {
  const scan: SealScan = { keys: new Map(), legacy: new Set(), samples: new Map() };
  const found = (table: string, sealed: Uint8Array, context: string, legacyContext: string | undefined, earlier: boolean) => {
    const seal = parseSeal(sealed);
    const id = dataKeyIdOf(seal.keyId);
    if (!scan.keys.has(id)) scan.keys.set(id, new Set());
    scan.keys.get(id)!.add(table);
    if (seal.legacy || earlier) scan.legacy.add(id);
    if (!scan.samples.has(seal.keyId)) scan.samples.set(seal.keyId, { context, legacyContext: seal.legacy ? legacyContext : undefined, sealed });
  };
  for (const row of await db.selectFrom("notifiers").select(["name", "secret", "url_secret"]).where("secret_sealed", "=", 1).execute()) {
    found("notifiers", row.secret, notifierSecretContext(row.name), undefined, false);
    if (row.url_secret) found("notifiers", row.url_secret, notifierUrlContext(row.name), undefined, false);
  }
  for (const t of TABLES) {
    for await (const rows of rowsOf(db, t, storedColumns(t), pageSize)) {
      for (const row of rows) {
        const body = t.decode(row);
        const secrets = t.secrets(body);
        for (const s of secrets?.secretEnv ?? []) {
          if (s.sealed.length === 0) continue;
          const legacyContext = secretContext(secrets!.id, s.name);
          // In a region's desired state, a value sealed one by one was sealed by an earlier version.
          const context = t.desired ? legacyContext : valueContext(secrets!.id, s.name, Number(row[t.revisionColumn!]));
          found(t.table, s.sealed, context, legacyContext, t.desired !== undefined);
        }
        const desired = t.desired?.(body);
        const workload = desired?.spec.case === "deployment" ? desired.spec.value.workload : undefined;
        if (workload && workload.secretEnvSealed.length > 0) {
          const context = secretEnvContext(
            desired!.id,
            workload.secretEnv.map((s) => s.name),
          );
          // Kept inside the desired state's body: by an earlier version.
          found(t.table, workload.secretEnvSealed, context, context, t.table === "desired_resources" && !row.secret_env_sealed);
        }
      }
    }
  }
  return scan;
}

/**
 * Throws, naming the keys, when any table holds a value sealed under a key `ring` lacks (or no
 * ring at all), or one that does not open under the key of its id: a ctrl started so would
 * fail syncs and rollbacks, so it must not start. Opens one value per key. Returns whether a
 * value is stored as an earlier version stored it (upgradeStoredSeals re-seals those).
 */
export async function checkSecretKeys(db: Kysely<Database>, ring: SecretKeyRing | undefined): Promise<boolean> {
  const scan = await scanSealedKeys(db);
  if (scan.keys.size === 0) return false;
  const ids = [...scan.keys.keys()].map((id) => JSON.stringify(id)).join(", ");
  if (!ring) throw new Error(`the database holds secret values sealed under keys ${ids}: start with --secrets-key-file holding them`);
  for (const { context, legacyContext, sealed } of scan.samples.values()) ring.openBytes(context, sealed, legacyContext).fill(0);
  return scan.legacy.size > 0;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);
}
