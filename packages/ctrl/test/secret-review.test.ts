// What a security review of secret values expects, against a malicious deployer and a stolen
// database dump: no fingerprint oracle; every key derived for one purpose; a seal
// bound to its row's revision; a rollback never brings a replaced value back, and a dump (with
// the key) holds only live values.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createSecretKey } from "node:crypto";
import { clone, create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { HistoryService } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { ChangeEventSchema, DeploymentSchema, ResourceType, SecretEnvVarSchema, type Deployment } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { openValue, secretEnvContext, unpackValues } from "@flotilla/runtime/sealed-values";
import { generateKeyFile, SecretKeyRing, type Store, valueContext, wholeResource } from "@flotilla/store";
import { testDatabases } from "@flotilla/testkit/databases";
import { startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";

const keyFile = generateKeyFile("k1");
const ring = () => SecretKeyRing.parse(keyFile, "test key file");
const deployment = (id: string, secretEnv: { name: string; value?: string }[]) =>
  create(DeploymentSchema, {
    id,
    namespace: "demo",
    image: "api:1",
    regions: [{ region: "local", replicas: 1 }],
    secretEnv: secretEnv.map((s) => create(SecretEnvVarSchema, s)),
  });
/** An answer without what differs between any two calls (times). */
const comparable = (d: Deployment) => {
  const copy = clone(DeploymentSchema, d);
  copy.createTime = undefined;
  copy.updateTime = undefined;
  return toBinary(DeploymentSchema, copy);
};

/**
 * Every value of deployment `id` that any table holds, opened with the key (what a stolen dump
 * and key file give): the deployment row, its revisions, the desired state and the outbox.
 */
async function valuesInDatabase(store: Store, id: string): Promise<Set<string>> {
  const keys = ring();
  const values = new Set<string>();
  const db = store.database.db;
  for (const row of await db.selectFrom("deployments").select(["body", "revision"]).where("id", "=", id).execute()) {
    for (const s of fromBinary(DeploymentSchema, row.body).secretEnv) values.add(keys.open(valueContext(id, s.name, Number(row.revision)), s.sealed));
  }
  for (const row of await db.selectFrom("resource_revisions").select(["body", "revision"]).where("resource_id", "=", id).execute()) {
    for (const s of fromBinary(DeploymentSchema, row.body).secretEnv)
      if (s.sealed.length > 0) values.add(keys.open(valueContext(id, s.name, Number(row.revision)), s.sealed));
  }
  const asOne = (resource: ReturnType<typeof wholeResource>) => {
    const workload = resource.spec.case === "deployment" ? resource.spec.value.workload : undefined;
    if (!workload || workload.secretEnvSealed.length === 0) return;
    const names = workload.secretEnv.map((s) => s.name);
    for (const value of unpackValues(keys.openBytes(secretEnvContext(id, names), workload.secretEnvSealed), names.length)) values.add(value.toString());
  };
  for (const row of await db.selectFrom("desired_resources").select(["body", "secret_env_sealed"]).where("resource_id", "=", id).execute())
    asOne(wholeResource(row));
  for (const row of await db.selectFrom("deployment_changes").select("body").where("resource_id", "=", id).execute()) {
    const event = fromBinary(ChangeEventSchema, row.body);
    if (event.change.case === "upsert") asOne(event.change.value);
  }
  return values;
}

for (const { db, skip } of await testDatabases()) {
  describe(`secret values under review (${db.name})`, { skip }, () => {
    let t: TestCtrl;
    before(async () => {
      t = await startTestCtrl(db, {}, { secrets: ring() });
      await t.store.regions.create("local");
    });
    after(() => t?.close());

    test("a fingerprint is keyed over deployment, name and value: the same value in two deployments or under two names shows differently", async () => {
      const client = t.client(DeploymentService);
      const a = (
        await client.createDeployment({
          deployment: deployment("fp-a", [
            { name: "PASSWORD", value: "hunter2" },
            { name: "OTHER", value: "hunter2" },
          ]),
        })
      ).deployment!;
      const b = (await client.createDeployment({ deployment: deployment("fp-b", [{ name: "PASSWORD", value: "hunter2" }]) })).deployment!;
      const [aPassword, aOther] = a.secretEnv.map((s) => s.fingerprint);
      assert.match(aPassword!, /^[0-9a-f]{16}$/);
      assert.notEqual(aPassword, b.secretEnv[0]!.fingerprint, "two deployments sharing a password do not show it");
      assert.notEqual(aPassword, aOther, "two names sharing a value do not show it");
      assert.equal(aPassword, ring().fingerprint("fp-a", "PASSWORD", "hunter2"));
    });

    test("validate_only never answers with a fingerprint of a supplied value, and answers alike whatever the value, equal to the stored one or not", async () => {
      const client = t.client(DeploymentService);
      const stored = (await client.createDeployment({ deployment: deployment("oracle", [{ name: "PASSWORD", value: "right" }]) })).deployment!;
      const counts = await t.store.database.db
        .selectFrom("audit_events")
        .select((eb) => eb.fn.countAll().as("n"))
        .executeTakeFirstOrThrow();
      const answers: Uint8Array[] = [];
      for (const guess of ["right", "wrong", "", "x".repeat(1000)]) {
        const input = clone(DeploymentSchema, stored);
        input.secretEnv = [create(SecretEnvVarSchema, { name: "PASSWORD", value: guess })];
        const answer = (await client.updateDeployment({ deployment: input, validateOnly: true })).deployment!;
        assert.equal(answer.secretEnv[0]!.set, true);
        assert.equal(answer.secretEnv[0]!.fingerprint, "", `validate_only with ${JSON.stringify(guess)} answers no fingerprint`);
        answers.push(comparable(answer));
        const created = (
          await client.createDeployment({ deployment: deployment(`probe-${answers.length}`, [{ name: "PASSWORD", value: guess }]), validateOnly: true })
        ).deployment!;
        assert.equal(created.secretEnv[0]!.fingerprint, "", "a validate_only create neither");
      }
      for (const answer of answers.slice(1)) assert.deepEqual(answer, answers[0], "the same answer whatever the value");
      // A retried create that supplies a value never tells whether it equals the stored one either.
      for (const guess of ["right", "wrong"]) {
        await assert.rejects(
          client.createDeployment({ deployment: deployment("oracle", [{ name: "PASSWORD", value: guess }]), validateOnly: true }),
          /already exists with a different body/,
        );
      }
      const after = await t.store.database.db
        .selectFrom("audit_events")
        .select((eb) => eb.fn.countAll().as("n"))
        .executeTakeFirstOrThrow();
      assert.equal(Number(after.n), Number(counts.n), "validate_only writes nothing");
      assert.equal((await client.getDeployment({ id: "oracle" })).deployment!.revision, stored.revision);
    });

    test("a value is sealed under a key derived from the data key (HKDF), never the data key itself", async () => {
      const row = await t.store.database.db.selectFrom("deployments").select(["body", "revision"]).where("id", "=", "fp-b").executeTakeFirstOrThrow();
      const sealed = fromBinary(DeploymentSchema, row.body).secretEnv[0]!.sealed;
      const dataKey = createSecretKey(Buffer.from(JSON.parse(keyFile).keys[0].key, "base64"));
      assert.throws(() => openValue(dataKey, valueContext("fp-b", "PASSWORD", Number(row.revision)), sealed), /does not open/);
      assert.equal(ring().open(valueContext("fp-b", "PASSWORD", Number(row.revision)), sealed), "hunter2");
    });

    test("a seal is bound to its row's revision: an older revision's seal copied into the deployment's row does not open, and nothing is written", async () => {
      const client = t.client(DeploymentService);
      const first = (await client.createDeployment({ deployment: deployment("bound", [{ name: "PASSWORD", value: "leaked" }]) })).deployment!;
      // A dump taken at revision 1 holds this seal; it is written into the row at revision 2 by someone with database access.
      const old = await t.store.database.db.selectFrom("deployments").select("body").where("id", "=", "bound").executeTakeFirstOrThrow();
      const replaced = clone(DeploymentSchema, first);
      replaced.secretEnv = [create(SecretEnvVarSchema, { name: "PASSWORD", value: "fresh" })];
      await client.updateDeployment({ deployment: replaced });
      const current = await t.store.database.db.selectFrom("deployments").select("body").where("id", "=", "bound").executeTakeFirstOrThrow();
      const forged = fromBinary(DeploymentSchema, current.body);
      forged.secretEnv[0]!.sealed = fromBinary(DeploymentSchema, old.body).secretEnv[0]!.sealed;
      await t.store.database.db
        .updateTable("deployments")
        .set({ body: toBinary(DeploymentSchema, forged) })
        .where("id", "=", "bound")
        .execute();
      const next = (await client.getDeployment({ id: "bound" })).deployment!;
      next.image = "api:2";
      // Not the caller's doing: INTERNAL over the API, the store's error naming the place (ctrl logs it).
      await assert.rejects(client.updateDeployment({ deployment: next }), /\[internal\]/);
      await assert.rejects(t.store.deployments.update(next), /secret bound\/PASSWORD@2 does not open under key "k1"/);
      assert.equal((await client.getDeployment({ id: "bound" })).deployment!.revision, 2n, "nothing written");
      await t.store.database.db.updateTable("deployments").set({ body: current.body }).where("id", "=", "bound").execute();
    });

    test("a rollback through the API (the CLI's and the console's) restores the spec and keeps the values as they are now; the replaced value is in no table", async () => {
      const client = t.client(DeploymentService);
      const created = (await client.createDeployment({ deployment: deployment("undo", [{ name: "PASSWORD", value: "leaked" }]) })).deployment!;
      const replaced = clone(DeploymentSchema, created);
      replaced.image = "api:2";
      replaced.secretEnv = [create(SecretEnvVarSchema, { name: "PASSWORD", value: "fresh" })];
      await client.updateDeployment({ deployment: replaced });
      assert.deepEqual([...(await valuesInDatabase(t.store, "undo"))], ["fresh"], "the replaced value is purged from revisions and the outbox");
      const { revision } = await t.client(HistoryService).rollback({ resourceType: ResourceType.DEPLOYMENT, id: "undo", toRevision: 1n });
      assert.equal(revision?.revision, 3n);
      const after = (await client.getDeployment({ id: "undo" })).deployment!;
      assert.equal(after.image, "api:1", "the spec is revision 1's");
      assert.equal(after.secretEnv[0]!.fingerprint, ring().fingerprint("undo", "PASSWORD", "fresh"), "the value is the current one");
      assert.deepEqual([...(await valuesInDatabase(t.store, "undo"))], ["fresh"], "the leaked value did not come back anywhere");
    });

    test("a rollout's way back (reviseInTx) keeps the current values too", async () => {
      const client = t.client(DeploymentService);
      const current = (await client.getDeployment({ id: "undo" })).deployment!;
      current.image = "api:4";
      current.secretEnv = [create(SecretEnvVarSchema, { name: "PASSWORD", value: "newest" })];
      await client.updateDeployment({ deployment: current });
      await t.store.database.db
        .transaction()
        .execute((tx) => t.store.deployments.reviseInTx(tx, "undo", 2, { actor: "rollout", message: "" }, Date.now(), async (next) => next));
      const after = (await client.getDeployment({ id: "undo" })).deployment!;
      assert.equal(after.image, "api:2");
      assert.equal(after.secretEnv[0]!.fingerprint, ring().fingerprint("undo", "PASSWORD", "newest"));
      assert.deepEqual([...(await valuesInDatabase(t.store, "undo"))], ["newest"]);
    });

    test("a rollback to a spec naming a variable that has no value now fails naming it, and writes nothing", async () => {
      const client = t.client(DeploymentService);
      const created = (
        await client.createDeployment({
          deployment: deployment("undo-gone", [
            { name: "PASSWORD", value: "p" },
            { name: "API_KEY", value: "leaked-key" },
          ]),
        })
      ).deployment!;
      const dropped = clone(DeploymentSchema, created);
      dropped.image = "api:2";
      dropped.secretEnv = dropped.secretEnv.filter((s) => s.name === "PASSWORD");
      await client.updateDeployment({ deployment: dropped });
      assert.deepEqual([...(await valuesInDatabase(t.store, "undo-gone"))], ["p"], "the dropped value is in no table");
      const audit = await t.store.database.db
        .selectFrom("audit_events")
        .select((eb) => eb.fn.countAll().as("n"))
        .executeTakeFirstOrThrow();
      await assert.rejects(
        t.client(HistoryService).rollback({ resourceType: ResourceType.DEPLOYMENT, id: "undo-gone", toRevision: 1n }),
        (e) => ConnectError.from(e).code === Code.FailedPrecondition && /secret env "API_KEY", which has no value now/.test(ConnectError.from(e).message),
      );
      assert.equal((await client.getDeployment({ id: "undo-gone" })).deployment!.revision, 2n, "nothing written");
      const after = await t.store.database.db
        .selectFrom("audit_events")
        .select((eb) => eb.fn.countAll().as("n"))
        .executeTakeFirstOrThrow();
      assert.equal(Number(after.n), Number(audit.n));
    });
  });
}
