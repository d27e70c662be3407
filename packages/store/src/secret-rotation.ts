// Re-sealing every stored secret value under the key ring's newest key (`ctrl secrets
// rotate`), in place: the deployments, their kept revisions, the desired state and the
// outbox (the last two under the newest key's region keys, secrets.ts, a workload's values
// as one: secret-env.ts). No version moves, so no agent sees a change; afterwards the older
// keys can leave the key file. Rows are rewritten one at a time with a compare on the old
// body, so a write that lands meanwhile is never overwritten (its row is picked up by the
// next pass).
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
import { sealedKeyId, secretEnvContext, unpackValues } from "@flotilla/runtime/sealed-values";
import { storedParts, wholeResource } from "./desired-seals.ts";
import { regionSecretEnv, secretContext } from "./secret-env.ts";
import { dataKeyIdOf, type SecretKeyRing } from "./secrets.ts";

const PAGE = 500;

/** Where sealed values live: a table, its rows' key columns, how to find the secrets in a body. */
interface SealedTable<Desc extends DescMessage> {
  table: "deployments" | "resource_revisions" | "desired_resources" | "deployment_changes";
  keys: string[];
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
    deploymentsOnly: false,
    ...inBody(DeploymentSchema),
    secrets: (d) => ({ id: d.id, secretEnv: d.secretEnv }),
  }),
  sealed({
    table: "resource_revisions",
    keys: ["resource_type", "resource_id", "revision"],
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

/** Re-seals every value not under the newest key (and its fingerprint), a region's in its form. Returns how many values moved. */
export function rotateSecrets(db: Kysely<Database>, ring: SecretKeyRing): Promise<number> {
  return reseal(db, ring, TABLES);
}

/**
 * Re-seals for their regions' agents, as one a workload, the values of the desired state and
 * the outbox that a ctrl of an earlier version sealed one by one, under a data key or a region
 * key, and moves the seals an earlier version kept inside the desired state's bodies to their
 * column (checkSecretKeys tells whether any is).
 */
export function sealStoredForRegions(db: Kysely<Database>, ring: SecretKeyRing): Promise<number> {
  return reseal(
    db,
    ring,
    TABLES.filter((t) => t.desired),
  );
}

async function reseal(db: Kysely<Database>, ring: SecretKeyRing, tables: SealedTable<DescMessage>[]): Promise<number> {
  let moved = 0;
  for (const sealedTable of tables) {
    for (;;) {
      const pass = await resealTable(db, ring, sealedTable);
      moved += pass.values;
      if (pass.lostRaces === 0) break;
    }
  }
  return moved;
}

async function resealTable(db: Kysely<Database>, ring: SecretKeyRing, t: SealedTable<DescMessage>): Promise<{ values: number; lostRaces: number }> {
  let values = 0;
  let lostRaces = 0;
  const anyDb = db as Kysely<any>;
  for (let offset = 0; ; offset += PAGE) {
    let query = anyDb
      .selectFrom(t.table)
      .select([...t.keys, ...t.columns])
      .limit(PAGE)
      .offset(offset);
    for (const key of t.keys) query = query.orderBy(key);
    if (t.deploymentsOnly) query = query.where("resource_type", "=", ResourceType.DEPLOYMENT);
    const rows = await query.execute();
    for (const row of rows) {
      const body = t.decode(row);
      let moved = t.desired ? resealForRegion(ring, Number(row.region_id), t.desired(body)) : resealValues(ring, t.secrets(body));
      const stored = t.encode(body);
      // A seal an earlier version kept inside the desired state's body moves to its column.
      if (moved === 0 && t.columns.length > 1 && !sameBytes(stored.body as Uint8Array, row.body)) moved = t.secrets(body)?.secretEnv.length ?? 0;
      if (moved === 0) continue;
      let update = anyDb.updateTable(t.table).set(stored).where("body", "=", row.body);
      for (const key of t.keys) update = update.where(key, "=", row[key]);
      const result = await update.executeTakeFirst();
      if (Number(result.numUpdatedRows) === 1) values += moved;
      else lostRaces++;
    }
    if (rows.length < PAGE) return { values, lostRaces };
  }
}

/** Re-seals under the newest key, in place, the values of `found` sealed under another. Returns how many. */
function resealValues(ring: SecretKeyRing, found: { id: string; secretEnv: SecretEnvVar[] } | undefined): number {
  const stale = found?.secretEnv.filter((s) => s.sealed.length > 0 && sealedKeyId(s.sealed) !== ring.newestKeyId) ?? [];
  for (const s of stale) {
    const context = secretContext(found!.id, s.name);
    const value = ring.open(context, s.sealed);
    s.sealed = ring.seal(context, value);
    s.fingerprint = ring.fingerprint(value);
  }
  return stale.length;
}

/**
 * Re-seals in place, in the region's form (regionSecretEnv), the secret env of `resource` unless
 * it is in that form under the newest key's region key already. Returns how many values moved.
 */
function resealForRegion(ring: SecretKeyRing, regionId: number, resource: DesiredResource | undefined): number {
  if (resource?.spec.case !== "deployment") return 0;
  const workload = resource.spec.value.workload;
  if (!workload || workload.secretEnv.length === 0) return 0;
  const { secretEnv, secretEnvSealed } = workload;
  if (secretEnvSealed.length > 0 && sealedKeyId(secretEnvSealed) === ring.newestRegionKeyId(regionId)) return 0;
  let secrets: { value: string; fingerprint: string }[];
  if (secretEnvSealed.length > 0) {
    // Under an older key: the fingerprints change with it, as the deployment's do in the same rotation.
    const packed = ring.openBytes(
      secretEnvContext(
        resource.id,
        secretEnv.map((s) => s.name),
      ),
      secretEnvSealed,
    );
    secrets = unpackValues(packed, secretEnv.length).map((bytes) => {
      const value = bytes.toString("utf8");
      return { value, fingerprint: ring.fingerprint(value) };
    });
    packed.fill(0);
  } else {
    // One by one, as a ctrl of an earlier version sealed them, with the fingerprints it delivered.
    secrets = secretEnv.map((s) => ({ value: ring.open(secretContext(resource.id, s.name), s.sealed), fingerprint: s.fingerprint }));
  }
  resource.spec.value.workload = regionSecretEnv(ring, regionId, resource.id, workload, secrets);
  return secrets.length;
}

/**
 * Throws, naming the keys, when the current state holds a value sealed under a key `ring`
 * lacks (or no ring at all), or one that does not open under the key of its id: a ctrl
 * started so would fail every agent's sync, so it must not start. Opens one value per key.
 * Returns whether the desired state holds a value not sealed for its region's agent (stored
 * by an earlier version: sealStoredForRegions).
 */
export async function checkSecretKeys(db: Kysely<Database>, ring: SecretKeyRing | undefined): Promise<boolean> {
  const samples = new Map<string, { context: string; sealed: Uint8Array }>();
  let unsealedForRegions = false;
  for (const t of TABLES.filter((t) => t.table === "deployments" || t.table === "desired_resources")) {
    let query = (db as Kysely<any>).selectFrom(t.table).select(t.columns);
    if (t.deploymentsOnly) query = query.where("resource_type", "=", ResourceType.DEPLOYMENT);
    for (const row of await query.execute()) {
      const body = t.decode(row);
      const found = t.secrets(body);
      for (const s of found?.secretEnv ?? []) {
        if (s.sealed.length === 0) continue;
        const id = sealedKeyId(s.sealed);
        // Sealed one by one in a region's desired state: by an earlier version.
        if (t.desired) unsealedForRegions = true;
        if (!samples.has(id)) samples.set(id, { context: secretContext(found!.id, s.name), sealed: s.sealed });
      }
      const desired = t.desired?.(body);
      const workload = desired?.spec.case === "deployment" ? desired.spec.value.workload : undefined;
      if (workload && workload.secretEnvSealed.length > 0) {
        // Kept inside the body: by an earlier version.
        if (!row.secret_env_sealed) unsealedForRegions = true;
        const id = sealedKeyId(workload.secretEnvSealed);
        const names = workload.secretEnv.map((s) => s.name);
        if (!samples.has(id)) samples.set(id, { context: secretEnvContext(desired!.id, names), sealed: workload.secretEnvSealed });
      }
    }
  }
  if (samples.size === 0) return false;
  const ids = [...new Set([...samples.keys()].map(dataKeyIdOf))].map((id) => JSON.stringify(id)).join(", ");
  if (!ring) throw new Error(`the database holds secret values sealed under keys ${ids}: start with --secrets-key-file holding them`);
  for (const { context, sealed } of samples.values()) ring.openBytes(context, sealed).fill(0);
  return unsealedForRegions;
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);
}
