// Re-sealing every stored secret value under the key ring's newest key (`ctrl secrets
// rotate`), in place: the deployments, their kept revisions, the desired state and the
// outbox (the last two under the newest key's region keys, secrets.ts). No version moves, so no agent sees a change; afterwards the older keys can leave
// the key file. Rows are rewritten one at a time with a compare on the old body, so a write
// that lands meanwhile is never overwritten (its row is picked up by the next pass).
import { fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { ChangeEventSchema, DeploymentSchema, DesiredResourceSchema, ResourceType, type SecretEnvVar } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";
import { sealedKeyId } from "@flotilla/runtime/sealed-values";
import { secretContext } from "./secret-env.ts";
import { dataKeyIdOf, type SecretKeyRing } from "./secrets.ts";

const PAGE = 500;

/** Where sealed values live: a table, its rows' key columns, how to find the secrets in a body. */
interface SealedTable<Desc extends DescMessage> {
  table: "deployments" | "resource_revisions" | "desired_resources" | "deployment_changes";
  keys: string[];
  /** Deployment rows only (the other kinds carry no secrets). */
  deploymentsOnly: boolean;
  /** A region's rows (a region_id column): values sealed for the region's agent. */
  regional: boolean;
  schema: Desc;
  /** The deployment id and the secret env of a body, if it carries any. */
  secrets(body: MessageShape<Desc>): { id: string; secretEnv: SecretEnvVar[] } | undefined;
}

/** Typed where it is written, erased for the loop over all four. */
function sealed<Desc extends DescMessage>(t: SealedTable<Desc>): SealedTable<DescMessage> {
  return t as unknown as SealedTable<DescMessage>;
}

const TABLES = [
  sealed({
    table: "deployments",
    keys: ["id"],
    deploymentsOnly: false,
    regional: false,
    schema: DeploymentSchema,
    secrets: (d) => ({ id: d.id, secretEnv: d.secretEnv }),
  }),
  sealed({
    table: "resource_revisions",
    keys: ["resource_type", "resource_id", "revision"],
    deploymentsOnly: true,
    regional: false,
    schema: DeploymentSchema,
    secrets: (d) => ({ id: d.id, secretEnv: d.secretEnv }),
  }),
  sealed({
    table: "desired_resources",
    keys: ["region_id", "resource_type", "resource_id"],
    deploymentsOnly: true,
    regional: true,
    schema: DesiredResourceSchema,
    secrets: (r) => workloadSecrets(r),
  }),
  sealed({
    table: "deployment_changes",
    keys: ["region_id", "version"],
    deploymentsOnly: true,
    regional: true,
    schema: ChangeEventSchema,
    secrets: (e) => (e.change.case === "upsert" ? workloadSecrets(e.change.value) : undefined),
  }),
];

function workloadSecrets(r: MessageShape<typeof DesiredResourceSchema>) {
  return r.spec.case === "deployment" ? { id: r.id, secretEnv: r.spec.value.workload?.secretEnv ?? [] } : undefined;
}

/** Re-seals every value not under the newest key (and its fingerprint). Returns how many values moved. */
export function rotateSecrets(db: Kysely<Database>, ring: SecretKeyRing): Promise<number> {
  return reseal(db, ring, TABLES);
}

/**
 * Re-seals for their regions' agents the values of the desired state and the outbox that a
 * ctrl of an earlier version sealed under a data key (checkSecretKeys tells whether any is).
 */
export function sealStoredForRegions(db: Kysely<Database>, ring: SecretKeyRing): Promise<number> {
  return reseal(
    db,
    ring,
    TABLES.filter((t) => t.regional),
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
      .select([...t.keys, "body"])
      .limit(PAGE)
      .offset(offset);
    for (const key of t.keys) query = query.orderBy(key);
    if (t.deploymentsOnly) query = query.where("resource_type", "=", ResourceType.DEPLOYMENT);
    const rows = await query.execute();
    for (const row of rows) {
      const body = fromBinary(t.schema, row.body);
      const found = t.secrets(body);
      const regionId = t.regional ? Number(row.region_id) : undefined;
      const wanted = regionId === undefined ? ring.newestKeyId : ring.newestRegionKeyId(regionId);
      const stale = found?.secretEnv.filter((s) => s.sealed.length > 0 && sealedKeyId(s.sealed) !== wanted) ?? [];
      if (!found || stale.length === 0) continue;
      for (const s of stale) {
        const context = secretContext(found.id, s.name);
        const value = ring.open(context, s.sealed);
        s.sealed = regionId === undefined ? ring.seal(context, value) : ring.sealForRegion(regionId, context, value);
        s.fingerprint = ring.fingerprint(value);
      }
      let update = anyDb
        .updateTable(t.table)
        .set({ body: toBinary(t.schema, body) })
        .where("body", "=", row.body);
      for (const key of t.keys) update = update.where(key, "=", row[key]);
      const result = await update.executeTakeFirst();
      if (Number(result.numUpdatedRows) === 1) values += stale.length;
      else lostRaces++;
    }
    if (rows.length < PAGE) return { values, lostRaces };
  }
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
    let query = (db as Kysely<any>).selectFrom(t.table).select("body");
    if (t.deploymentsOnly) query = query.where("resource_type", "=", ResourceType.DEPLOYMENT);
    for (const row of await query.execute()) {
      const found = t.secrets(fromBinary(t.schema, row.body));
      for (const s of found?.secretEnv ?? []) {
        if (s.sealed.length === 0) continue;
        const id = sealedKeyId(s.sealed);
        if (t.regional && !id.includes("/")) unsealedForRegions = true;
        if (!samples.has(id)) samples.set(id, { context: secretContext(found!.id, s.name), sealed: s.sealed });
      }
    }
  }
  if (samples.size === 0) return false;
  const ids = [...new Set([...samples.keys()].map(dataKeyIdOf))].map((id) => JSON.stringify(id)).join(", ");
  if (!ring) throw new Error(`the database holds secret values sealed under keys ${ids}: start with --secrets-key-file holding them`);
  for (const { context, sealed } of samples.values()) ring.open(context, sealed);
  return unsealedForRegions;
}
