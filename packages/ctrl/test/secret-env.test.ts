// Secret env values: written through each protocol, never read back. Every
// read RPC, the status stream, revisions and the audit trail show only that a value is set
// and its keyed fingerprint; the database holds them sealed (the SQLite file and a MariaDB
// dump never contain one); a name without a value keeps the stored one; rotation re-seals
// every value under the newest key; a missing or wrong key stops ctrl from starting.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createSecretKey, randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { HistoryService } from "@flotilla/proto/ctrl/v1/history_pb.js";
import { ClusterService, SyncDesiredStateResponseSchema, WatchDeploymentChangesResponseSchema } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import {
  ChangeEventSchema,
  DeploymentSchema,
  DesiredResourceSchema,
  ResourceType,
  SecretEnvVarSchema,
  type DesiredResource,
  type Workload,
} from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { StatusService } from "@flotilla/proto/ctrl/v1/status_pb.js";
import { createLogger } from "@flotilla/runtime";
import { openValue, packValues, sealedKeyId, secretEnvChecksum, secretEnvContext, unpackValues } from "@flotilla/runtime/sealed-values";
import { generateKeyFile, scanSealedKeys, secretContext, SecretKeyRing, Store, valueContext } from "@flotilla/store";
import { legacyFingerprint, legacySeal } from "@flotilla/testkit/legacy-seals";
import type { Kysely } from "kysely";
import { testDatabases } from "@flotilla/testkit/databases";
import { rowCounts, startTestCtrl, type Protocol, type TestCtrl } from "@flotilla/testkit/ctrl";

const PROTOCOLS: Protocol[] = ["connect", "grpc", "grpcweb"];
const newSecret = () => `s3cret-${randomBytes(12).toString("hex")}`;
const ringOf = (file: string) => SecretKeyRing.parse(file, "test key file");

/** Every byte a response carries, binary and as JSON, must not hold `secret`. */
function assertHidden<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>, secrets: string[], what: string): void {
  const binary = Buffer.from(toBinary(schema, message));
  const json = JSON.stringify(message, (_, v) => (typeof v === "bigint" ? String(v) : v instanceof Uint8Array ? Buffer.from(v).toString("latin1") : v));
  for (const secret of secrets) {
    assert.ok(!binary.includes(secret), `${what} carries a secret value (binary)`);
    assert.ok(!json.includes(secret), `${what} carries a secret value`);
  }
}

/** The plain text of every file and dump the database is: no secret value may be in it. */
function databaseText(databaseUrl: string): Buffer {
  if (databaseUrl.startsWith("sqlite:")) {
    const file = databaseUrl.slice("sqlite:".length);
    return Buffer.concat([file, `${file}-wal`].filter(existsSync).map((f) => readFileSync(f)));
  }
  const url = new URL(databaseUrl);
  // The password by environment, as MySQL's clients take it: never in the process list.
  return execFileSync("mysqldump", ["-h", url.hostname, "-P", url.port || "3306", "-u", decodeURIComponent(url.username), url.pathname.slice(1)], {
    env: { ...process.env, MYSQL_PWD: decodeURIComponent(url.password) },
  });
}

