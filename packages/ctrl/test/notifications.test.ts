// Notifications: notifiers and their signing secrets,
// durable at-least-once delivery to real HTTP receivers that verify every request with the
// standardwebhooks package, retries (500 then 200, 429 with Retry-After), a receiver that never
// answers (bounded: it delays no other, and is dead-lettered), address checks, and a ctrl
// replica killed with kill -9 mid-delivery (another delivers; nothing lost). SQLite and MySQL.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { DeploymentService } from "@flotilla/proto/ctrl/v1/deployment_pb.js";
import {
  DeliveryState,
  GetNotifierResponseSchema,
  NotificationEvent,
  NotifierFormat,
  NotifierService,
  type Delivery,
} from "@flotilla/proto/ctrl/v1/notifier_pb.js";
import { OperatorService, Role } from "@flotilla/proto/ctrl/v1/operator_pb.js";
import { RegionService } from "@flotilla/proto/ctrl/v1/region_pb.js";
import { RolloutService } from "@flotilla/proto/ctrl/v1/rollout_pb.js";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { testDatabases, freshStore } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, rowCounts, startTestCtrl, testSecretKeyRing, type TestCtrl } from "@flotilla/testkit/ctrl";
import { spawnCtrl } from "@flotilla/testkit/ctrl-process";
import { REGION, startStack } from "@flotilla/testkit/stack";
import { RolloutFailurePolicy } from "@flotilla/proto/ctrl/v1/resources_pb.js";
import { Webhook } from "standardwebhooks";
import { parseConfig } from "../src/config.ts";
import { addressRefusal, urlProblem } from "../src/notifications/address.ts";
import { parseRetryAfter } from "../src/notifications/attempt.ts";
import { DEFAULT_DISPATCHER_OPTIONS, retryDelay } from "../src/notifications/dispatcher.ts";

interface Received {
  id: string;
  type: string;
  body: Record<string, unknown>;
  at: number;
  verified: boolean;
  /** The request's path. */
  path: string;
}

