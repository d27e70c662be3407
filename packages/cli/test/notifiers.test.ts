// Notifiers from the CLI: `apply` of a kind: Notifier manifest prints its signing secret once
// (again: unchanged, no secret); `get notifiers` never shows it; `notifier test` sends a
// notifier.test event to a real receiver that verifies its signature with the standardwebhooks
// package; `get deliveries` lists it; a receiver that answers 500 makes `notifier test` exit 1;
// `notifier rotate-secret` prints a new one; bad manifests are refused naming the field, and
// write nothing.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { testDatabases } from "@flotilla/testkit/databases";
import { ADMIN_TOKEN, rowCounts, startTestCtrl, type TestCtrl } from "@flotilla/testkit/ctrl";
import { runCli } from "./cli-harness.ts";

const [{ db }] = await testDatabases();

const notifier = (name: string, url: string, extra = "") =>
  `apiVersion: flotilla.dev/v1\nkind: Notifier\nmetadata:\n  name: ${name}\nspec:\n  url: ${url}\n  format: standard-webhooks\n${extra}`;

describe("flotilla and notifiers", () => {
  let ctrl: TestCtrl;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let server: http.Server;
  let url = "";
  let secret = "";
  let status = 200;
  const verified: string[] = [];
  const flotilla = (args: string[]) => runCli(env, args);
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  before(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks).toString();
        try {
          new Webhook(secret).verify(body, req.headers as Record<string, string>);
          verified.push(JSON.parse(body).type);
        } catch {}
        res.writeHead(status).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    ctrl = await startTestCtrl(db, { notifications: { allowPrivate: true, pollIntervalMs: 100, timeoutMs: 1000, backoffMinMs: 60_000 } });
    dir = mkdtempSync(join(tmpdir(), "flotilla-notifiers-"));
    writeFileSync(join(dir, "admin.token"), `${ADMIN_TOKEN}\n`);
    env = { PATH: process.env.PATH, FLOTILLA_CONFIG: join(dir, "config.yaml") };
    const set = await flotilla(["context", "set", "test", "--server", ctrl.url, "--token-file", join(dir, "admin.token")]);
    assert.equal(set.code, 0, set.stderr);
  });
  after(async () => {
    await ctrl?.close();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("bad manifests are refused naming the field, and write nothing", async () => {
    const before = await rowCounts(ctrl.store);
    const cases: [string, RegExp][] = [
      [notifier("x", url).replace("standard-webhooks", "teams"), /spec\.format: must be standard-webhooks or slack/],
      [notifier("x", url, "  events: [rollout.exploded]\n"), /spec\.events\[0\]: "rollout.exploded" is not one of/],
      [notifier("x", "http://169.254.169.254/"), /notifier\.url: .*metadata/],
      [notifier("x", url, "  selector: { labels: 'a in (' }\n"), /notifier\.selector\.labels/],
    ];
    for (const [text, message] of cases) {
      const r = await flotilla(["apply", "-f", file("bad.yaml", text)]);
      assert.equal(r.code, 1, r.stdout);
      assert.match(r.stderr, message);
    }
    assert.deepEqual(await rowCounts(ctrl.store), before);
  });

  test("apply shows the signing secret once; get never; notifier test delivers, signed; get deliveries lists it", async () => {
    const manifest = file("chat.yaml", notifier("chat", url, "  events: [rollout.failed, deployment.failed]\n  selector: { namespaces: [shop-*] }\n"));
    const applied = await flotilla(["apply", "-f", manifest]);
    assert.equal(applied.code, 0, applied.stderr);
    const shown = /signing secret \(shown once, keep it for your receiver\): (whsec_\S+)/.exec(applied.stdout);
    assert.ok(shown, applied.stdout);
    secret = shown[1]!;
    assert.match(applied.stdout, /^notifier\/chat created\n/);
    const again = await flotilla(["apply", "-f", manifest]);
    assert.equal(again.stdout, "notifier/chat unchanged\n");
    const diff = await flotilla(["diff", "-f", manifest]);
    assert.equal(diff.code, 0, diff.stdout);
    const got = await flotilla(["get", "notifiers"]);
    assert.match(
      got.stdout,
      /^NAME +FORMAT +EVENTS +SELECTOR +SECRET-AGE +AGE\nchat +standard-webhooks +rollout.failed,deployment.failed +namespaces: shop-\* /,
    );
    const yaml = await flotilla(["get", "notifier", "chat", "-o", "yaml"]);
    for (const out of [got.stdout, yaml.stdout]) assert.ok(!out.includes(secret.slice(6)), "no read shows the secret");

    const tested = await flotilla(["notifier", "test", "chat"]);
    assert.equal(tested.code, 0, tested.stderr);
    assert.match(tested.stdout, /queued to notifier\/chat\ndelivered \(HTTP 200, attempt 1\)\n/);
    assert.deepEqual(verified, ["notifier.test"]);
    const deliveries = await flotilla(["get", "deliveries"]);
    assert.match(deliveries.stdout, /^ID +NOTIFIER +EVENT +SUBJECT +STATE +ATTEMPTS +LAST +NEXT +AGE\n\d+ +chat +notifier.test +chat +DELIVERED +1 /);
  });

  test("a receiver that answers 500: notifier test exits 1 with its answer; get deliveries --state pending shows the retry", async () => {
    status = 500;
    const tested = await flotilla(["notifier", "test", "chat"]);
    assert.equal(tested.code, 1, tested.stdout);
    assert.match(tested.stderr, /attempt 1 failed: HTTP 500 \(ctrl retries it\)/);
    const pending = await flotilla(["get", "deliveries", "chat", "--state", "pending"]);
    assert.match(pending.stdout, /chat +notifier.test +chat +PENDING +1 +HTTP 500 +in \d+s/);
    status = 200;
  });

  test("rotate-secret prints a new secret; the next delivery is signed with it", async () => {
    const rotated = await flotilla(["notifier", "rotate-secret", "chat"]);
    assert.equal(rotated.code, 0, rotated.stderr);
    const next = /new signing secret \(shown once, keep it for your receiver\): (whsec_\S+)/.exec(rotated.stdout);
    assert.ok(next && next[1] !== secret);
    secret = next[1]!;
    const tested = await flotilla(["notifier", "test", "chat"]);
    assert.equal(tested.code, 0, tested.stderr);
    assert.equal(verified.at(-1), "notifier.test");
    const deleted = await flotilla(["delete", "notifier", "chat"]);
    assert.equal(deleted.stdout, "notifier/chat deleted\n");
  });
});
