// Agent token lifecycle: list (never the secret), revoke, expiry; revocation and region
// deletion refused on a second ctrl replica within 1 s (SQLite file and MariaDB); a token
// never authenticates against a new region of the same name; the unknown-token cache stays
// bounded under a spray of random tokens. A forged token is refused without a query.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import { DurationSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, createContextValues, type Client } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ClusterService } from "@flotilla/proto/ctrl/v1/cluster_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { Store } from "@flotilla/store";
import { createAuthenticator } from "../src/auth.ts";
import { startCtrl, type Ctrl } from "../src/server.ts";
import { freshStore, testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, startTestCtrl, testLogger, type TestCtrl } from "@flotilla/testkit/ctrl";

/** Within this long after a revocation or deletion, every replica refuses the token. */
const PROPAGATION_BOUND_MS = 1000;

function cluster(url: string, token: string): Client<typeof ClusterService> {
  return createClient(
    ClusterService,
    createGrpcTransport({
      baseUrl: url,
      interceptors: [
        (next) => (req) => {
          req.header.set("authorization", `Bearer ${token}`);
          return next(req);
        },
      ],
    }),
  );
}

/** A cheap agent call: the code it ends with (OK for success). */
async function report(url: string, token: string, region: string): Promise<Code | "ok"> {
  try {
    await cluster(url, token).reportObservedState({ region, appliedVersion: 0n });
    return "ok";
  } catch (error) {
    return ConnectError.from(error).code;
  }
}

