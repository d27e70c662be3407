// A rotation misses nothing: it pages by key while writes and prunes move rows beside it, ends
// with a scan of every table, and says the old key may go only when that scan is clean; ctrl's
// start-up check reads every table that holds values.
import { test } from "node:test";
import assert from "node:assert/strict";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { NotifierFormat, NotifierSchema } from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { ChangeEventSchema, DeploymentSchema, DesiredResourceSchema, SecretEnvVarSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { packValues, secretEnvContext, unpackValues } from "@flotilla/runtime/sealed-values";
import { generateKeyFile, rotateSecrets, scanSealedKeys, SecretKeyRing, Store, valueContext } from "@flotilla/store";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";

const ring = (file: string) => SecretKeyRing.parse(file, "test key file");
const K1 = generateKeyFile("k1");
const BOTH = generateKeyFile("k2", K1);
const K2_ONLY = JSON.stringify({ keys: [JSON.parse(BOTH).keys[1]] });
const DEPLOYMENTS = 12;

const notifier = (name: string) => create(NotifierSchema, { name, url: "https://hooks.example.com/", format: NotifierFormat.STANDARD_WEBHOOKS });
/** A Slack notifier: its URL's path is a credential, stored sealed as the signing secret is. */
const SLACK_URL = "https://hooks.example.com/services/T0/B0/s3cret";
const slack = (name: string) => create(NotifierSchema, { name, url: SLACK_URL, format: NotifierFormat.SLACK });

/** The signing secret and URL the dispatcher would send `name`'s test event with. */
async function sentWith(store: Store, name: string): Promise<{ secret: string; url: string }> {
  await store.notifications.test(name);
  const [claimed] = await store.notifications.claim(1, 1, new Map(), 60_000);
  return { secret: claimed!.secret, url: claimed!.notifier.url };
}

async function write(store: Store, id: string, value: string): Promise<void> {
  const deployment = create(DeploymentSchema, {
    id,
    namespace: "demo",
    image: `api:${value.slice(-6)}`,
    regions: [
      { region: "r1", replicas: 1 },
      { region: "r2", replicas: 1 },
    ],
    secretEnv: [create(SecretEnvVarSchema, { name: "PASSWORD", value })],
  });
  const existing = await store.deployments.getMany([id]);
  if (existing.has(id)) await store.deployments.update(deployment);
  else await store.deployments.create(deployment);
}

/** The value each region's desired state holds for `id`, opened with `keys`. */
async function desiredValues(store: Store, keys: SecretKeyRing, id: string): Promise<string[]> {
  const rows = await store.database.db.selectFrom("desired_resources").select(["body", "secret_env_sealed"]).where("resource_id", "=", id).execute();
  return rows.map((row) => {
    const resource = fromBinary(DesiredResourceSchema, row.body);
    const names = resource.spec.case === "deployment" ? (resource.spec.value.workload?.secretEnv.map((s) => s.name) ?? []) : [];
    return unpackValues(keys.openBytes(secretEnvContext(id, names), row.secret_env_sealed!), names.length)[0]!.toString();
  });
}

for (const { db, skip } of await testDatabases()) {
  test(`a rotation while writes and prunes run beside it leaves no value under the old key, and says so (${db.name})`, { skip }, async () => {
    const { store, url, cleanup } = await freshStore(db, { secrets: ring(K1), revisionHistoryLimit: 3 });
    try {
      await store.regions.create("r1");
      await store.regions.create("r2");
      // A notifier's signing secret, sealed under k1.
      const { secret } = await store.notifications.create(notifier("hook"));
      const { secret: chatSecret } = await store.notifications.create(slack("chat"));
      const latest = new Map<string, string>();
      for (let round = 0; round < 4; round++) {
        for (let i = 0; i < DEPLOYMENTS; i++) {
          const value = `v-${round}-${i}-${Math.random().toString(36).slice(2)}`;
          await write(store, `d${i}`, value);
          latest.set(`d${i}`, value);
        }
      }
      // A ctrl restarted with the new file writes beside the rotation, and ctrl prunes the outbox.
      const writer = new Store(store.database, { secrets: ring(BOTH), revisionHistoryLimit: 3 });
      let stop = false;
      let writes = 0;
      let pruned = 0;
      const writing = (async () => {
        for (let n = 0; !stop; n++) {
          const id = `d${n % DEPLOYMENTS}`;
          const value = `w-${n}-${Math.random().toString(36).slice(2)}`;
          await write(writer, id, value);
          latest.set(id, value);
          writes++;
        }
      })();
      const pruning = (async () => {
        while (!stop) {
          pruned += await store.changes.prune({ maxAgeMs: 0, maxRows: 4 }, Date.now(), 3);
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
      })();
      // Small pages: many pages, each a chance for a prune to move rows under an offset.
      const rotation = await rotateSecrets(store.database.db, ring(BOTH), 5);
      stop = true;
      await Promise.all([writing, pruning]);
      assert.ok(writes > 0 && pruned > 0, `writes (${writes}) and prunes (${pruned}) ran beside the rotation`);
      assert.deepEqual([...rotation.stillUsed], [], "the rotation's scan found no value under k1");
      const scan = await scanSealedKeys(store.database.db);
      assert.deepEqual([...scan.keys.keys()], ["k2"], "every table holds values under k2 alone");
      // The old key leaves the file: ctrl starts, every value opens.
      const after = await Store.open(url, { secrets: ring(K2_ONLY) });
      try {
        for (const [id, value] of latest) {
          assert.deepEqual(await desiredValues(after, ring(K2_ONLY), id), [value, value], `${id}'s regions hold its latest value`);
        }
        assert.deepEqual(await sentWith(after, "hook"), { secret, url: "https://hooks.example.com/" }, "the notifier's signing secret opens under k2");
        assert.deepEqual(await sentWith(after, "chat"), { secret: chatSecret, url: SLACK_URL }, "and a Slack notifier's URL");
        for (const row of await after.database.db.selectFrom("resource_revisions").select(["resource_id", "revision", "body"]).execute()) {
          const deployment = fromBinary(DeploymentSchema, row.body);
          assert.equal(deployment.secretEnv[0]!.sealed.length, 0, "a stored revision keeps no value");
          assert.match(deployment.secretEnv[0]!.fingerprint, /^[0-9a-f]{16}$/);
        }
      } finally {
        await after.close();
      }
    } finally {
      await cleanup();
    }
  });

  test(`a rotation beside a ctrl without the new key that keeps writing ends (no endless retry), then is clean once that ctrl stops (${db.name})`, {
    skip,
  }, async () => {
    const { store, cleanup } = await freshStore(db, { secrets: ring(K1), revisionHistoryLimit: 2 });
    try {
      await store.regions.create("r1");
      await store.regions.create("r2");
      for (let i = 0; i < 4; i++) await write(store, `d${i}`, `v-${i}`);
      // The ctrl that was not restarted with the new file seals under k1, and wins the races.
      let stop = false;
      const writing = (async () => {
        for (let n = 0; !stop; n++) {
          await write(store, `d${n % 4}`, `old-ctrl-${n}`);
          await store.changes.prune({ maxAgeMs: 0, maxRows: 4 }, Date.now());
        }
      })();
      const during = await rotateSecrets(store.database.db, ring(BOTH), 20);
      stop = true;
      await writing;
      assert.deepEqual(
        [...during.stillUsed.keys()].filter((id) => id !== "k1"),
        [],
        "only the old ctrl's key can be left",
      );
      await write(store, "d0", "the old ctrl's last write");
      assert.ok((await scanSealedKeys(store.database.db)).keys.has("k1"), "the old ctrl's last write is under k1");
      const after = await rotateSecrets(store.database.db, ring(BOTH), 20);
      assert.deepEqual([...after.stillUsed], [], "with that ctrl stopped, the rotation is clean");
    } finally {
      await cleanup();
    }
  });

  test(`ctrl's start-up check reads every table that holds values: a key missing from the file is refused wherever the value is (${db.name})`, {
    skip,
  }, async () => {
    const { store, url, cleanup } = await freshStore(db, { secrets: ring(BOTH), revisionHistoryLimit: 5 });
    try {
      await store.regions.create("r1");
      await store.regions.create("r2");
      await write(store, "d0", "first");
      await write(store, "d0", "second");
      // A value under k1 left only in a stored revision, then only in the outbox.
      const old = new Store(store.database, { secrets: ring(K1) });
      const revision = await store.database.db.selectFrom("resource_revisions").select("body").where("revision", "=", 1).executeTakeFirstOrThrow();
      const resealed = fromBinary(DeploymentSchema, revision.body);
      resealed.secretEnv[0]!.sealed = old.secrets!.seal(valueContext("d0", "PASSWORD", 1), "first");
      await store.database.db
        .updateTable("resource_revisions")
        .set({ body: toBinary(DeploymentSchema, resealed) })
        .where("revision", "=", 1)
        .execute();
      await assert.rejects(Store.open(url, { secrets: ring(K2_ONLY) }), /sealed under key "k1", which the secrets key file does not hold/);
      await store.database.db.updateTable("resource_revisions").set({ body: revision.body }).where("revision", "=", 1).execute();
      // Then only in the outbox: a change's values sealed under k1's key for its region.
      const change = await store.database.db
        .selectFrom("deployment_changes")
        .select(["region_id", "version", "body"])
        .orderBy("version", "desc")
        .executeTakeFirstOrThrow();
      const event = fromBinary(ChangeEventSchema, change.body);
      const workload = event.change.case === "upsert" && event.change.value.spec.case === "deployment" ? event.change.value.spec.value.workload : undefined;
      assert.ok(workload && workload.secretEnvSealed.length > 0, "the outbox row carries the values");
      workload.secretEnvSealed = old.secrets!.sealForRegion(change.region_id, 0, secretEnvContext("d0", ["PASSWORD"]), packValues([Buffer.from("second")]));
      const outboxRow = (db: Store) =>
        db.database.db.updateTable("deployment_changes").where("region_id", "=", change.region_id).where("version", "=", change.version);
      await outboxRow(store)
        .set({ body: toBinary(ChangeEventSchema, event) })
        .execute();
      await assert.rejects(Store.open(url, { secrets: ring(K2_ONLY) }), /sealed under key "k1", which the secrets key file does not hold/);
      await outboxRow(store).set({ body: change.body }).execute();
      // Then only in a notifier's signing secret, or a Slack notifier's URL.
      await old.notifications.create(notifier("hook"));
      await assert.rejects(Store.open(url, { secrets: ring(K2_ONLY) }), /sealed under key "k1", which the secrets key file does not hold/);
      await store.notifications.delete("hook");
      await store.notifications.create(slack("chat"));
      const sealedUnderK1 = old.secrets!.seal("notifier/chat/url", SLACK_URL);
      await store.database.db.updateTable("notifiers").set({ url_secret: sealedUnderK1 }).where("name", "=", "chat").execute();
      await assert.rejects(Store.open(url, { secrets: ring(K2_ONLY) }), /sealed under key "k1", which the secrets key file does not hold/);
      await store.notifications.delete("chat");
      await (await Store.open(url, { secrets: ring(K2_ONLY) })).close();
    } finally {
      await cleanup();
    }
  });
}