for (const { db, skip } of await testDatabases()) {
  describe(`secret env (${db.name})`, { skip }, () => {
    const keyFile = generateKeyFile("k1");
    let t: TestCtrl;
    const logLines: string[] = [];
    before(async () => {
      t = await startTestCtrl(
        db,
        // Two per answer: three deployments make GetSecretEnvSeals answer in two parts.
        { log: createLogger({ level: "debug", write: (line) => logLines.push(line) }), stream: { secretSealsMax: 2 } },
        { secrets: ringOf(keyFile) },
      );
      await t.store.regions.create("local");
    });
    after(() => t?.close());

    const written = new Map<string, string>();

    test("a value written through each protocol is never in a response, the status stream, revisions or the audit trail", async () => {
      for (const protocol of PROTOCOLS) {
        const secret = newSecret();
        const id = `api-${protocol}`;
        written.set(id, secret);
        const client = t.client(DeploymentService, { protocol });
        const created = await client.createDeployment({
          deployment: {
            id,
            namespace: "demo",
            image: "api:1",
            regions: [{ region: "local", replicas: 1 }],
            secretEnv: [{ name: "DB_PASSWORD", value: secret }],
          },
        });
        const shown = created.deployment!.secretEnv[0]!;
        assert.equal(shown.set, true);
        assert.match(shown.fingerprint, /^[0-9a-f]{16}$/);
        assert.equal(shown.value, undefined);
        assert.equal(shown.sealed.length, 0);
        assert.equal(shown.fingerprint, ringOf(keyFile).fingerprint(id, "DB_PASSWORD", secret), "the fingerprint is the keyed one");
      }
      const secrets = [...written.values()];
      for (const protocol of PROTOCOLS) {
        const deployments = t.client(DeploymentService, { protocol });
        const history = t.client(HistoryService, { protocol });
        for (const id of written.keys()) {
          const got = await deployments.getDeployment({ id });
          assert.equal(got.deployment!.secretEnv[0]!.set, true);
          assert.equal(got.deployment!.secretEnv[0]!.fingerprint, ringOf(keyFile).fingerprint(id, "DB_PASSWORD", written.get(id)!));
          assertHidden(DeploymentService.method.getDeployment.output, got, secrets, `GetDeployment over ${protocol}`);
          const revisions = await history.listRevisions({ resourceType: ResourceType.DEPLOYMENT, id });
          const spec = revisions.revisions[0]!.spec;
          assert.equal(spec.case === "deployment" && spec.value.secretEnv[0]!.set, true, "a revision shows the value set");
          assertHidden(HistoryService.method.listRevisions.output, revisions, secrets, `ListRevisions over ${protocol}`);
          const revision = await history.getRevision({ resourceType: ResourceType.DEPLOYMENT, id, revision: 1n });
          assertHidden(HistoryService.method.getRevision.output, revision, secrets, `GetRevision over ${protocol}`);
        }
        assertHidden(DeploymentService.method.listDeployments.output, await deployments.listDeployments({}), secrets, `ListDeployments over ${protocol}`);
        assertHidden(HistoryService.method.listAuditEvents.output, await history.listAuditEvents({}), secrets, `ListAuditEvents over ${protocol}`);
        const abort = new AbortController();
        for await (const event of t.client(StatusService, { protocol }).watchStatus({}, { signal: abort.signal })) {
          assertHidden(StatusService.method.watchStatus.output, event, secrets, `WatchStatus over ${protocol}`);
          if (event.event.case === "synced") break;
        }
        abort.abort();
      }
    });

    test("a read-modify-write keeps every value; a value replaces, a removed name deletes", async () => {
      const client = t.client(DeploymentService);
      const id = "api-connect";
      const before = (await client.getDeployment({ id })).deployment!;
      const fingerprint = before.secretEnv[0]!.fingerprint;
      before.image = "api:2";
      before.secretEnv.push(create(SecretEnvVarSchema, { name: "API_KEY", value: "k-1" }));
      const updated = (await client.updateDeployment({ deployment: before })).deployment!;
      assert.deepEqual(
        updated.secretEnv.map((s) => [s.name, s.set, s.fingerprint]),
        [
          ["DB_PASSWORD", true, fingerprint],
          ["API_KEY", true, ringOf(keyFile).fingerprint(id, "API_KEY", "k-1")],
        ],
      );
      const stored = await desiredSecrets(t.store, id, ringOf(keyFile));
      assert.equal(stored.get("DB_PASSWORD"), written.get(id), "the value kept is the one written");
      const replaced = newSecret();
      written.set(id, replaced);
      updated.secretEnv = [create(SecretEnvVarSchema, { name: "DB_PASSWORD", value: replaced })];
      const after = (await client.updateDeployment({ deployment: updated })).deployment!;
      assert.deepEqual(
        after.secretEnv.map((s) => s.name),
        ["DB_PASSWORD"],
      );
      assert.notEqual(after.secretEnv[0]!.fingerprint, fingerprint);
      assert.deepEqual([...(await desiredSecrets(t.store, id, ringOf(keyFile)))], [["DB_PASSWORD", replaced]]);
      const same = (
        await client.updateDeployment({ deployment: { ...after, secretEnv: [create(SecretEnvVarSchema, { name: "DB_PASSWORD", value: replaced })] } })
      ).deployment!;
      // A supplied value is a write whatever it is: no answer tells whether it equals the stored one.
      assert.equal(same.revision, after.revision + 1n, "writing the same value again is a new revision");
      assert.equal(same.secretEnv[0]!.fingerprint, after.secretEnv[0]!.fingerprint, "with the same fingerprint");
    });

    test("a new name without a value, or a name twice, is INVALID_ARGUMENT naming the field, writing nothing", async () => {
      const counts = await rowCounts(t.store);
      const bad: [object[], RegExp][] = [
        [[{ name: "NEW_ONE" }], /deployment\.secret_env\[0\]\.value: required: no value is stored under "NEW_ONE"/],
        [
          [
            { name: "A", value: "1" },
            { name: "A", value: "2" },
          ],
          /deployment\.secret_env\[1\]\.name: "A" is listed twice/,
        ],
        [[{ name: "1BAD", value: "x" }], /deployment\.secret_env\[0\]\.name/],
      ];
      for (const [secretEnv, message] of bad) {
        await assert.rejects(
          t.client(DeploymentService).createDeployment({ deployment: { id: "bad", namespace: "demo", image: "x:1", secretEnv } as never }),
          (e) => ConnectError.from(e).code === Code.InvalidArgument && message.test(ConnectError.from(e).message),
          JSON.stringify(secretEnv),
        );
      }
      assert.deepEqual(await rowCounts(t.store), counts);
    });

    test("the watch carries the values sealed as one for the region's own agent, the snapshot none (GetSecretEnvSeals gives them, as many as --secret-seals-max per answer), and that agent alone gets the keys that open them, over each protocol; the admin token gets the names and the checksum", async () => {
      const regions = t.client(RegionService);
      await regions.createRegion({ region: { name: "other" } });
      const own = (await regions.createAgentToken({ region: "local" })).token;
      const otherAgent = (await regions.createAgentToken({ region: "other" })).token;
      const localKeyId = `k1/r${(await t.store.regions.resolve("local")).id}`;
      const secrets = [...written.values()];
      const refused = (e: unknown) => ConnectError.from(e).code === Code.PermissionDenied;
      for (const protocol of PROTOCOLS) {
        const cluster = (token?: string) => t.client(ClusterService, { protocol, ...(token ? { token } : {}) });
        /** The secret env of each resource the streams carry, by id (and id@version for the watch); the snapshot's seals fetched with GetSecretEnvSeals. */
        const streamed = async (token: string | undefined) => {
          const entries = new Map<string, { id: string; entry: Workload }>();
          const versions: { id: string; version: bigint }[] = [];
          for await (const response of cluster(token).syncDesiredState({ region: "local" })) {
            if (response.message.case !== "batch") continue;
            assertHidden(SyncDesiredStateResponseSchema, response, secrets, `SyncDesiredState over ${protocol}`);
            for (const resource of response.message.value.resources) {
              const entry = streamedSecrets(resource);
              assert.equal(entry.secretEnvSealed.length, 0, `${protocol}: the snapshot carries no seal of ${resource.id}`);
              entries.set(resource.id, { id: resource.id, entry });
              versions.push({ id: resource.id, version: resource.version });
            }
          }
          if (token === own) {
            const answer = await cluster(token).getSecretEnvSeals({ region: "local", deployments: versions });
            assert.equal(answer.answered, 2, "--secret-seals-max answers two of three");
            const rest = await cluster(token).getSecretEnvSeals({ region: "local", deployments: versions.slice(answer.answered) });
            assert.equal(rest.answered, versions.length - 2);
            for (const { id, sealed } of [...answer.seals, ...rest.seals]) entries.get(id)!.entry.secretEnvSealed = sealed;
            assertHidden(ClusterService.method.getSecretEnvSeals.output, answer, secrets, `GetSecretEnvSeals over ${protocol}`);
            const replaced = await cluster(token).getSecretEnvSeals({
              region: "local",
              deployments: [{ ...versions[0]!, version: versions[0]!.version - 1n }],
            });
            assert.deepEqual([replaced.answered, replaced.seals.length], [1, 0], "a version replaced: answered, without a seal");
          }
          const abort = new AbortController();
          for await (const response of cluster(token).watchDeploymentChanges({ region: "local", versionLastSeen: 0n }, { signal: abort.signal })) {
            assertHidden(WatchDeploymentChangesResponseSchema, response, secrets, `WatchDeploymentChanges over ${protocol}`);
            for (const event of response.events)
              if (event.change.case === "upsert")
                entries.set(`${event.change.value.id}@${event.version}`, { id: event.change.value.id, entry: streamedSecrets(event.change.value) });
            if (response.events.length === 0) break;
          }
          abort.abort();
          return entries;
        };
        const { keys } = await cluster(own).getSecretKeys({ region: "local" });
        assert.deepEqual(
          keys.map((k) => [k.id, k.key.length]),
          [[localKeyId, 32]],
          "one key per key of the file, derived for the region",
        );
        const agent = await streamed(own);
        for (const [id, secret] of written)
          assert.equal(openWith(keys, id, agent.get(id)!.entry).get("DB_PASSWORD"), secret, `${protocol}: the agent of local opens ${id}'s value`);
        for (const { id, entry } of agent.values()) {
          // A change whose values were replaced since keeps its names alone (purged from the outbox).
          if (entry.secretEnvSealed.length > 0) assert.ok(openWith(keys, id, entry).size > 0, `${protocol}: every change's values open`);
        }
        const admin = await streamed(undefined);
        assert.ok(admin.size > written.size, "the admin's streams carry the changes too");
        for (const [key, { entry }] of admin) assert.equal(entry.secretEnvSealed.length, 0, `${protocol}: the admin token's stream carries no seal of ${key}`);
        // The keys go to the region's own agent alone.
        await assert.rejects(cluster().getSecretKeys({ region: "local" }), refused, "the admin token");
        await assert.rejects(cluster(otherAgent).getSecretKeys({ region: "local" }), refused, "another region's agent");
        await assert.rejects(cluster(own).getSecretKeys({ region: "other" }), refused, "for another region");
        const asked = { region: "local", deployments: [...written.keys()].map((id) => ({ id, version: 1n })) };
        await assert.rejects(cluster().getSecretEnvSeals(asked), refused, "the admin token's seals");
        await assert.rejects(cluster(otherAgent).getSecretEnvSeals(asked), refused, "another region's agent's seals");
        await assert.rejects(cluster(own).getSecretEnvSeals({ ...asked, region: "other" }), refused, "seals of another region");
        // Another region's keys do not open this region's values, under any id.
        const otherKeys = (await cluster(otherAgent).getSecretKeys({ region: "other" })).keys.map((k) => ({ ...k, id: localKeyId }));
        for (const [id] of written) assert.throws(() => openWith(otherKeys, id, agent.get(id)!.entry), /does not open/);
        await assert.rejects(
          (async () => {
            for await (const _ of cluster(own).syncDesiredState({ region: "other" }));
          })(),
          refused,
        );
      }
    });

    test("asked with_secret_env_seals (an agent that holds no value), the region's own agent's snapshot carries every value sealed as one, over each protocol; any other caller's none", async () => {
      const own = (await t.client(RegionService).createAgentToken({ region: "local" })).token;
      const { keys } = await t.client(ClusterService, { token: own }).getSecretKeys({ region: "local" });
      const secrets = [...written.values()];
      for (const protocol of PROTOCOLS) {
        const snapshot = async (token: string | undefined) => {
          const entries = new Map<string, Workload>();
          const cluster = t.client(ClusterService, { protocol, ...(token ? { token } : {}) });
          for await (const response of cluster.syncDesiredState({ region: "local", withSecretEnvSeals: true })) {
            if (response.message.case !== "batch") continue;
            assertHidden(SyncDesiredStateResponseSchema, response, secrets, `SyncDesiredState with seals over ${protocol}`);
            for (const resource of response.message.value.resources) entries.set(resource.id, streamedSecrets(resource));
          }
          return entries;
        };
        const agent = await snapshot(own);
        for (const [id, secret] of written)
          assert.equal(openWith(keys, id, agent.get(id)!).get("DB_PASSWORD"), secret, `${protocol}: ${id}'s value in the snapshot`);
        for (const [id, entry] of await snapshot(undefined))
          assert.equal(entry.secretEnvSealed.length, 0, `${protocol}: the admin token's snapshot carries no seal of ${id}`);
      }
    });

    test("ctrl's debug log holds no value", () => {
      assert.ok(logLines.length > 0, "ctrl logged");
      for (const secret of written.values()) assert.ok(!logLines.join("\n").includes(secret), "a value in ctrl's log");
    });

    test("the database holds no value in plain text", async () => {
      const text = databaseText(t.databaseUrl);
      for (const secret of written.values()) assert.ok(!text.includes(secret), `the ${db.name} database holds a secret in plain text`);
    });

    test("values stored by an earlier version (its seal form and fingerprints; in a region's state one by one, under the data key or the region's, or as one inside the body) are re-sealed in every table when ctrl starts", async () => {
      const ring = ringOf(keyFile);
      const rows = await t.store.database.db
        .selectFrom("desired_resources")
        .select(["region_id", "resource_type", "resource_id", "body", "secret_env_sealed"])
        .execute();
      let legacy = 0;
      for (const row of rows) {
        const resource = fromBinary(DesiredResourceSchema, row.body);
        const workload = resource.spec.case === "deployment" ? resource.spec.value.workload : undefined;
        if (!workload || workload.secretEnv.length === 0) continue;
        const values = await desiredSecrets(t.store, resource.id, ring);
        // Rows as the three versions before stored them: one by one under the data key, or under
        // the region's; or as one inside the body.
        const names = workload.secretEnv.map((s) => s.name);
        if (legacy % 3 === 2) {
          const packed = packValues(names.map((name) => Buffer.from(values.get(name)!)));
          workload.secretEnvSealed = legacySeal(keyFile, "k1", secretEnvContext(resource.id, names), packed, row.region_id);
        } else {
          for (const s of workload.secretEnv) {
            const value = values.get(s.name)!;
            const context = secretContext(resource.id, s.name);
            s.sealed = legacySeal(keyFile, "k1", context, value, legacy % 3 === 0 ? undefined : row.region_id);
            s.fingerprint = legacyFingerprint(keyFile, "k1", value);
          }
          workload.secretEnvChecksum = "";
        }
        await t.store.database.db
          .updateTable("desired_resources")
          .set({ body: toBinary(DesiredResourceSchema, resource), secret_env_sealed: null })
          .where("region_id", "=", row.region_id)
          .where("resource_type", "=", row.resource_type)
          .where("resource_id", "=", row.resource_id)
          .execute();
        legacy++;
      }
      assert.ok(legacy >= written.size);
      // The deployments and their revisions, as an earlier version sealed and fingerprinted them.
      for (const table of ["deployments", "resource_revisions"] as const) {
        for (const row of await (t.store.database.db as Kysely<any>).selectFrom(table).selectAll().execute()) {
          const deployment = fromBinary(DeploymentSchema, row.body);
          if (table === "resource_revisions" && row.resource_type !== ResourceType.DEPLOYMENT) continue;
          if (deployment.secretEnv.length === 0) continue;
          for (const s of deployment.secretEnv) {
            // A stored revision holds no value in this version; an earlier version kept them there.
            const value =
              table === "resource_revisions"
                ? "a value an earlier version kept"
                : ring.open(valueContext(deployment.id, s.name, Number(row.revision)), s.sealed);
            s.sealed = legacySeal(keyFile, "k1", secretContext(deployment.id, s.name), value);
            s.fingerprint = legacyFingerprint(keyFile, "k1", value);
          }
          let update = (t.store.database.db as Kysely<any>).updateTable(table).set({ body: toBinary(DeploymentSchema, deployment) });
          for (const key of table === "deployments" ? ["id"] : ["resource_type", "resource_id", "revision"]) update = update.where(key, "=", row[key]);
          await update.execute();
        }
      }
      const localKeyId = `k1/r${(await t.store.regions.resolve("local")).id}`;
      /** The key ids of the seals one by one, of the seals as one in the body, and of those in their column, in the desired state. */
      const keyIds = async () => {
        const ids = { oneByOne: new Set<string>(), inBody: new Set<string>(), inColumn: new Set<string>() };
        for (const row of await t.store.database.db.selectFrom("desired_resources").select(["body", "secret_env_sealed"]).execute()) {
          const resource = fromBinary(DesiredResourceSchema, row.body);
          const workload = resource.spec.case === "deployment" ? resource.spec.value.workload : undefined;
          for (const s of workload?.secretEnv ?? []) if (s.sealed.length > 0) ids.oneByOne.add(sealedKeyId(s.sealed));
          if (workload?.secretEnvSealed.length) ids.inBody.add(sealedKeyId(workload.secretEnvSealed));
          if (row.secret_env_sealed) ids.inColumn.add(sealedKeyId(row.secret_env_sealed));
        }
        return { oneByOne: [...ids.oneByOne].sort(), inBody: [...ids.inBody], inColumn: [...ids.inColumn] };
      };
      assert.deepEqual(await keyIds(), { oneByOne: ["k1", localKeyId], inBody: [localKeyId], inColumn: [] });
      await assert.rejects(t.store.deployments.rollback([...written.keys()][0]!, 1, undefined), /sealed as an earlier version of ctrl sealed it/);
      await (await Store.open(t.databaseUrl, { secrets: ring })).close();
      assert.deepEqual(await keyIds(), { oneByOne: [], inBody: [], inColumn: [localKeyId] });
      const scan = await scanSealedKeys(t.store.database.db);
      assert.deepEqual([...scan.keys.keys()], ["k1"]);
      assert.deepEqual([...scan.legacy], [], "no table holds a seal in an earlier version's form");
      for (const row of await t.store.database.db.selectFrom("resource_revisions").select("body").execute()) {
        for (const s of fromBinary(DeploymentSchema, row.body).secretEnv)
          assert.equal(s.sealed.length, 0, "the values an earlier version kept in revisions are cleared");
      }
      for (const [id, secret] of written) {
        assert.equal((await desiredSecrets(t.store, id, ring)).get("DB_PASSWORD"), secret);
        const shown = (await t.store.deployments.get(id)).secretEnv;
        assert.equal(shown[0]!.fingerprint, ring.fingerprint(id, "DB_PASSWORD", secret), `${id}'s fingerprint is of (deployment, name, value)`);
        // The region's pod template checksum is the one the next write computes: no second roll.
        const row = await t.store.database.db.selectFrom("desired_resources").select("body").where("resource_id", "=", id).executeTakeFirstOrThrow();
        const resource = fromBinary(DesiredResourceSchema, row.body);
        const workload = resource.spec.case === "deployment" ? resource.spec.value.workload : undefined;
        assert.equal(workload?.secretEnvChecksum, secretEnvChecksum(shown));
      }
    });

    test("rotation: a second key, re-seal, the first removed: every value still opens; a missing or wrong key is a startup error", async () => {
      const both = generateKeyFile("k2", keyFile);
      const newest = JSON.stringify({ keys: [JSON.parse(both).keys[1]] });
      const rotating = new Store(t.store.database, { secrets: ringOf(both) });
      // A key added to the file makes a new fingerprint key; until the rotation, a write keeps the
      // stored fingerprints, so the pod template's checksum, and no pod rolls.
      const id = [...written.keys()][0]!;
      const checksum = async () => {
        const row = await t.store.database.db.selectFrom("desired_resources").select("body").where("resource_id", "=", id).executeTakeFirstOrThrow();
        const resource = fromBinary(DesiredResourceSchema, row.body);
        return resource.spec.case === "deployment" ? resource.spec.value.workload?.secretEnvChecksum : undefined;
      };
      const before = await checksum();
      const stored = await rotating.deployments.get(id);
      stored.image = "api:after-a-key-was-added";
      await rotating.deployments.update(stored);
      assert.match(before ?? "", /^[0-9a-f]{16}$/);
      assert.equal(await checksum(), before, "a write between adding a key and the rotation keeps the checksum");
      const rotation = await rotating.rotateSecrets();
      assert.ok(rotation.moved >= written.size);
      assert.equal(rotation.stillUsed.size, 0, "the scan after it finds no value under k1");
      assert.equal((await rotating.rotateSecrets()).moved, 0, "a second rotation has nothing to move");
      for (const [id, secret] of written) assert.equal((await desiredSecrets(t.store, id, ringOf(newest))).get("DB_PASSWORD"), secret);
      const outbox = await t.store.database.db.selectFrom("deployment_changes").select("body").execute();
      let opened = 0;
      for (const row of outbox) {
        const event = fromBinary(ChangeEventSchema, row.body);
        const resource = event.change.case === "upsert" ? event.change.value : undefined;
        const workload = resource?.spec.case === "deployment" ? resource.spec.value.workload : undefined;
        if (workload?.secretEnvSealed.length) opened += (await openedAsOne(ringOf(newest), resource!.id, workload)).size;
      }
      assert.ok(opened >= written.size, "every outbox row's value opens under the newest key alone");
      await assert.doesNotReject(Store.open(t.databaseUrl, { secrets: ringOf(newest) }).then((s) => s.close()));
      await assert.rejects(Store.open(t.databaseUrl), /sealed under keys "k2": start with --secrets-key-file holding them/);
      await assert.rejects(Store.open(t.databaseUrl, { secrets: ringOf(keyFile) }), /sealed under key "k2", which the secrets key file does not hold/);
      await assert.rejects(Store.open(t.databaseUrl, { secrets: ringOf(generateKeyFile("k2")) }), /does not open under key "k2"/);
      const text = databaseText(t.databaseUrl);
      for (const secret of written.values()) assert.ok(!text.includes(secret), "no value in plain text after the rotation");
    });
  });
}