for (const { db, skip } of await testDatabases()) {
  describe(`agent tokens on two ctrl replicas (${db.name})`, { skip }, () => {
    let a: TestCtrl;
    let bStore: Store;
    let b: Ctrl;
    let regions: Client<typeof RegionService>;
    before(async () => {
      a = await startTestCtrl(db);
      bStore = await Store.open(a.databaseUrl);
      b = await startCtrl({ store: bStore, adminToken: ADMIN_TOKEN, port: 0, shutdownGraceMs: 500 });
      regions = a.client(RegionService);
      await regions.createRegion({ region: { name: "east" } });
    });
    after(async () => {
      await b.shutdown();
      await bStore.close();
      await a.close();
    });

    test("list shows metadata and never the token; revoke removes it; revoking twice is NOT_FOUND", async () => {
      const { token, tokenId } = await regions.createAgentToken({ region: "east" });
      assert.equal(await report(a.url, token, "east"), "ok");
      let listed;
      // last use is recorded off the call's path.
      for (let i = 0; i < 50; i++) {
        listed = (await regions.listAgentTokens({ region: "east" })).agentTokens.find((t) => t.id === tokenId);
        if (listed?.lastUseTime) break;
        await sleep(20);
      }
      assert.ok(listed?.createTime && listed.lastUseTime, "created and last-used times");
      assert.equal(listed.region, "east");
      assert.equal(listed.expireTime, undefined);
      const everything = JSON.stringify(await regions.listAgentTokens({}), (_, v) => (typeof v === "bigint" ? String(v) : v));
      assert.ok(!everything.includes(token.slice(10)), "the secret is never listed");

      await regions.revokeAgentToken({ id: tokenId });
      assert.ok(!(await regions.listAgentTokens({ region: "east" })).agentTokens.some((t) => t.id === tokenId));
      await sleep(PROPAGATION_BOUND_MS);
      assert.equal(await report(a.url, token, "east"), Code.Unauthenticated);
      await assert.rejects(regions.revokeAgentToken({ id: tokenId }), (e) => ConnectError.from(e).code === Code.NotFound);
    });

    test("an expiring token works until its expiry, then is UNAUTHENTICATED; expiries must lie ahead", async () => {
      const { token, tokenId, expireTime } = await regions.createAgentToken({
        region: "east",
        expiration: { case: "ttl", value: create(DurationSchema, { seconds: 1n }) },
      });
      assert.ok(expireTime);
      assert.equal(await report(a.url, token, "east"), "ok");
      const listed = (await regions.listAgentTokens({ region: "east" })).agentTokens.find((t) => t.id === tokenId);
      assert.deepEqual(listed?.expireTime, expireTime);
      await sleep(Number(expireTime.seconds) * 1000 + expireTime.nanos / 1e6 - Date.now() + 50);
      assert.equal(await report(a.url, token, "east"), Code.Unauthenticated);
      assert.equal(await report(b.url, token, "east"), Code.Unauthenticated);

      for (const expiration of [
        { case: "expireTime" as const, value: timestampFromMs(Date.now() - 1000) },
        { case: "ttl" as const, value: create(DurationSchema, { seconds: -5n }) },
      ]) {
        await assert.rejects(regions.createAgentToken({ region: "east", expiration }), (e) => ConnectError.from(e).code === Code.InvalidArgument);
      }
    });

    test(`a revoked token is refused on the other replica within ${PROPAGATION_BOUND_MS} ms`, async () => {
      const { token, tokenId } = await regions.createAgentToken({ region: "east" });
      assert.equal(await report(b.url, token, "east"), "ok"); // now cached on b
      await regions.revokeAgentToken({ id: tokenId });
      await sleep(PROPAGATION_BOUND_MS);
      assert.equal(await report(b.url, token, "east"), Code.Unauthenticated);
    });

    test(`a watch stream open on the other replica ends within ${PROPAGATION_BOUND_MS} ms of its token's revocation`, async () => {
      const { token, tokenId } = await regions.createAgentToken({ region: "east" });
      const { token: other } = await regions.createAgentToken({ region: "east" });
      const watch = (t: string) => {
        const ended = { at: 0, code: undefined as Code | undefined };
        const done = (async () => {
          try {
            for await (const _ of cluster(b.url, t).watchDeploymentChanges({ region: "east", versionLastSeen: 0n })) void _;
          } catch (error) {
            ended.code = ConnectError.from(error).code;
          }
          ended.at = Date.now();
        })();
        return { ended, done };
      };
      const revoked = watch(token);
      const kept = watch(other);
      await sleep(300); // both streams open and authorized
      assert.equal(revoked.ended.at, 0);
      await regions.revokeAgentToken({ id: tokenId });
      const revokedAt = Date.now();
      await sleep(PROPAGATION_BOUND_MS);
      assert.ok(
        revoked.ended.at > 0 && revoked.ended.at - revokedAt <= PROPAGATION_BOUND_MS,
        `ended ${revoked.ended.at ? revoked.ended.at - revokedAt : "never"} ms after`,
      );
      assert.notEqual(revoked.ended.code, undefined);
      assert.equal(kept.ended.at, 0, "another token's stream goes on");
      await b.shutdown();
      await kept.done;
      await revoked.done;
      b = await startCtrl({ store: bStore, adminToken: ADMIN_TOKEN, port: 0, shutdownGraceMs: 500 });
    });

    test(`a deleted region's token is refused on the other replica within ${PROPAGATION_BOUND_MS} ms, also after a region of the same name is created`, async () => {
      await regions.createRegion({ region: { name: "gone" } });
      const { token } = await regions.createAgentToken({ region: "gone" });
      assert.equal(await report(b.url, token, "gone"), "ok");
      await regions.deleteRegion({ name: "gone" });
      await sleep(PROPAGATION_BOUND_MS);
      assert.equal(await report(b.url, token, "gone"), Code.Unauthenticated);
      await regions.createRegion({ region: { name: "gone" } });
      assert.equal(await report(a.url, token, "gone"), Code.Unauthenticated);
      assert.equal(await report(b.url, token, "gone"), Code.Unauthenticated);
    });

    test("a grant still cached for a deleted region does not authorize its namesake", async () => {
      await regions.createRegion({ region: { name: "reborn" } });
      const { token } = await regions.createAgentToken({ region: "reborn" });
      assert.equal(await report(a.url, token, "reborn"), "ok");
      await regions.deleteRegion({ name: "reborn" });
      await regions.createRegion({ region: { name: "reborn" } });
      // Cached (PERMISSION_DENIED: the grant's region row is gone) or looked up again (UNAUTHENTICATED).
      assert.ok([Code.PermissionDenied, Code.Unauthenticated].includes((await report(a.url, token, "reborn")) as Code));
    });
  });
}

/** A ctrl on a store that counts the queries it makes; its poller does not poll again after its start. */
async function startCountingCtrl(store: Store, options: { tokenRecheckMs?: number } = {}): Promise<{ ctrl: Ctrl; queries(): number }> {
  let queries = 0;
  const counting: Parameters<typeof store.database.db.withPlugin>[0] = {
    transformQuery: (args) => {
      queries++;
      return args.node;
    },
    transformResult: async (args) => args.result,
  };
  const counted = new Store({ ...store.database, db: store.database.db.withPlugin(counting) });
  const ctrl = await startCtrl({
    store: counted,
    adminToken: ADMIN_TOKEN,
    port: 0,
    shutdownGraceMs: 500,
    pollIntervalMs: 3_600_000,
    // Renewing the rollout driver's lease is a query of its own, every third of this.
    rolloutLeaseMs: 3_600_000,
    // So are the notification dispatcher's looks for due deliveries and lost agents.
    notifications: { pollIntervalMs: 3_600_000 },
    log: testLogger(),
    ...options,
  });
  // Its start's own reads (the rollout driver takes its lease, arms its timer and looks at what
  // is progressing) may still run under load: counting starts once none has come for 300 ms.
  for (let seen = -1, deadline = Date.now() + 10_000; seen !== queries && Date.now() < deadline; ) {
    seen = queries;
    await sleep(300);
  }
  return { ctrl, queries: () => queries };
}

