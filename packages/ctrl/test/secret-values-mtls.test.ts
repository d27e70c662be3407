// Values only for the region's real agent: with mTLS on, the keys and the seals go only to a
// caller presenting the region's client certificate with the region's agent token; a token
// alone, even one the admin just created, is PERMISSION_DENIED. Revoking one of a region's agent
// tokens moves its key epoch: a value written afterwards opens under none of the keys the
// revoked agent held. Client: @grpc/grpc-js.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createSecretKey } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import { SecretEnvVarSchema } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { openValue, sealedKeyId, secretEnvContext } from "@flotilla/runtime/sealed-values";
import { generateKeyFile, SecretKeyRing } from "@flotilla/store";
import { initPki, issueAgent } from "../src/pki.ts";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { grpcJsServerStream, grpcJsUnary } from "@flotilla/testkit/interop";

const [{ db: sqlite }] = await testDatabases();

describe("secret values with mTLS", () => {
  let dir: string;
  let t: TestCtrl;
  let ca: Buffer;
  const credentials = (files?: { cert: string; key: string }) =>
    grpc.credentials.createSsl(ca, files && readFileSync(files.key), files && readFileSync(files.cert));
  const admin = <I extends Parameters<typeof grpcJsUnary>[1]>(method: I, input: Parameters<typeof grpcJsUnary<any, any>>[2]) =>
    grpcJsUnary(t.url, method as never, input as never, ADMIN_TOKEN, credentials()) as Promise<any>;
  const code = (call: Promise<unknown>) =>
    call.then(
      () => grpc.status.OK,
      (e: grpc.ServiceError) => e.code,
    );

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "flotilla-secret-mtls-"));
    const pki = initPki(dir);
    ca = readFileSync(pki.caCert);
    t = await startTestCtrl(
      sqlite,
      { tls: { certFile: pki.serverCert, keyFile: pki.serverKey, clientCaFile: pki.caCert } },
      { secrets: SecretKeyRing.parse(generateKeyFile("k1"), "test key file") },
    );
    await t.store.regions.create("east");
    await t.store.regions.create("west");
  });
  after(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a token the admin just created, alone or with another region's certificate, gets PERMISSION_DENIED for the keys and the seals; with the region's certificate it gets them", async () => {
    const { token } = await admin(RegionService.method.createAgentToken, { region: "east" });
    await admin(DeploymentService.method.createDeployment, {
      deployment: { id: "api", namespace: "demo", image: "api:1", regions: [{ region: "east", replicas: 1 }], secretEnv: [{ name: "PASSWORD", value: "p1" }] },
    });
    const keys = (creds: grpc.ChannelCredentials) => grpcJsUnary(t.url, ClusterService.method.getSecretKeys, { region: "east" }, token, creds);
    const seals = (creds: grpc.ChannelCredentials) =>
      grpcJsUnary(t.url, ClusterService.method.getSecretEnvSeals, { region: "east", deployments: [{ id: "api", version: 1n }] }, token, creds);
    for (const call of [keys, seals]) {
      await assert.rejects(
        call(credentials()),
        (e: grpc.ServiceError) => e.code === grpc.status.PERMISSION_DENIED && /and its client certificate/.test(e.details),
      );
      assert.equal(await code(call(credentials(issueAgent(dir, "west")))), grpc.status.PERMISSION_DENIED);
      assert.equal(await code(call(credentials(issueAgent(dir, "east")))), grpc.status.OK);
    }
    // A snapshot's pages with the seals: to the region's token and certificate only; the admin token's pages carry none.
    const sealsInPages = (bearer: string, creds: grpc.ChannelCredentials) =>
      new Promise<number | grpc.status>((resolve) => {
        const call = grpcJsServerStream(t.url, ClusterService.method.syncDesiredState, { region: "east", withSecretEnvSeals: true }, bearer, creds);
        let seals = 0;
        call.stream.on(
          "data",
          (m: { message: { case: string; value: { resources?: { spec: { case: string; value: { workload?: { secretEnvSealed: Uint8Array } } } }[] } } }) => {
            for (const r of m.message.case === "batch" ? (m.message.value.resources ?? []) : []) seals += r.spec.value.workload?.secretEnvSealed.length ? 1 : 0;
            if (m.message.case === "complete") resolve(seals);
          },
        );
        call.stream.on("error", (e: grpc.ServiceError) => resolve(e.code));
        call.stream.on("end", () => call.close());
      });
    assert.equal(await sealsInPages(token, credentials(issueAgent(dir, "east"))), 1, "the region's agent gets the seal in its page");
    assert.equal(await sealsInPages(token, credentials()), grpc.status.UNAUTHENTICATED, "a token alone gets no stream");
    assert.equal(await sealsInPages(ADMIN_TOKEN, credentials(issueAgent(dir, "east"))), 0, "the admin token's pages carry no seal");
    // The admin token with a certificate of the region: still never the values.
    const east = credentials(issueAgent(dir, "east"));
    assert.equal(await code(grpcJsUnary(t.url, ClusterService.method.getSecretKeys, { region: "east" }, ADMIN_TOKEN, east)), grpc.status.PERMISSION_DENIED);
  });

  test("revoking a region's agent token moves its key epoch: a value set afterwards opens under none of the keys the revoked agent held", async () => {
    const east = credentials(issueAgent(dir, "east"));
    const revoked = await admin(RegionService.method.createAgentToken, { region: "east" });
    const kept = await admin(RegionService.method.createAgentToken, { region: "east" });
    const held = (await grpcJsUnary(t.url, ClusterService.method.getSecretKeys, { region: "east" }, revoked.token, east)).keys;
    await admin(RegionService.method.revokeAgentToken, { id: revoked.tokenId });
    const current = await admin(DeploymentService.method.getDeployment, { id: "api" });
    const update = current.deployment;
    update.secretEnv = [create(SecretEnvVarSchema, { name: "PASSWORD", value: "p2-after-revocation" })];
    await admin(DeploymentService.method.updateDeployment, { deployment: update });
    const row = await t.store.database.db
      .selectFrom("desired_resources")
      .select(["secret_env_sealed"])
      .where("resource_id", "=", "api")
      .executeTakeFirstOrThrow();
    const sealed = row.secret_env_sealed!;
    const regionId = (await t.store.regions.resolve("east")).id;
    assert.equal(sealedKeyId(sealed), `k1/r${regionId}e1`, "sealed under epoch 1's key");
    assert.ok(!held.some((k) => k.id === sealedKeyId(sealed)), "a key the revoked agent never received");
    for (const key of held) assert.throws(() => openValue(createSecretKey(key.key), secretEnvContext("api", ["PASSWORD"]), sealed));
    // The region's remaining agent gets the new epoch's key (and the older ones: rows keep their seals until written again).
    const now = (await grpcJsUnary(t.url, ClusterService.method.getSecretKeys, { region: "east" }, kept.token, east)).keys;
    const key = now.find((k) => k.id === sealedKeyId(sealed));
    assert.ok(key, "the kept agent holds the new key");
    assert.match(openValue(createSecretKey(key.key), secretEnvContext("api", ["PASSWORD"]), sealed).toString(), /p2-after-revocation/);
    assert.deepEqual(now.map((k) => k.id).sort(), [`k1/r${regionId}`, `k1/r${regionId}e1`]);
  });
});