/** A resource's secret env as a stream delivered it: the names, never a value in plain text nor one sealed alone, and the pod template's checksum. */
function streamedSecrets(resource: DesiredResource): Workload {
  const workload = resource.spec.case === "deployment" ? resource.spec.value.workload : undefined;
  assert.ok(workload && workload.secretEnv.some((s) => s.name === "DB_PASSWORD"), `${resource.id} carries its secret's name`);
  for (const s of workload.secretEnv) {
    assert.equal(s.value, undefined, "no stream carries a value in plain text");
    assert.equal(s.sealed.length, 0, "no stream carries a value sealed alone");
  }
  assert.match(workload.secretEnvChecksum, /^[0-9a-f]{16}$/);
  return workload;
}

/** The values of deployment `id`'s secret env as a stream delivered it, by name, opened with GetSecretKeys' `keys` as the agent does. */
function openWith(keys: { id: string; key: Uint8Array }[], id: string, workload: Workload): Map<string, string> {
  const key = keys.find((k) => k.id === sealedKeyId(workload.secretEnvSealed));
  assert.ok(key, `a key of id ${sealedKeyId(workload.secretEnvSealed)}`);
  const names = workload.secretEnv.map((s) => s.name);
  const values = unpackValues(openValue(createSecretKey(key.key), secretEnvContext(id, names), workload.secretEnvSealed), names.length);
  return new Map(names.map((name, i) => [name, values[i]!.toString("utf8")]));
}