/** Inserts a token as ctrl did before tokens carried a MAC (as a replica of that version still would): 32 random bytes, its hash. */
async function insertTokenWithoutMac(store: Store, region: string): Promise<string> {
  const token = `flt_agent_${randomBytes(32).toString("base64url")}`;
  const { id: regionId } = await store.regions.resolve(region);
  await store.database.db
    .insertInto("agent_tokens")
    // Without token_format: that version did not know the column.
    .values({
      id: randomBytes(8).toString("hex"),
      region_id: regionId,
      token_hash: createHash("sha256").update(token).digest("hex"),
      create_time: Date.now(),
    } as never)
    .execute();
  return token;
}

for (const { db, skip } of await testDatabases()) {
  describe(`forged agent tokens (${db.name})`, { skip }, () => {
    test("are refused without a query: random MACs, a real token with its MAC or its secret altered, other formats", async () => {
      const { store, cleanup } = await freshStore(db);
      // No reload of the tokens minted before MACs within the test (the next test bounds those).
      const { ctrl, queries } = await startCountingCtrl(store, { tokenRecheckMs: 3_600_000 });
      try {
        await store.regions.create("east");
        const { token } = await store.agentTokens.create("east");
        const revoked = await store.agentTokens.create("east");
        await store.agentTokens.revoke(revoked.id);
        assert.match(token, /^flt_agent_[A-Za-z0-9_-]{64}$/);
        const body = token.slice("flt_agent_".length);
        const flip = (c: string) => (c === "A" ? "B" : "A");
        const forgeries = [
          ...Array.from({ length: 50 }, () => `flt_agent_${randomBytes(48).toString("base64url")}`),
          `flt_agent_${body.slice(0, -1)}${flip(body.at(-1)!)}`,
          `flt_agent_${flip(body[0]!)}${body.slice(1)}`,
          // The format of tokens minted before MACs, none of which exist here.
          ...Array.from({ length: 50 }, () => `flt_agent_${randomBytes(32).toString("base64url")}`),
          `${token}x`,
          token.slice(0, -1),
          "not-a-token",
        ];
        const before = queries();
        for (const forged of forgeries) assert.equal(await report(ctrl.url, forged, "east"), Code.Unauthenticated, forged);
        assert.equal(queries() - before, 0, "queries for forged tokens");
        assert.deepEqual(ctrl.tokenCacheSize(), { known: 0, unknown: 0 }, "forgeries are not cached");

        assert.equal(await report(ctrl.url, token, "east"), "ok");
        // The counter counts: a revoked token passes the screen and is looked up.
        const beforeRevoked = queries();
        assert.equal(await report(ctrl.url, revoked.token, "east"), Code.Unauthenticated);
        assert.ok(queries() > beforeRevoked, "a well-formed token is looked up");
      } finally {
        await ctrl.shutdown();
        await cleanup();
      }
    });

    test("tokens minted before MACs keep working, also one minted after ctrl started (by a replica not yet upgraded)", async () => {
      const { store, cleanup } = await freshStore(db);
      await store.regions.create("east");
      const old = await insertTokenWithoutMac(store, "east");
      const recheckMs = 200;
      const { ctrl, queries } = await startCountingCtrl(store, { tokenRecheckMs: recheckMs });
      try {
        assert.equal(await report(ctrl.url, old, "east"), "ok");
        const later = await insertTokenWithoutMac(store, "east");
        // A miss reloads the old tokens' hashes, at most once per recheck interval.
        let code = await report(ctrl.url, later, "east");
        for (let i = 0; i < 20 && code !== "ok"; i++) {
          await sleep(recheckMs / 2);
          code = await report(ctrl.url, later, "east");
        }
        assert.equal(code, "ok");
        // Forgeries in the old format cost no lookup: at most a reload per interval.
        const started = Date.now();
        const before = queries();
        for (let i = 0; i < 100; i++) assert.equal(await report(ctrl.url, `flt_agent_${randomBytes(32).toString("base64url")}`, "east"), Code.Unauthenticated);
        assert.ok(queries() - before <= Math.ceil((Date.now() - started) / recheckMs) + 1, `${queries() - before} queries`);
      } finally {
        await ctrl.shutdown();
        await cleanup();
      }
    });
  });
}