/** A real receiver: verifies each request's signature with `secret` (set once known); `answer` decides per request. */
async function receiver(answer: (n: number, res: http.ServerResponse) => void = (_n, res) => res.end("ok")) {
  const received: Received[] = [];
  let secret = "";
  let n = 0;
  const open = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const payload = Buffer.concat(chunks).toString();
      let verified = false;
      try {
        new Webhook(secret).verify(payload, req.headers as Record<string, string>);
        verified = true;
      } catch {}
      const body = JSON.parse(payload) as Record<string, unknown>;
      received.push({ id: String(req.headers["webhook-id"]), type: String(body.type ?? ""), body, at: Date.now(), verified, path: req.url ?? "" });
      open.add(res);
      res.on("close", () => open.delete(res));
      answer(n++, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    received,
    setSecret: (s: string) => (secret = s),
    async close() {
      for (const res of open) res.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

const FAST = { allowPrivate: true, timeoutMs: 500, backoffMinMs: 100, backoffMaxMs: 1000, pollIntervalMs: 100 };

async function deliveries(ctrl: TestCtrl, notifier?: string): Promise<Delivery[]> {
  return (await ctrl.client(NotifierService).listDeliveries({ notifier })).deliveries;
}

for (const { db, skip } of await testDatabases()) {
  test(`notifiers: the signing secret is shown once and rotates; bad input is refused and writes nothing (${db.name})`, { skip }, async () => {
    const ctrl = await startTestCtrl(db); // the default policy: private addresses refused
    try {
      const notifiers = ctrl.client(NotifierService);
      const good = { name: "chat", url: "https://hooks.example.com/flotilla", format: NotifierFormat.STANDARD_WEBHOOKS };
      const dry = await notifiers.createNotifier({ notifier: good, validateOnly: true });
      assert.equal(dry.signingSecret, "");
      const before = await rowCounts(ctrl.store);
      const refusals: [object, RegExp][] = [
        [{ ...good, name: "Bad_Name" }, /notifier\.name/],
        [{ ...good, url: "http://169.254.169.254/latest/meta-data/" }, /notifier\.url: .*metadata/],
        [{ ...good, url: "http://10.0.0.7/hook" }, /notifier\.url: .*--notifier-allow-private-addresses/],
        [{ ...good, url: "http://127.0.0.1:9/hook" }, /notifier\.url/],
        [{ ...good, url: "https://user:pw@hooks.example.com/" }, /notifier\.url: .*credentials/],
        [{ ...good, url: "not a url" }, /notifier\.url/],
        [{ ...good, format: NotifierFormat.UNSPECIFIED }, /notifier\.format/],
        [{ ...good, events: [NotificationEvent.TEST] }, /notifier\.events\[0\]/],
        [{ ...good, events: [NotificationEvent.ROLLOUT_FAILED, NotificationEvent.ROLLOUT_FAILED] }, /notifier\.events\[1\]/],
        [{ ...good, selector: { namespaces: ["Team A"] } }, /notifier\.selector\.namespaces\[0\]/],
        [{ ...good, selector: { labels: "app in (" } }, /notifier\.selector\.labels/],
      ];
      for (const [notifier, message] of refusals) {
        const error = await notifiers.createNotifier({ notifier }).then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
        assert.equal(error?.code, Code.InvalidArgument, JSON.stringify(notifier));
        assert.match(error.rawMessage, message);
      }
      assert.deepEqual(await rowCounts(ctrl.store), before, "a refused write writes nothing");

      const created = await notifiers.createNotifier({ notifier: good });
      assert.match(created.signingSecret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      const duplicate = await notifiers.createNotifier({ notifier: good }).catch((e: unknown) => ConnectError.from(e));
      assert.equal((duplicate as ConnectError).code, Code.AlreadyExists);
      const secretPart = created.signingSecret.slice("whsec_".length);
      const reads = JSON.stringify(
        [
          await notifiers.getNotifier({ name: "chat" }),
          await notifiers.listNotifiers({}),
          await notifiers.updateNotifier({ notifier: { ...good, events: [NotificationEvent.ROLLOUT_FAILED] } }),
        ],
        (_k, v) => (typeof v === "bigint" ? String(v) : v),
      );
      assert.ok(!reads.includes(secretPart), "no read carries the secret");
      const rotated = await notifiers.rotateNotifierSecret({ name: "chat" });
      assert.match(rotated.signingSecret, /^whsec_/);
      assert.notEqual(rotated.signingSecret, created.signingSecret);
      assert.ok(!toJsonString(GetNotifierResponseSchema, await notifiers.getNotifier({ name: "chat" })).includes(rotated.signingSecret.slice(6)));
      const notFound = await notifiers.rotateNotifierSecret({ name: "nope" }).catch((e: unknown) => ConnectError.from(e));
      assert.equal((notFound as ConnectError).code, Code.NotFound);

      // A fleet-wide viewer reads notifiers and deliveries, and changes nothing.
      const viewer = (await ctrl.client(OperatorService).createOperator({ name: "watcher", role: Role.VIEWER })).token;
      const asViewer = ctrl.client(NotifierService, { token: viewer });
      assert.equal((await asViewer.listNotifiers({})).notifiers.length, 1);
      const denied = await asViewer.rotateNotifierSecret({ name: "chat" }).catch((e: unknown) => ConnectError.from(e));
      assert.equal((denied as ConnectError).code, Code.PermissionDenied);
    } finally {
      await ctrl.close();
    }
  });

  test(`delivery: rollout events, signed, retried after 500, Retry-After honoured, selectors (${db.name})`, { skip, timeout: 120_000 }, async () => {
    // The first request answers 500, the second 429 with Retry-After: 1, then 200.
    const hook = await receiver((n, res) => {
      if (n === 0) res.writeHead(500).end("boom");
      else if (n === 1) res.writeHead(429, { "retry-after": "1" }).end();
      else res.end("ok");
    });
    const slack = await receiver();
    // An incoming webhook's path is its credential, as Slack's are.
    const slackUrl = `${slack.url}/services/T0000/B0000/${randomBytes(12).toString("hex")}`;
    const elsewhere = await receiver();
    const ctrl = await startTestCtrl(db, { notifications: FAST }, { secrets: testSecretKeyRing() });
    try {
      const notifiers = ctrl.client(NotifierService);
      hook.setSecret((await notifiers.createNotifier({ notifier: { name: "hook", url: hook.url, format: NotifierFormat.STANDARD_WEBHOOKS } })).signingSecret);
      slack.setSecret(
        (
          await notifiers.createNotifier({
            notifier: {
              name: "slack",
              url: slackUrl,
              format: NotifierFormat.SLACK,
              events: [NotificationEvent.ROLLOUT_WAITING_APPROVAL],
              selector: { namespaces: ["sh*"], labels: "team=shop" },
            },
          })
        ).signingSecret,
      );
      await notifiers.createNotifier({
        notifier: { name: "elsewhere", url: elsewhere.url, format: NotifierFormat.STANDARD_WEBHOOKS, selector: { namespaces: ["other-*"] } },
      });
      await ctrl.client(RegionService).createRegion({ region: { name: "eu" } });
      await ctrl.client(DeploymentService).createDeployment({
        deployment: {
          id: "shop",
          namespace: "shop",
          image: "nginx:1.27",
          podLabels: { team: "shop" },
          regions: [{ region: "eu", replicas: 1 }],
          strategy: { waves: [{ name: "first", regions: ["eu"], approval: true }] },
        },
      });
      // rollout.started and rollout.waiting_approval, written with the rollout's first transition.
      const done = await until("both hook deliveries DELIVERED", async () => {
        const list = await deliveries(ctrl, "hook");
        return list.length === 2 && list.every((d) => d.state === DeliveryState.DELIVERED) ? list : undefined;
      });
      assert.deepEqual(done.map((d) => d.event).sort(), [NotificationEvent.ROLLOUT_STARTED, NotificationEvent.ROLLOUT_WAITING_APPROVAL]);
      assert.deepEqual(
        done.map((d) => d.attempts),
        [2, 2],
        "each failed once (500, 429), then was delivered",
      );
      assert.ok(
        hook.received.every((r) => r.verified),
        "every request verifies with the signing secret",
      );
      // The failed delivery came again with the same webhook-id; the 429's retry waited for Retry-After.
      const retried = hook.received.filter((r) => r.id === hook.received[0]!.id);
      assert.ok(retried.length >= 2, `the same webhook-id again after the 500: ${JSON.stringify(hook.received.map((r) => r.id))}`);
      const after429 = hook.received.findIndex((r, i) => i > 1 && r.id === hook.received[1]!.id);
      assert.ok(after429 > 1, "the delivery answered 429 was attempted again");
      assert.ok(hook.received[after429]!.at - hook.received[1]!.at >= 950, "not before its Retry-After");
      const started = hook.received.find((r) => r.type === "rollout.started")!;
      assert.equal((started.body.data as Record<string, unknown>).deployment, "shop");
      assert.equal((started.body.data as Record<string, unknown>).namespace, "shop");
      // Slack: its one event, in Slack's shape; the other selector matched nothing.
      await until("the slack delivery", () => slack.received.length === 1);
      assert.match(String(slack.received[0]!.body.text), /shop waits for approval/);
      assert.equal(slack.received[0]!.path, new URL(slackUrl).pathname, "sent to the whole URL");
      // Never read back: the URL shows cut after its first path segment, in reads and at rest.
      const shown = `${new URL(slackUrl).origin}/hook/…`;
      assert.equal((await notifiers.getNotifier({ name: "slack" })).notifier?.url, shown);
      assert.ok((await notifiers.listNotifiers({})).notifiers.every((n) => !n.url.includes(new URL(slackUrl).pathname)));
      const token = slackUrl.slice(slackUrl.lastIndexOf("/") + 1);
      const stored = await ctrl.store.database.db.selectFrom("notifiers").selectAll().execute();
      assert.ok(!JSON.stringify(stored.map((r) => [r.spec, Buffer.from(r.url_secret ?? []).toString("latin1")])).includes(token), "no token at rest");
      // Sent back as shown (an edit of its events), the URL stays.
      const current = (await notifiers.getNotifier({ name: "slack" })).notifier!;
      await notifiers.updateNotifier({ notifier: { ...current, events: [NotificationEvent.ROLLOUT_WAITING_APPROVAL, NotificationEvent.ROLLOUT_SUCCEEDED] } });
      await notifiers.testNotifier({ name: "slack" });
      await until("the slack test delivery", () => slack.received.length === 2);
      assert.equal(slack.received[1]!.path, new URL(slackUrl).pathname, "still the whole URL");
      await sleep(300);
      assert.equal(elsewhere.received.length, 0);
      assert.equal((await deliveries(ctrl, "elsewhere")).length, 0);

      // A later transition (an operator's pause, the rollout's compare-and-set) owes its event too.
      await ctrl.client(RolloutService).pauseRollout({ id: "shop", message: "freeze" });
      const paused = await until("rollout.paused", () => hook.received.find((r) => r.type === "rollout.paused" && r.verified));
      assert.equal((paused.body.data as Record<string, unknown>).actor, "admin");
      assert.equal(slack.received.length, 2, "slack subscribes to waiting_approval (and the test) only");

      // notifier test: a notifier.test event, delivered like any other.
      const { delivery } = await notifiers.testNotifier({ name: "hook" });
      assert.equal(delivery?.event, NotificationEvent.TEST);
      await until("the test event", () => hook.received.some((r) => r.type === "notifier.test" && r.verified));
    } finally {
      await ctrl.close();
      await Promise.all([hook.close(), slack.close(), elsewhere.close()]);
    }
  });

  test(`a staged rollout with an agent: its start, wave, success, failure and way back are delivered (${db.name})`, { skip, timeout: 120_000 }, async () => {
    const hook = await receiver();
    const stack = await startStack(db, { ctrl: { notifications: FAST } });
    try {
      await stack.agent();
      const notifiers = stack.t.client(NotifierService);
      hook.setSecret((await notifiers.createNotifier({ notifier: { name: "all", url: hook.url, format: NotifierFormat.STANDARD_WEBHOOKS } })).signingSecret);
      const deployment = (image: string) => ({
        id: "web",
        namespace: "demo",
        image,
        regions: [{ region: REGION, replicas: 1 }],
        strategy: { waves: [{ name: "first", regions: [REGION], progressDeadline: { seconds: 3n } }], onFailure: RolloutFailurePolicy.ROLLBACK },
      });
      await stack.t.client(DeploymentService).createDeployment({ deployment: deployment("nginx:1.27") });
      await until("three events", () => hook.received.length >= 3, 30_000);
      await sleep(200);
      // Deliveries are not ordered (several in flight to one receiver): the set of them.
      assert.deepEqual(hook.received.map((r) => r.type).sort(), ["rollout.started", "rollout.succeeded", "rollout.wave_succeeded"]);
      await stack.t.client(DeploymentService).updateDeployment({ deployment: deployment("nginx:fail") });
      await until("rollout.rolled_back", () => hook.received.some((r) => r.type === "rollout.rolled_back"), 30_000);
      const second = hook.received.slice(3).map((r) => r.type);
      for (const type of ["rollout.started", "rollout.failed", "rollout.rolled_back"]) assert.ok(second.includes(type), `${type} in ${second.join(", ")}`);
      assert.ok(
        hook.received.every((r) => r.verified),
        "every request verifies",
      );
      const rolledBack = hook.received.find((r) => r.type === "rollout.rolled_back")!.body.data as Record<string, unknown>;
      assert.equal(rolledBack.rollout, "web-2");
      assert.equal(rolledBack.namespace, "demo");
    } finally {
      await stack.close();
      await hook.close();
    }
  });

  test(`a receiver that never answers delays no other and is dead-lettered after --notifier-max-attempts (${db.name})`, {
    skip,
    timeout: 120_000,
  }, async () => {
    const dead = await receiver(() => {}); // never answers
    const live = await receiver();
    const ctrl = await startTestCtrl(db, {
      notifications: { ...FAST, timeoutMs: 1500, maxAttempts: 2, perNotifierConcurrency: 2, concurrency: 3, batchSize: 2 },
    });
    try {
      const notifiers = ctrl.client(NotifierService);
      dead.setSecret((await notifiers.createNotifier({ notifier: { name: "dead", url: dead.url, format: NotifierFormat.STANDARD_WEBHOOKS } })).signingSecret);
      live.setSecret((await notifiers.createNotifier({ notifier: { name: "live", url: live.url, format: NotifierFormat.STANDARD_WEBHOOKS } })).signingSecret);
      for (let i = 0; i < 6; i++) await notifiers.testNotifier({ name: "dead" });
      const sent = Date.now();
      for (let i = 0; i < 3; i++) await notifiers.testNotifier({ name: "live" });
      // Unbounded per receiver, the dead one's attempts would hold every slot for 1.5 s at a time.
      await until("the live receiver's three events", () => live.received.length >= 3, 5_000);
      assert.ok(Date.now() - sent < 1_200, `the live receiver waited ${Date.now() - sent} ms behind the dead one`);
      // Per-receiver concurrency: the dead receiver never held more than 2 requests at once.
      const deadList = await until("every dead delivery DEAD", async () => {
        const list = await deliveries(ctrl, "dead");
        return list.every((d) => d.state === DeliveryState.DEAD) ? list : undefined;
      });
      assert.equal(deadList.length, 6);
      for (const d of deadList) {
        assert.equal(d.attempts, 2);
        assert.match(d.lastError, /no answer within 1500 ms.*dead-lettered/);
      }
      // Each of the 6 × 2 attempts reached the receiver, two at a time at most.
      assert.equal(dead.received.length, 12);
      const byTime = dead.received.map((r) => r.at).sort((a, b) => a - b);
      for (let i = 2; i < byTime.length; i++) assert.ok(byTime[i]! - byTime[i - 2]! >= 1_200, "at most 2 attempts to one receiver at once");
      assert.equal((await ctrl.client(NotifierService).listDeliveries({ state: DeliveryState.DEAD })).deliveries.length, 6);
    } finally {
      await ctrl.close();
      await Promise.all([dead.close(), live.close()]);
    }
  });

  test(`--notifier-concurrency bounds the attempts in flight of a replica (${db.name})`, { skip, timeout: 120_000 }, async () => {
    const hang = await receiver(() => {}); // never answers
    const ctrl = await startTestCtrl(db, { notifications: { ...FAST, timeoutMs: 1000, maxAttempts: 1, concurrency: 2, perNotifierConcurrency: 10 } });
    try {
      const notifiers = ctrl.client(NotifierService);
      hang.setSecret((await notifiers.createNotifier({ notifier: { name: "hang", url: hang.url, format: NotifierFormat.STANDARD_WEBHOOKS } })).signingSecret);
      for (let i = 0; i < 4; i++) await notifiers.testNotifier({ name: "hang" });
      await until("four attempts", () => hang.received.length >= 4, 10_000);
      const at = hang.received.map((r) => r.at).sort((a, b) => a - b);
      assert.ok(at[2]! - at[0]! >= 800, `the third attempt waited for a free slot: ${at.map((t) => t - at[0]!).join(", ")} ms`);
      assert.ok(at[3]! - at[1]! >= 800, "and the fourth");
    } finally {
      await ctrl.close();
      await hang.close();
    }
  });

  test(`the claim is a compare-and-set; a batch is at most --notifier-batch-size (${db.name})`, { skip }, async () => {
    const { store, cleanup } = await freshStore(db);
    try {
      await store.notifications.create(
        { name: "n", url: "https://example.com/", format: NotifierFormat.STANDARD_WEBHOOKS, events: [], $typeName: "ctrl.v1.Notifier" } as never,
        false,
      );
      for (let i = 0; i < 5; i++) await store.notifications.test("n");
      const now = Date.now() + 10;
      const [a, b] = await Promise.all([store.notifications.claim(3, 10, new Map(), 60_000, now), store.notifications.claim(3, 10, new Map(), 60_000, now)]);
      assert.ok(a.length <= 3 && b.length <= 3, "at most the batch");
      // A candidate the other claimer took first is left out; the next round takes the rest.
      const rest = await store.notifications.claim(5, 10, new Map(), 60_000, now);
      const ids = [...a, ...b, ...rest].map((d) => d.id);
      assert.equal(new Set(ids).size, ids.length, "no delivery claimed twice");
      assert.equal(ids.length, 5);
      const claimed = a[0]!;
      assert.match(claimed.secret, /^whsec_/);
      assert.equal(
        await store.notifications.complete(claimed.id, claimed.generation - 1, { kind: "delivered", status: 200 }),
        false,
        "a stale claim writes nothing",
      );
      assert.equal(await store.notifications.complete(claimed.id, claimed.generation, { kind: "delivered", status: 200 }), true);
      assert.equal((await store.notifications.claim(10, 10, new Map(), 60_000, now)).length, 0, "claimed ones are not due again before their claim ends");
      assert.equal((await store.notifications.claim(10, 10, new Map(), 60_000, now + 61_000)).length, 4, "an expired claim is due again");
      assert.equal((await store.notifications.claim(10, 1, new Map([["n", 1]]), 60_000, now + 200_000)).length, 0, "a notifier at its limit is skipped");
    } finally {
      await cleanup();
    }
  });

  test(`a ctrl replica killed with kill -9 mid-delivery: another delivers it, nothing lost (${db.name})`, { skip, timeout: 120_000 }, async () => {
    let killFirst: (() => void) | undefined;
    const hook = await receiver((n, res) => {
      if (n === 0)
        killFirst?.(); // the first attempt hangs: its replica dies mid-delivery
      else res.end("ok");
    });
    const { url, cleanup } = await freshStore(db);
    const flags = ["--notifier-allow-private-addresses", "--notifier-timeout=1s", "--notifier-poll-interval=100ms", "--notifier-backoff-min=100ms"];
    const first = await spawnCtrl(url, ADMIN_TOKEN, flags);
    let second: Awaited<ReturnType<typeof spawnCtrl>> | undefined;
    try {
      const client = (base: string) =>
        createClient(
          NotifierService,
          createConnectTransport({
            baseUrl: base,
            httpVersion: "1.1",
            interceptors: [
              (next) => (req) => {
                req.header.set("authorization", `Bearer ${ADMIN_TOKEN}`);
                return next(req);
              },
            ],
          }),
        );
      const killed = new Promise<void>((resolve) => (killFirst = resolve));
      const created = await client(first.url).createNotifier({ notifier: { name: "hook", url: hook.url, format: NotifierFormat.STANDARD_WEBHOOKS } });
      hook.setSecret(created.signingSecret);
      const { delivery } = await client(first.url).testNotifier({ name: "hook" });
      await killed;
      await first.kill("SIGKILL");
      second = await spawnCtrl(url, ADMIN_TOKEN, flags);
      const delivered = await until("the delivery DELIVERED by the second replica", async () => {
        const [d] = (await client(second!.url).listDeliveries({ notifier: "hook" })).deliveries;
        return d?.state === DeliveryState.DELIVERED ? d : undefined;
      });
      assert.equal(delivered.id, delivery!.id);
      assert.equal(hook.received.length, 2);
      assert.equal(hook.received[0]!.id, hook.received[1]!.id, "the same webhook-id: a receiver drops the duplicate");
      assert.ok(hook.received.every((r) => r.verified));
      for (const log of [first.log(), second.log()]) assert.ok(!log.includes(created.signingSecret.slice(6)), "no secret in a log");
    } finally {
      await first.kill("SIGKILL");
      await second?.kill("SIGKILL");
      await hook.close();
      await cleanup();
    }
  });
}

test("address checks: the metadata address always refused, private ranges only when allowed", () => {
  for (const allowPrivate of [false, true]) {
    assert.match(addressRefusal("169.254.169.254", { allowPrivate }) ?? "", /metadata/);
    assert.match(addressRefusal("::ffff:169.254.169.254", { allowPrivate }) ?? "", /metadata/);
    assert.match(addressRefusal("fd00:ec2::254", { allowPrivate }) ?? "", /metadata/);
    assert.match(urlProblem("http://169.254.169.254/latest/meta-data", { allowPrivate }) ?? "", /metadata/);
    assert.match(urlProblem("http://metadata.google.internal/", { allowPrivate }) ?? "", /metadata/);
  }
  for (const ip of ["10.1.2.3", "127.0.0.1", "192.168.1.1", "172.20.0.1", "::1", "fe80::1", "fd12::1", "100.64.0.1"]) {
    assert.match(addressRefusal(ip, { allowPrivate: false }) ?? "", /private/, ip);
    assert.equal(addressRefusal(ip, { allowPrivate: true }), undefined, ip);
  }
  assert.equal(addressRefusal("93.184.215.14", { allowPrivate: false }), undefined);
  assert.match(urlProblem("http://localhost:8080/x", { allowPrivate: false }) ?? "", /private/);
  assert.match(urlProblem("ftp://example.com/", { allowPrivate: false }) ?? "", /http/);
  assert.match(urlProblem("https://u:p@example.com/", { allowPrivate: false }) ?? "", /credentials/);
  assert.equal(urlProblem("https://hooks.example.com/x", { allowPrivate: false }), undefined);
});

test("retries: exponential backoff with jitter, capped, never before Retry-After", () => {
  const o = { backoffMinMs: 1000, backoffMaxMs: 8000 };
  assert.equal(
    retryDelay(o, 1, undefined, () => 1),
    1000,
  );
  assert.equal(
    retryDelay(o, 3, undefined, () => 1),
    4000,
  );
  assert.equal(
    retryDelay(o, 3, undefined, () => 0),
    2000,
  );
  assert.equal(
    retryDelay(o, 10, undefined, () => 1),
    8000,
  );
  assert.equal(
    retryDelay(o, 1, 30_000, () => 1),
    30_000,
  );
  assert.equal(
    retryDelay(o, 1, 10 * 3600_000, () => 1),
    3600_000,
    "a Retry-After is honoured up to an hour",
  );
  assert.equal(parseRetryAfter("3", 0), 3000);
  assert.equal(parseRetryAfter(new Date(10_000).toUTCString(), 5_000), 5000);
  assert.equal(parseRetryAfter("soon", 0), undefined);
});

test("every delivery bound has a default and a flag", () => {
  const parsed = parseConfig([
    "--notifier-timeout=2s",
    "--notifier-max-attempts=3",
    "--notifier-batch-size=7",
    "--notifier-concurrency=5",
    "--notifier-per-receiver-concurrency=2",
    "--notifier-backoff-min=250ms",
    "--notifier-backoff-max=1m",
    "--notifier-poll-interval=300ms",
    "--notifier-allow-private-addresses",
  ]);
  assert.ok(parsed !== "help");
  const c = parsed.config;
  assert.deepEqual(
    [
      c["notifier-timeout"],
      c["notifier-max-attempts"],
      c["notifier-batch-size"],
      c["notifier-concurrency"],
      c["notifier-per-receiver-concurrency"],
      c["notifier-allow-private-addresses"],
    ],
    ["2s", "3", "7", "5", "2", "true"],
  );
  const defaults = parseConfig([]);
  assert.ok(defaults !== "help");
  assert.equal(defaults.config["notifier-timeout"], "10s");
  assert.equal(defaults.config["notifier-max-attempts"], String(DEFAULT_DISPATCHER_OPTIONS.maxAttempts));
  assert.equal(defaults.config["notifier-batch-size"], String(DEFAULT_DISPATCHER_OPTIONS.batchSize));
  assert.equal(defaults.config["notifier-concurrency"], String(DEFAULT_DISPATCHER_OPTIONS.concurrency));
  assert.equal(defaults.config["notifier-per-receiver-concurrency"], String(DEFAULT_DISPATCHER_OPTIONS.perNotifierConcurrency));
  assert.equal(defaults.config["notifier-allow-private-addresses"], "false");
});