/** The values of deployment `id`'s secret env in a region's form, by name, opened with `ring`. */
async function openedAsOne(ring: SecretKeyRing, id: string, workload: Workload): Promise<Map<string, string>> {
  const names = workload.secretEnv.map((s) => s.name);
  const values = unpackValues(ring.openBytes(secretEnvContext(id, names), workload.secretEnvSealed), names.length);
  return new Map(names.map((name, i) => [name, values[i]!.toString("utf8")]));
}

/** The values of a deployment's secrets as the desired state of its region holds them, opened. */
async function desiredSecrets(store: Store, id: string, ring: SecretKeyRing): Promise<Map<string, string>> {
  const row = await store.database.db
    .selectFrom("desired_resources")
    .select(["body", "secret_env_sealed"])
    .where("resource_id", "=", id)
    .executeTakeFirstOrThrow();
  const resource = fromBinary(DesiredResourceSchema, row.body);
  const workload = resource.spec.case === "deployment" ? resource.spec.value.workload : undefined;
  assert.ok(workload, `${id} is a workload`);
  assert.equal(workload.secretEnvSealed.length, 0, "the body holds no seal: it is in its column");
  assert.ok(row.secret_env_sealed, `${id}'s seal in its column`);
  workload.secretEnvSealed = row.secret_env_sealed;
  return openedAsOne(ring, id, workload);
}