const [{ db: sqlite }] = await testDatabases();

test("open agent streams are tracked until they end, over HTTP/2 (gRPC) and HTTP/1.1 (Connect)", async () => {
  const t = await startTestCtrl(sqlite);
  try {
    await t.store.regions.create("east");
    const { token } = await t.store.agentTokens.create("east");
    const stop = new AbortController();
    const watches = (["grpc", "connect"] as const).map(async (protocol) => {
      try {
        for await (const _ of t
          .client(ClusterService, { token, protocol })
          .watchDeploymentChanges({ region: "east", versionLastSeen: 0n }, { signal: stop.signal }))
          void _;
      } catch {
        // cancelled below
      }
    });
    assert.equal(await report(t.url, token, "east"), "ok"); // unary calls are not tracked
    for (let i = 0; i < 100 && t.ctrl.agentStreamCount() < 2; i++) await sleep(20);
    assert.equal(t.ctrl.agentStreamCount(), 2);
    stop.abort();
    await Promise.all(watches);
    for (let i = 0; i < 100 && t.ctrl.agentStreamCount() > 0; i++) await sleep(20);
    assert.equal(t.ctrl.agentStreamCount(), 0);
  } finally {
    await t.close();
  }
});

test("--token-recheck-interval sets how long a known token is trusted without a lookup", async () => {
  const t = await startTestCtrl(sqlite, { tokenRecheckMs: 60_000 });
  try {
    await t.store.regions.create("east");
    const { token, id } = await t.store.agentTokens.create("east");
    assert.equal(await report(t.url, token, "east"), "ok");
    await t.store.agentTokens.revoke(id);
    // Still cached: with the default (500 ms) this is refused, as the tests above show.
    await sleep(PROPAGATION_BOUND_MS);
    assert.equal(await report(t.url, token, "east"), "ok");
  } finally {
    await t.close();
  }
});

describe("the unknown-token cache is bounded", () => {
  test("100,000 random tokens leave at most the configured number of entries", async () => {
    const { store, cleanup } = await freshStore(sqlite);
    try {
      await store.regions.create("east");
      const valid = (await store.agentTokens.create("east")).token;
      const auth = createAuthenticator({
        adminToken: ADMIN_TOKEN,
        // Every token looks well formed: each one is looked up (a forgery would not get this far).
        mayBeAgentToken: () => true,
        authenticateAgent: (token) => store.agentTokens.authenticate(token),
        publicServices: new Set(),
        tokenCacheSize: 1000,
        mayBeOperatorToken: () => false,
        authenticateOperator: async () => undefined,
        knownTokenCacheMs: 500,
      });
      const call = auth.interceptor(async () => ({}) as never);
      const attempt = (token: string) =>
        call({
          service: ClusterService,
          method: ClusterService.method.reportObservedState,
          header: new Headers({ authorization: `Bearer ${token}` }),
          contextValues: createContextValues(),
        } as never).then(
          () => "ok",
          (e) => ConnectError.from(e).code,
        );
      assert.equal(await attempt(valid), "ok");
      let refused = 0;
      for (let i = 0; i < 100_000; i++) if ((await attempt(`flt_agent_${randomBytes(32).toString("base64url")}`)) === Code.Unauthenticated) refused++;
      assert.equal(refused, 100_000);
      assert.deepEqual(auth.cacheSize(), { known: 1, unknown: 1000 });
      assert.equal(await attempt(valid), "ok");
    } finally {
      await cleanup();
    }
  });

  test("through a running ctrl: --token-cache-size bounds it", async () => {
    const t = await startTestCtrl(sqlite, { tokenCacheSize: 50 });
    try {
      await t.store.regions.create("east");
      // Revoked tokens: well formed (a forgery is refused before the cache), unknown to the database.
      const revoked = [];
      for (let i = 0; i < 500; i++) {
        const { id, token } = await t.store.agentTokens.create("east");
        await t.store.agentTokens.revoke(id);
        revoked.push(token);
      }
      const codes = await Promise.all(revoked.map((token) => report(t.url, token, "east")));
      assert.ok(codes.every((c) => c === Code.Unauthenticated));
      assert.equal(t.ctrl.tokenCacheSize().unknown, 50);
    } finally {
      await t.close();
    }
  });
});
